-- CTEs and subqueries in FROM: row-level transformations (projections and WHERE filters) of
-- the one private table feeding the final aggregate are inlined; anything else is refused.
-- Run on "central" (databases.py): the sample data without people's local section, so that
-- its rows stay private here (local_rows.sql has the local path).
-- database: central

-- case: cte filter
-- expect: accepted cells=1 measurements=1 l1[0]=1 rows=1
WITH adults AS (SELECT * FROM people WHERE age >= 18) SELECT COUNT(*) FROM adults;

-- case: cte projection with expression alias
-- expect: accepted measurements=2 l1[0]=1 l1[1]=10416.666666666666 names=avg rows=1
WITH a AS (SELECT age, income / 12 AS monthly FROM people WHERE income IS NOT NULL) SELECT AVG(monthly) FROM a WHERE age > 40;

-- case: cte renamed column
-- expect: accepted l1[0]=95 types=BIGINT rows=1
WITH t AS (SELECT age AS years FROM people) SELECT SUM(years) FROM t;

-- case: cte star plus expression
-- expect: accepted cells=2 rows=2
WITH t AS (SELECT *, income / 12 AS monthly FROM people) SELECT sex, AVG(monthly), MAX(age) FROM t GROUP BY sex;

-- case: cte keeps many rows per unit bound
-- expect: accepted l1[0]=10 rows=1
WITH dental AS (SELECT * FROM visits WHERE category = 'dental') SELECT COUNT(*) FROM dental;

-- case: cte sum on visits
-- expect: accepted l1[0]=50000 rows=1
WITH big AS (SELECT amount FROM visits WHERE amount > 1000) SELECT SUM(amount) FROM big;

-- case: cte computed group key keeps public domain
-- expect: accepted keys=1 release=domain:3 rows=3
WITH banded AS (SELECT CASE WHEN age < 30 THEN 'a' WHEN age < 60 THEN 'b' ELSE 'c' END AS band, income FROM people) SELECT band, AVG(income) FROM banded GROUP BY band;

-- case: cte group by declared column keeps its domain
-- expect: accepted release=domain:8 rows=8
WITH v AS (SELECT category, amount FROM visits WHERE duration_min > 30) SELECT category, SUM(amount) FROM v GROUP BY category;

-- case: cte renamed key keeps its domain
-- expect: accepted release=domain:2 rows=2
WITH t AS (SELECT sex AS gender FROM people) SELECT gender, COUNT(*) FROM t GROUP BY gender;

-- case: cte thresholded key
-- options: delta=1e-6
-- expect: accepted release=threshold rows>=1
WITH t AS (SELECT state, income FROM people WHERE income > 0) SELECT state, AVG(income) FROM t GROUP BY state;

-- case: chained ctes
-- expect: accepted cells=1 rows=1
WITH a AS (SELECT * FROM people WHERE age > 30), b AS (SELECT * FROM a WHERE sex = 'F') SELECT COUNT(*) FROM b;

-- case: three chained ctes with projections
-- expect: accepted l1[0]=100 rows=1
WITH a AS (SELECT income FROM people), b AS (SELECT income / 1000 AS k FROM a), c AS (SELECT LEAST(k, 100) AS capped FROM b) SELECT SUM(capped) FROM c;

-- case: nested cte inside cte
-- expect: accepted cells=1 rows=1
WITH b AS (WITH a AS (SELECT * FROM people) SELECT * FROM a WHERE age > 50) SELECT COUNT(*) FROM b;

-- case: cte shadowing the table name
-- expect: accepted cells=1 rows=1
WITH people AS (SELECT * FROM people WHERE age > 50) SELECT COUNT(*) FROM people;

-- case: unused cte
-- expect: accepted cells=1 rows=1
WITH t AS (SELECT * FROM visits) SELECT COUNT(*) FROM people;

-- case: cte qualified columns
-- expect: accepted rows=1
WITH t AS (SELECT p.age, p.income FROM people p WHERE p.married) SELECT AVG(t.income) FROM t WHERE t.age > 30;

-- case: cte with order by inside
-- expect: accepted rows=1
WITH t AS (SELECT * FROM people ORDER BY age) SELECT COUNT(*) FROM t;

-- case: subquery in from with alias
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM (SELECT * FROM people WHERE age > 30) t;

-- case: subquery in from without alias
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM (SELECT * FROM people WHERE age > 30);

-- case: subquery computed group key
-- expect: accepted release=domain:2 rows=2
SELECT band, COUNT(*) FROM (SELECT CASE WHEN age < 40 THEN 'a' ELSE 'b' END AS band FROM people) GROUP BY band;

-- case: nested subqueries
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM (SELECT * FROM (SELECT * FROM people WHERE age > 20) x WHERE age < 60) y;

