-- A query over a private aggregate's answer (dpsql/query/over_released.py): the inner query is
-- one private release, the outer query post-processing over its released rows alone, charged
-- nothing more. The outer query may read only the inner's columns.
-- database: central

-- case: over released sum of group counts
-- expect: accepted cells=1 keys=1 release=domain:2 cost=0.5,0 names=total rows=1
-- options: epsilon=0.5
SELECT SUM(n) AS total FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) AS s;

-- case: over released with where and order
-- expect: accepted cells=1 names="education|n" rows<=6
SELECT education, n FROM (SELECT education, COUNT(*) AS n FROM people GROUP BY education) AS e
WHERE n > 10 ORDER BY n DESC;

-- case: over released bigquery clause inside
-- expect: accepted cost=1,0 rows=1
SELECT MAX(c) FROM (
  SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 1) sex, COUNT(*) AS c
  FROM people GROUP BY sex);

-- case: over released reads another table
-- expect: refused UnsupportedQuery mentions="only that answer"
SELECT SUM(n) + (SELECT COUNT(*) FROM visits) FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex);

-- case: over released refuses denied functions
-- expect: refused ForbiddenFunction
SELECT SUM(n) * RANDOM() FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex);

-- case: over released unknown column
-- expect: refused UnsupportedQuery mentions=age
SELECT SUM(age) FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex);

-- case: over released star is the released columns
-- expect: accepted cells=1 keys=1 names="sex|n"
SELECT * FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) AS s WHERE n > 0;

-- case: over released qualified star and an expression
-- expect: accepted names="sex|n|twice"
SELECT s.*, n * 2 AS twice FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) AS s;

-- case: over released star exclude
-- expect: refused UnsupportedQuery mentions=EXCLUDE
SELECT * EXCLUDE (n) FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) AS s;
