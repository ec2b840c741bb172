-- Automatic value bounds (issue 21, item 2; dpsql/privacy/auto_values.py): visits declares
-- amount's upper = { auto = true, max = 5000 } and duration_min's lower = { auto = true,
-- min = 5, share = 0.05 }, people income's upper = { auto = true, max = 250000, share = 0.2 },
-- visits' k is 10 (grammar_tests/databases.py, "autoval"). A query whose SUM, AVG, VAR or
-- STDDEV reads such a column chooses the bound from the data for its share of the epsilon and
-- calibrates those measurements to it; the plan's own measurements are at the declared bounds
-- (what explain shows), its cost the whole epsilon.
-- database: autoval

-- case: autoval sum planned at the declared cap
-- expect: accepted cells=1 measurements=1 l1[0]=50000 cost=1,0 rows=1
SELECT SUM(amount) FROM visits;

-- case: autoval sum with the analyst's k
-- expect: accepted cells=1 l1[0]=25000 cost=1,0 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 5) SUM(amount) FROM visits;

-- case: autoval count and sum per public category
-- expect: accepted cells=2 keys=1 release=domain:8 cost=1,0 rows=8
SELECT category, COUNT(*) AS n, SUM(amount) AS s FROM visits GROUP BY category;

-- case: autoval avg and stddev of a lower bound chosen from the data
-- options: epsilon=0.5
-- expect: accepted cells=2 cost=0.5,0 rows=1
SELECT AVG(duration_min), STDDEV(duration_min) FROM visits WHERE amount > 100;

-- case: autoval both bounds of one query
-- expect: accepted cells=2 cost=1,0 rows=1
SELECT SUM(amount * 2), AVG(duration_min) FROM visits;

-- case: autoval one row per unit
-- expect: accepted cells=2 cost=1,0 rows=2
SELECT sex, AVG(income), COUNT(*) FROM people GROUP BY sex;

-- case: autoval median keeps the declared domain
-- expect: accepted cells=1 rows=1
SELECT MEDIAN(amount) FROM visits;

-- case: autoval analyst's own bounds
-- expect: accepted cells=1 l1[0]=1000 cost=1,0 rows=1
SELECT SUM(LEAST(GREATEST(amount, 0), 100)) FROM visits;

-- case: autoval bigquery per-row bounds
-- expect: accepted cells=1 cost=1,0 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 10)
  SUM(amount, contribution_bounds_per_row => (0, 100)) FROM visits;

-- case: autoval indicator sum reads no bound
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT SUM(CASE WHEN amount > 100 THEN 1 ELSE 0 END) FROM visits;

-- case: autoval thresholded keys
-- options: delta=1e-6
-- expect: accepted release=threshold cost=1,1e-6 run
SELECT duration_min, SUM(amount) FROM visits GROUP BY duration_min;

-- case: autoval join needs the analyst's bounds
-- expect: refused UnsupportedQuery mentions=contribution_bounds_per_row
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 5) SUM(v.amount)
FROM visits v JOIN people p ON v.person_id = p.person_id;

-- case: autoval join with the analyst's bounds
-- expect: accepted cells=1 l1[0]=500 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 5)
  SUM(LEAST(GREATEST(v.amount, 0), 100)) FROM visits v JOIN people p ON v.person_id = p.person_id;