-- case: subquery inside cte
-- expect: accepted l1[0]=2400 rows=1
WITH t AS (SELECT duration_min FROM (SELECT * FROM visits WHERE category = 'therapy') s) SELECT SUM(duration_min) FROM t;

-- case: cte with group by
-- expect: refused UnsupportedQuery mentions=row-level
WITH t AS (SELECT sex, COUNT(*) AS c FROM people GROUP BY sex) SELECT SUM(c) FROM t;

-- case: cte with aggregate
-- expect: refused UnsupportedQuery mentions=aggregate
WITH t AS (SELECT COUNT(*) AS c FROM people) SELECT SUM(c) FROM t;

-- case: cte with sum over visits per person
-- expect: refused UnsupportedQuery
WITH per_person AS (SELECT person_id, SUM(amount) AS total FROM visits GROUP BY person_id) SELECT AVG(total) FROM per_person;

-- case: cte with limit
-- expect: refused UnsupportedQuery mentions=LIMIT
WITH t AS (SELECT age FROM people LIMIT 10) SELECT COUNT(*) FROM t;

-- case: cte with offset
-- expect: refused UnsupportedQuery
WITH t AS (SELECT age FROM people OFFSET 10) SELECT COUNT(*) FROM t;

-- case: cte with distinct
-- expect: refused UnsupportedQuery mentions=DISTINCT
WITH t AS (SELECT DISTINCT age FROM people) SELECT COUNT(*) FROM t;

-- case: cte with having
-- expect: refused UnsupportedQuery
WITH t AS (SELECT age FROM people HAVING age > 1) SELECT COUNT(*) FROM t;

-- case: cte with qualify
-- expect: refused UnsupportedQuery
WITH t AS (SELECT age FROM people QUALIFY age > 1) SELECT COUNT(*) FROM t;

-- case: recursive cte
-- expect: refused UnsupportedQuery mentions=recursive
WITH RECURSIVE t AS (SELECT 1 AS n) SELECT COUNT(*) FROM people;

-- case: nested cte with group by
-- expect: refused UnsupportedQuery
WITH b AS (WITH a AS (SELECT sex FROM people GROUP BY sex) SELECT * FROM a) SELECT COUNT(*) FROM b;

-- case: second cte aggregates the first
-- expect: refused UnsupportedQuery
WITH a AS (SELECT * FROM people), b AS (SELECT MAX(age) AS m FROM a) SELECT SUM(m) FROM b;

-- case: subquery with group by
-- expect: accepted rows=1
SELECT COUNT(*) FROM (SELECT sex FROM people GROUP BY sex) s;

-- case: subquery with limit
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM (SELECT * FROM people LIMIT 5);

-- case: subquery with distinct
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM (SELECT DISTINCT sex FROM people);

-- case: subquery with aggregate
-- expect: accepted cells=1 rows=1
SELECT AVG(n) FROM (SELECT COUNT(*) AS n FROM visits) t;

-- case: subquery in where inside cte
-- expect: refused UnsupportedQuery mentions=subquer
WITH t AS (SELECT * FROM people WHERE age IN (SELECT age FROM people)) SELECT COUNT(*) FROM t;

-- case: cte expression without name
-- expect: refused UnsupportedQuery mentions=AS
WITH t AS (SELECT age + 1 FROM people) SELECT COUNT(*) FROM t;

-- case: cte column not projected
-- expect: refused UnknownColumn mentions=income
WITH t AS (SELECT age FROM people) SELECT SUM(income) FROM t;

-- case: cte over undeclared table
-- expect: refused UnknownTable
WITH t AS (SELECT * FROM secrets) SELECT COUNT(*) FROM t;

-- case: cte referring to itself
-- expect: refused UnknownTable
WITH t AS (SELECT * FROM t) SELECT COUNT(*) FROM t;

-- case: cte select star then bare column
-- expect: refused NonAggregatedColumn
WITH t AS (SELECT * FROM people) SELECT age FROM t;

-- case: cte with a column list
-- expect: accepted cells=1 keys=0 run rows=1
WITH t(a) AS (SELECT age FROM people) SELECT AVG(a) FROM t;

-- case: subquery alias with a column list
-- expect: accepted cells=1 keys=0 run rows=1
SELECT AVG(a) FROM (SELECT age FROM people) AS t(a);

-- case: cte column list of the wrong length
-- expect: refused UnsupportedQuery
WITH t(a, b) AS (SELECT age FROM people) SELECT AVG(a) FROM t;

-- case: cte column list over a star
-- expect: refused UnsupportedQuery
WITH t(a) AS (SELECT * FROM people) SELECT AVG(a) FROM t;
