-- Public tables (public = true: states, categories) are read exactly, with no noise and no
-- charge, by any SELECT that reads nothing else (dpsql/public.py). A query that also reads a
-- private table never takes that path. A private aggregate subquery joined on its full GROUP BY
-- key set (Superset's series limit) is two private releases (dpsql/series.py, path=two).
-- Run on "central" (databases.py): the sample data without people's local section, so that
-- its rows stay private here (local_rows.sql has the local path).
-- database: central

-- case: public select star
-- expect: accepted path=public names="state|region" types=VARCHAR|VARCHAR cost=0,0 rows=51
SELECT * FROM states;

-- case: public typed columns
-- expect: accepted path=public types=VARCHAR|VARCHAR|BOOLEAN|DOUBLE rows=8
SELECT category, department, covered, base_fee FROM categories ORDER BY base_fee DESC;

-- case: public order by limit
-- expect: accepted path=public rows=3
SELECT state FROM states ORDER BY state DESC LIMIT 3;

-- case: public group by exact count
-- expect: accepted path=public names="region|n" types=VARCHAR|BIGINT rows=4
SELECT region, COUNT(*) AS n FROM states GROUP BY region ORDER BY n DESC;

-- case: public window function
-- expect: accepted path=public columns=3 rows=51
SELECT state, region, ROW_NUMBER() OVER (PARTITION BY region ORDER BY state) AS k FROM states;

-- case: public cross join of two public tables
-- expect: accepted path=public rows=408
SELECT s.state, c.category FROM states AS s CROSS JOIN categories AS c;

-- case: public cte
-- expect: accepted path=public rows=4
WITH r AS (SELECT region, COUNT(*) AS n FROM states GROUP BY region) SELECT * FROM r;

-- case: public subquery in where
-- expect: accepted path=public rows<=8
SELECT category FROM categories WHERE department IN (SELECT department FROM categories WHERE covered);

-- case: public union
-- expect: accepted path=public rows=59
SELECT state AS name FROM states UNION ALL SELECT category FROM categories;

-- case: public main schema and quoted upper case name
-- expect: accepted path=public rows=51
SELECT "STATE" FROM main."STATES";

-- case: public limit zero
-- expect: accepted path=public rows=0
SELECT * FROM categories LIMIT 0;

-- case: public scalar subquery
-- expect: accepted path=public rows=1
SELECT (SELECT COUNT(*) FROM states) AS states, (SELECT MAX(base_fee) FROM categories) AS top;

-- case: public undeclared column
-- expect: refused UnknownColumn mentions=nosuch
SELECT nosuch FROM states;

-- case: public getenv
-- expect: refused ForbiddenFunction mentions=getenv
SELECT getenv('HOME') FROM states;

-- case: public query table function
-- expect: refused ForbiddenFunction
SELECT query_table('people') FROM states;

-- case: public query function in from
-- expect: refused ForbiddenFunction
SELECT * FROM query('SELECT * FROM people');

-- case: public recursive cte
-- expect: refused UnsupportedQuery mentions=recursive
WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r) SELECT * FROM r, states;

-- case: public select into
-- expect: refused NotASingleSelect
SELECT * INTO copy_of_states FROM states;

-- case: public other catalog
-- expect: refused UnknownTable
SELECT * FROM memory.main.states;

-- case: public type error
-- expect: refused UnsupportedQuery mentions=public
SELECT state + 1 FROM states;

-- case: mixed cte named like a public table
-- expect: refused NonAggregatedColumn
WITH states AS (SELECT * FROM people) SELECT * FROM states;

-- case: mixed union with a private table
-- expect: refused NonAggregatedColumn mentions="arm 2 of the UNION"
SELECT state FROM states UNION SELECT state FROM people;

-- case: mixed join with a private table
-- expect: refused NonAggregatedColumn mentions=s.region
SELECT s.region, p.email FROM states AS s JOIN people AS p ON s.state = p.state;

-- case: mixed subquery reads a private table
-- expect: refused UnsupportedQuery
SELECT region FROM states WHERE state IN (SELECT state FROM people);

-- case: series limit superset join
-- expect: accepted path=two cost=1,0 names="category|count" rows<=5
SELECT v.category AS category, COUNT(*) AS count FROM visits v JOIN (SELECT category AS category_, COUNT(*) AS mme_inner__ FROM visits GROUP BY category ORDER BY mme_inner__ DESC LIMIT 5) AS series_limit ON v.category = series_limit.category_ GROUP BY v.category ORDER BY count DESC LIMIT 10000;

