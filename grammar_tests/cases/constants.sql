-- Constants are typed, converted and evaluated when the query is planned (dpsql/constants.py),
-- never lazily by the engine on the rows that reach them; row-level work is bounded by the cost
-- model (dpsql/cost.py). people.age is an int column stored as INTEGER, married a bool.

-- case: quoted number too large for the column's storage type compares as a number
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age = '99999999999999999999';

-- case: quoted number under a private branch
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE CASE WHEN person_id = 123 AND income > 40000 THEN age = '99999999999999999999' ELSE FALSE END;

-- case: quoted numbers in an IN list
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age IN ('30', '31', '32.0', ' 33 ');

-- case: quoted number in BETWEEN
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age BETWEEN '20' AND '1e2';

-- case: quoted number in a simple CASE
-- expect: accepted cells=1 rows=1
SELECT SUM(CASE age WHEN '30' THEN 1 ELSE 0 END) FROM people;

-- case: quoted number in NULLIF
-- expect: accepted cells=1 rows=1
SELECT COUNT(NULLIF(age, '30')) FROM people;

-- case: boolean text with spaces is refused
-- expect: refused InvalidConstant mentions=boolean
SELECT COUNT(*) FROM people WHERE CASE WHEN person_id = 123 AND income > 40000 THEN married = ' true ' ELSE FALSE END;

-- case: boolean text that converts
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE married = 'true';

-- case: invalid date text is refused
-- expect: refused InvalidConstant mentions=2025-13-01
SELECT COUNT(*) FROM visits WHERE day >= DATE '2025-13-01';

-- case: date text compared with a date column converts
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM visits WHERE day >= '2025-01-01';

-- case: INT32 overflow of literals is evaluated in BIGINT
-- expect: accepted cells=1 rows=1
SELECT COUNT(CASE WHEN person_id = 123 AND income > 40000 THEN 2147483647 + 1 END) FROM people;

-- case: summed literal arithmetic beyond INT32
-- expect: accepted cells=1 types=BIGINT rows=1
SELECT SUM(CASE WHEN income > 40000 THEN 2147483647 * 2 ELSE 0 END) FROM people;

-- case: literal in a CASE branch under arithmetic is BIGINT
-- expect: accepted cells=1 rows=1
SELECT SUM(CASE WHEN income > 40000 THEN 2147483647 ELSE 0 END + 1) FROM people;

-- case: SIGN is widened before arithmetic
-- expect: accepted cells=1 rows=1
SELECT SUM(SIGN(age) * 2147483647 * 2) FROM people;

-- case: constant overflow in 64 bits is refused before anything runs
-- expect: refused UnboundedExpression mentions=64-bit
SELECT COUNT(*) FROM people WHERE CASE WHEN income > 40000 THEN age > 9223372036854775807 + 1 ELSE FALSE END;

-- case: constant date truncation with an unknown part is refused
-- expect: refused InvalidConstant mentions=fortnight
SELECT COUNT(*) FROM visits WHERE day >= DATE_TRUNC('fortnight', DATE '2025-03-04');

-- case: constant text function is folded
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE sex = UPPER('f');

-- case: constant division by zero is NULL, not an error
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age > 1 / 0;

-- case: LIKE pattern longer than the cost model allows
-- expect: refused QueryTooComplex mentions=pattern
-- text: "SELECT COUNT(*) FROM people WHERE email LIKE '%" + "_" * 200 + "b'"

-- case: long literal concatenated under a private branch
-- expect: refused QueryTooComplex
-- text: "SELECT COUNT(*) FROM people WHERE CASE WHEN person_id = 123 AND income > 40000 THEN email || '" + "a" * 40000 + "' LIKE '%" + "_" * 20000 + "b' ELSE FALSE END"

-- case: text literal longer than the cost model allows
-- expect: refused QueryTooComplex mentions=literal
-- text: "SELECT COUNT(*) FROM people WHERE email = '" + "x" * 5000 + "'"

-- case: LIKE pattern computed from a column
-- expect: refused QueryTooComplex mentions=constant
SELECT COUNT(*) FROM people WHERE 'x' LIKE email;

