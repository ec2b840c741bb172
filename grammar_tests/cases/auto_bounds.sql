-- Automatic k (issue 21, item 2; dpsql/privacy/auto_bounds.py): visits declares
-- max_rows_per_unit = { auto = true, max = 1000 } (grammar_tests/databases.py, "auto"). Each
-- query over visits alone chooses k from the data for 10% of its epsilon and calibrates its
-- measurements to it; the plan's own measurements are at k = 1000 (what explain shows before
-- the data chooses), its cost the whole epsilon. An analyst's own k replaces it.
-- database: auto

-- case: auto count planned at the cap
-- expect: accepted cells=1 measurements=1 l1[0]=1000 cost=1,0 rows=1
SELECT COUNT(*) FROM visits;

-- case: auto count and sum per public category
-- expect: accepted cells=2 keys=1 release=domain:8 l1[0]=1000 l1[1]=5000000 cost=1,0 rows=8
SELECT category, COUNT(*) AS n, SUM(amount) AS s FROM visits GROUP BY category;

-- case: auto with where and avg
-- options: epsilon=0.5
-- expect: accepted cells=1 measurements=2 cost=0.5,0 rows=1
SELECT AVG(duration_min) FROM visits WHERE amount > 100;

-- case: auto median over sampled rows
-- expect: accepted cells=1 rows=1
SELECT MEDIAN(amount) FROM visits;

-- case: auto thresholded keys
-- options: delta=1e-6
-- expect: accepted release=threshold cost=1,1e-6 run
SELECT duration_min, COUNT(*) FROM visits GROUP BY duration_min;

-- case: auto replaced by the analyst's k
-- expect: accepted cells=1 l1[0]=10 cost=1,0 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 10) COUNT(*) FROM visits;

-- case: auto analyst k above the max
-- expect: refused BoundsAboveCap mentions="cap of 1000"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 1001) COUNT(*) FROM visits;

-- case: auto join needs the analyst's k
-- expect: refused UnsupportedQuery mentions=max_rows_contributed
SELECT COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id;

-- case: auto join with the analyst's k
-- expect: accepted cells=1 l1[0]=5 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 5) COUNT(*)
FROM visits v JOIN people p ON v.person_id = p.person_id;

-- case: auto other tables unchanged
-- expect: accepted cells=1 l1[0]=1 rows=2
SELECT sex, COUNT(*) FROM people GROUP BY sex;

-- case: auto series limit
-- expect: accepted path=two cost=1,0 rows<=3
SELECT category, AVG(amount) AS mean FROM visits WHERE category IN (SELECT category FROM visits GROUP BY category ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY category;