-- case: series limit unqualified on
-- options: epsilon=0.5
-- expect: accepted path=two cost=0.5,0 rows<=3
SELECT category, COUNT(*) AS count FROM visits JOIN (SELECT category AS category__, COUNT(*) AS mme_inner__ FROM visits GROUP BY category ORDER BY mme_inner__ DESC LIMIT 3) AS series_limit ON category = category__ GROUP BY category ORDER BY count DESC LIMIT 10000;

-- case: series limit as in subquery
-- expect: accepted path=two cost=1,0 rows<=3
SELECT category, AVG(amount) AS mean FROM visits WHERE category IN (SELECT category FROM visits GROUP BY category ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY category;

-- case: series limit in select over subquery
-- expect: accepted path=two rows=1
SELECT COUNT(*) AS n FROM visits WHERE category IN (SELECT c FROM (SELECT category AS c, COUNT(*) AS k FROM visits GROUP BY category ORDER BY k DESC LIMIT 2) AS s);

-- case: series limit two keys
-- expect: accepted path=two cost=1,0 run
SELECT v.category, COUNT(*) AS n FROM visits v JOIN (SELECT category AS c, MONTH(day) AS m, COUNT(*) AS k FROM visits GROUP BY category, MONTH(day) ORDER BY k DESC LIMIT 5) AS s ON v.category = s.c AND MONTH(v.day) = s.m GROUP BY v.category;

-- case: series limit left join
-- expect: refused UnsupportedQuery mentions=INNER
SELECT v.category, COUNT(*) FROM visits v LEFT JOIN (SELECT category AS c, COUNT(*) AS n FROM visits GROUP BY category) AS s ON v.category = s.c GROUP BY v.category;

-- case: series limit join on an aggregate
-- expect: refused UnsupportedQuery mentions="GROUP BY keys"
SELECT v.category, COUNT(*) FROM visits v JOIN (SELECT category AS c, COUNT(*) AS n FROM visits GROUP BY category) AS s ON v.category = s.n GROUP BY v.category;

-- case: series limit join on some keys only
-- expect: refused UnsupportedQuery mentions="every GROUP BY key"
SELECT v.category, COUNT(*) FROM visits v JOIN (SELECT category AS c, MONTH(day) AS m, COUNT(*) AS n FROM visits GROUP BY category, MONTH(day)) AS s ON v.category = s.c GROUP BY v.category;

-- case: series limit correlated
-- expect: refused UnsupportedQuery mentions=correlated
SELECT v.category, COUNT(*) FROM visits v JOIN (SELECT category AS c, COUNT(*) AS n FROM visits WHERE person_id = v.person_id GROUP BY category) AS s ON v.category = s.c GROUP BY v.category;

-- case: series limit outer reads the subquery
-- expect: refused UnknownColumn
SELECT v.category, s.n FROM visits v JOIN (SELECT category AS c, COUNT(*) AS n FROM visits GROUP BY category) AS s ON v.category = s.c;

-- case: series limit two aggregate subqueries
-- expect: refused UnsupportedQuery mentions="more than one"
SELECT COUNT(*) FROM visits WHERE category IN (SELECT category FROM visits GROUP BY category LIMIT 2) AND day IN (SELECT day FROM visits GROUP BY day LIMIT 2);

-- case: series limit on a non-equality
-- expect: refused UnsupportedQuery mentions=equalities
SELECT v.category, COUNT(*) FROM visits v JOIN (SELECT category AS c, COUNT(*) AS n FROM visits GROUP BY category) AS s ON v.category > s.c GROUP BY v.category;

-- case: series limit unbounded number of keys
-- options: delta=1e-6
-- expect: refused UnsupportedQuery mentions=LIMIT
SELECT COUNT(*) FROM people WHERE state IN (SELECT state FROM people GROUP BY state);

-- case: series limit thresholded keys with a limit
-- options: delta=1e-6
-- expect: accepted path=two cost=1,1e-6 run
SELECT state, COUNT(*) AS n FROM people WHERE state IN (SELECT state FROM people GROUP BY state ORDER BY COUNT(*) DESC LIMIT 10) GROUP BY state;

-- case: series limit date keys
-- expect: accepted path=two rows<=8
SELECT category, COUNT(*) FROM visits WHERE day IN (SELECT day FROM visits GROUP BY day ORDER BY COUNT(*) DESC LIMIT 3) GROUP BY category;
