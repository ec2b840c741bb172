-- Public domains narrowed by the analyst's own constant filters on the key columns
-- (dpsql/key_filters.py), the clock folded at plan time (dates.fold_clock), and the epoch
-- arithmetic BI tools group by. Sample data: visits.day is a public range over 2025.

-- case: a three day filter releases three days
-- expect: accepted keys=1 release=domain:3 cost=1,0 rows=3
SELECT day, COUNT(*) FROM visits WHERE day BETWEEN '2025-03-04' AND '2025-03-06' GROUP BY day;

-- case: an in-list narrows a declared value list
-- expect: accepted release=domain:2 rows=2
SELECT category, COUNT(*) FROM visits WHERE category IN ('lab', 'dental') AND amount > 3 GROUP BY category;

-- case: a not-equal narrows a declared value list
-- expect: accepted release=domain:7 rows=7
SELECT category, COUNT(*) FROM visits WHERE category <> 'lab' GROUP BY category;

-- case: a filter on the truncated month narrows the months
-- expect: accepted release=domain:3 rows=3
SELECT DATE_TRUNC('month', day) AS m, COUNT(*) FROM visits WHERE DATE_TRUNC('month', day) >= DATE '2025-10-01' GROUP BY 1;

-- case: a range on an integer public range
-- expect: accepted release=domain:6 rows=6
SELECT age, COUNT(*) FROM people WHERE age >= 90 GROUP BY age;

-- case: an image of a narrowed integer range
-- expect: accepted release=domain:3 rows=3
SELECT age // 10 AS decade, COUNT(*) FROM people WHERE age < 40 GROUP BY 1;

-- case: filters on two joined keys narrow each
-- expect: accepted release=domain:7 rows=7
SELECT p.sex, v.category, COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id WHERE p.sex = 'F' AND v.category <> 'lab' GROUP BY 1, 2;

-- case: a filter outside the range releases nothing
-- expect: accepted release=domain:0 rows=0
SELECT day, COUNT(*) FROM visits WHERE day = DATE '2026-01-01' GROUP BY day;

-- case: a filter on another column does not narrow the keys
-- expect: accepted release=domain:8 rows=8
SELECT category, COUNT(*) FROM visits WHERE amount > 100 GROUP BY category;

-- case: a filter on two columns at once does not narrow the keys
-- expect: accepted release=domain:2 rows=2
SELECT sex, COUNT(*) FROM people WHERE sex = 'F' OR age > 30 GROUP BY sex;

-- case: a narrowed key without public domain still needs delta
-- expect: refused KeyReleaseRefused
SELECT state, COUNT(*) FROM people WHERE state IN ('CA', 'NY') GROUP BY state;

-- case: a distinct over a narrowed domain is free
-- expect: accepted path=free cost=0,0 release=domain:2 rows=2
SELECT DISTINCT category FROM visits WHERE category IN ('lab', 'dental') ORDER BY 1;

-- case: grafana time filter and epoch group on a date
-- expect: accepted release=domain:4 rows=4
SELECT floor(extract(epoch from day)/86400)*86400 AS "time", count(*) AS "value" FROM visits WHERE day BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-07T23:59:59.999Z' GROUP BY 1 ORDER BY 1;

-- case: grafana epoch of a week grain
-- expect: accepted release=domain:4 rows=4
SELECT extract(epoch from date_trunc('week', day)) AS "time", count(*) FROM visits WHERE day BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-27T23:59:59.999Z' GROUP BY 1 ORDER BY 1;

-- case: current date folded at plan time
-- expect: accepted release=domain:365
SELECT day, COUNT(*) FROM visits WHERE day < CURRENT_DATE GROUP BY day;

-- case: now folded in a relative filter
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM visits WHERE day >= NOW() - INTERVAL '30 days';

-- case: current timestamp folded against a date
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day <= CURRENT_TIMESTAMP;
