-- Timestamps: a timestamp column (ts, bounded, public_range; logged, stored as TIMESTAMPTZ and
-- read in UTC, no bounds), its grains as public keys, MIN/MAX/MEDIAN as timestamps, and the
-- row-level SQL of time filters. Run on the crafted "events" database (databases.py):
-- 2,000 people, one event each in 2025-01-01 .. 2025-03-31.
-- database: events

-- case: ts count in a timestamp range
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT COUNT(*) FROM events WHERE ts >= TIMESTAMP '2025-02-01' AND ts < TIMESTAMP '2025-03-01';

-- case: ts superset to_timestamp filter
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts >= TO_TIMESTAMP('2025-03-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND ts < TO_TIMESTAMP('2025-03-08 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US');

-- case: ts superset cast filter
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts >= CAST('2025-03-01T00:00:00' AS TIMESTAMP);

-- case: ts compared with text with a zone
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts >= '2025-03-01 02:00:00+02';

-- case: ts compared with a date literal
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts BETWEEN DATE '2025-01-01' AND TO_DATE('2025-01-31', 'YYYY-MM-DD');

-- case: ts month grain with public domain
-- expect: accepted keys=1 release=domain:3 types=BIGINT rows=3
SELECT DATE_TRUNC('month', ts) AS month, COUNT(*) FROM events GROUP BY month ORDER BY month;

-- case: ts day grain with public domain
-- expect: accepted release=domain:90 rows=90
SELECT DATE_TRUNC('day', ts) AS day, COUNT(*) FROM events GROUP BY 1 ORDER BY 1;

-- case: ts hour grain with public domain
-- expect: accepted release=domain:2160
SELECT DATE_TRUNC('hour', ts) AS h, COUNT(*) FROM events GROUP BY h;

-- case: ts hour of day
-- expect: accepted release=domain:24 rows=24
SELECT HOUR(ts) AS h, COUNT(*) FROM events GROUP BY h ORDER BY h;

-- case: ts date_part minute
-- expect: accepted release=domain:60
SELECT DATE_PART('minute', ts) AS m, AVG(amount) FROM events GROUP BY m;

-- case: ts extract day of week
-- expect: accepted release=domain:7 rows=7
SELECT EXTRACT(dow FROM ts) AS dow, SUM(amount) FROM events GROUP BY dow ORDER BY dow;

-- case: ts week grain
-- expect: accepted release=domain:14
SELECT DATE_TRUNC('week', ts) AS w, COUNT(*) FROM events GROUP BY w;

-- case: ts min max median
-- expect: accepted cells=3 types=TIMESTAMP|TIMESTAMP|TIMESTAMP rows=1
SELECT MIN(ts), MAX(ts), MEDIAN(ts) FROM events;

-- case: ts quantile per month
-- expect: accepted types=TIMESTAMP release=domain:3 rows=3
SELECT DATE_TRUNC('month', ts) AS m, QUANTILE_CONT(ts, 0.9) FROM events GROUP BY m;

-- case: ts span in the outer query
-- expect: accepted rows=1
SELECT DATE_DIFF('day', MIN(ts), MAX(ts)) AS span FROM events;

-- case: ts shifted by an interval
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts - INTERVAL 7 DAY >= TIMESTAMP '2025-03-01';

-- case: ts plus interval text
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts + INTERVAL '2 hours' < TIMESTAMP '2025-01-02';

-- case: ts cast to date
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE CAST(ts AS DATE) = DATE '2025-01-05';

-- case: ts epoch summed
-- expect: accepted l1[0]=7776000 rows=1
SELECT SUM(EPOCH(ts) - 1735689600) FROM events;

-- case: ts date_diff summed
-- expect: accepted rows=1
SELECT SUM(DATE_DIFF('day', TIMESTAMP '2025-01-01', ts)) FROM events;

-- case: ts compared with a date column
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts >= day;

-- case: timestamptz column read in utc
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE logged < TIMESTAMP '2025-02-01';

-- case: to_timestamp of a text column
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE TO_TIMESTAMP(ts_text, 'YYYY-MM-DD HH24:MI:SS') < TIMESTAMP '2025-02-01';

-- case: cast of a text column to timestamp
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE CAST(ts_text AS TIMESTAMP) < TIMESTAMP '2025-02-01';

-- case: to_timestamp of epoch seconds
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE TO_TIMESTAMP(amount * 1e9) < ts;

-- case: to_timestamp of a constant is folded
-- expect: accepted rows=1
SELECT COUNT(*) FROM events WHERE ts >= TO_TIMESTAMP(1740787200);

-- case: ts compared with a number
-- expect: refused UnboundedExpression mentions="with a number"
SELECT COUNT(*) FROM events WHERE ts > 5;

-- case: ts cast to timestamptz
-- expect: refused UnboundedExpression mentions="cast to TIMESTAMP instead"
SELECT COUNT(*) FROM events WHERE CAST(ts AS TIMESTAMPTZ) > TIMESTAMP '2025-01-01';

-- case: ts at time zone
-- expect: refused UnboundedExpression mentions="AT TIME ZONE is not supported"
SELECT COUNT(*) FROM events WHERE ts AT TIME ZONE 'Europe/Paris' > TIMESTAMP '2025-01-01';

-- case: ts shifted too far
-- expect: refused UnboundedExpression mentions="10000 years"
SELECT COUNT(*) FROM events WHERE ts + INTERVAL 20000 YEAR > TIMESTAMP '2025-01-01';

-- case: ts shifted by a column
-- expect: refused UnboundedExpression mentions="DATE_DIFF"
SELECT COUNT(*) FROM events WHERE ts + amount > TIMESTAMP '2025-01-01';

-- case: ts released without aggregation
-- expect: refused NonAggregatedColumn
SELECT ts FROM events;

-- case: ts minute grain has no domain
-- expect: refused KeyReleaseRefused mentions="public domain"
SELECT DATE_TRUNC('minute', ts) AS m, COUNT(*) FROM events GROUP BY m;

-- case: ts itself has no domain
-- expect: refused KeyReleaseRefused
SELECT ts, COUNT(*) FROM events GROUP BY ts;

-- case: quantile of an unbounded timestamp
-- expect: refused UnboundedExpression mentions="needs declared timestamp bounds"
SELECT MAX(logged) FROM events;

-- case: ts invalid timestamp text
-- expect: refused InvalidConstant mentions="not a timestamp"
SELECT COUNT(*) FROM events WHERE ts > '2025-02-30 10:00:00';

-- case: to_timestamp text that does not match its format
-- expect: refused InvalidConstant mentions="TO_TIMESTAMP('2025-03-01', 'YYYY-MM-DD HH24')"
SELECT COUNT(*) FROM events WHERE ts > TO_TIMESTAMP('2025-03-01', 'YYYY-MM-DD HH24');

-- case: to_timestamp with a time zone format
-- expect: refused InvalidConstant mentions="time zones"
SELECT COUNT(*) FROM events WHERE ts > TO_TIMESTAMP('2025-03-01 +02', 'YYYY-MM-DD TZH');

-- case: hour of a number
-- expect: refused UnboundedExpression mentions="needs a date or a timestamp"
SELECT COUNT(*) FROM events WHERE HOUR(amount) = 1;

-- case: date_diff with a part from a column
-- expect: refused UnboundedExpression mentions="must be a constant"
SELECT COUNT(*) FROM events WHERE DATE_DIFF(ts_text, ts, ts) > 1;

-- case: ts month grain with threshold on a sample-less key
-- options: delta=1e-6
-- expect: accepted release=threshold
SELECT DATE_TRUNC('minute', ts) AS m, COUNT(*) FROM events GROUP BY m;

-- case: grafana timegroupalias over a timefilter on a timestamp
-- expect: accepted keys=1 release=domain:72 rows=72
SELECT floor(extract(epoch from ts)/3600)*3600 AS "time", count(*) AS "value" FROM events WHERE ts BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-06T23:59:59.999Z' GROUP BY 1 ORDER BY 1;

-- case: grafana daily epoch group over the whole public range
-- expect: accepted release=domain:90 rows=90
SELECT floor(extract(epoch from ts)/86400)*86400 AS "time", count(*) FROM events GROUP BY 1 ORDER BY 1;

-- case: epoch of an hour grain over a timefilter
-- expect: accepted release=domain:72
SELECT extract(epoch from date_trunc('hour', ts)) AS "time", count(*) FROM events WHERE ts BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-06T23:59:59.999Z' GROUP BY 1;

-- case: an hourly grain narrowed by a timefilter
-- expect: accepted release=domain:24
SELECT date_trunc('hour', ts) AS "time", count(*) FROM events WHERE ts >= '2025-03-04T00:00:00Z' AND ts < '2025-03-05T00:00:00Z' GROUP BY 1;

-- case: minute buckets over the whole range are too many
-- expect: refused KeyReleaseRefused
SELECT floor(extract(epoch from ts)/60)*60 AS "time", count(*) FROM events GROUP BY 1;