-- case: too many LIKEs of moderate patterns
-- expect: refused QueryTooComplex mentions=operations
-- text: "SELECT COUNT(*) FROM people WHERE " + "email LIKE '%________________________________________________________________________________________b' OR " * 2 + "FALSE"

-- case: an ordinary LIKE
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE email LIKE '%@example.com';

-- case: constant cast of text beyond a date is refused
-- expect: refused InvalidConstant mentions=2025-02-30
SELECT COUNT(*) FROM visits WHERE day = CAST('2025-02-30' AS DATE);

-- case: quoted date compared with a date column that is not a date
-- expect: refused InvalidConstant mentions=date
SELECT COUNT(*) FROM visits WHERE day < '2025-02-30';

-- case: superset time range filter with to_date is folded
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM visits WHERE day >= TO_DATE('2025-03-01', 'YYYY-MM-DD') AND day < TO_DATE('2025-04-01', 'YYYY-MM-DD');

-- case: to_date of an invalid date is refused naming it
-- expect: refused InvalidConstant mentions=TO_DATE mentions=2025-13-01 mentions=YYYY-MM-DD
SELECT COUNT(*) FROM visits WHERE day >= TO_DATE('2025-13-01', 'YYYY-MM-DD');

-- case: to_date with a time zone format is refused
-- expect: refused InvalidConstant mentions=TO_DATE mentions=format
SELECT COUNT(*) FROM visits WHERE day >= TO_DATE('2025-03-01 UTC', 'YYYY-MM-DD TZ');

-- case: to_date beyond year 9999 is refused
-- expect: refused InvalidConstant mentions=99999
SELECT COUNT(*) FROM visits WHERE day >= TO_DATE('99999-01-01', 'YYYY-MM-DD');

-- case: to_timestamp with a format is folded
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= TO_TIMESTAMP('2025-03-01 00:00:00', 'YYYY-MM-DD HH24:MI:SS');

-- case: to_timestamp of seconds is a utc timestamp
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= TO_TIMESTAMP(1700000000);

-- case: to_timestamp of text without a format is refused under its own name
-- expect: refused UnboundedExpression mentions=TO_TIMESTAMP
SELECT COUNT(*) FROM visits WHERE day >= TO_TIMESTAMP(category);

-- case: strptime with an unknown directive is refused
-- expect: refused InvalidConstant mentions=STRPTIME
SELECT COUNT(*) FROM visits WHERE day >= STRPTIME('2025-03-01', '%Q');

-- case: timestamp literal compared with a date
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= TIMESTAMP '2025-06-01 00:00:00';

-- case: invalid timestamp literal is refused without sqlglot names
-- expect: refused InvalidConstant mentions=2025-06-41
SELECT COUNT(*) FROM visits WHERE day >= TIMESTAMP '2025-06-41';

-- case: timestamptz constant at midnight utc
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= CAST('2025-06-01T00:00:00+00:00' AS TIMESTAMPTZ);

-- case: date text with a zone is the date
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= '2025-06-01 +00';

-- case: date text with a time of day is its date as postgresql reads it
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= '2025-06-01 10:00:00+00';

-- case: date text at midnight in another zone is its date as written
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day >= '2025-06-01 00:00:00+02';

-- case: grafana time filter on a date column keeps its days
-- expect: accepted keys=1 release=domain:4 rows=4
SELECT day AS "time", COUNT(*) AS n FROM visits WHERE day BETWEEN '2025-03-04T00:00:00Z' AND '2025-03-07T23:59:59.999Z' GROUP BY 1 ORDER BY 1;

-- case: decimal constants as SQL reads them (DECIMAL arithmetic: 0.1 + 0.2 = 0.3 is TRUE)
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE 0.1 + 0.2 = 0.3;

-- case: a folded decimal sum compared with a column's arithmetic
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age * 0 + (0.1 + 0.2) * 10 = 3;

-- case: the analyst's DOUBLE casts stay DOUBLEs (0.1 + 0.2 is then not 0.3)
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE) <> 0.3;
