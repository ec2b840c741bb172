-- Row-level SELECTs of a table opted in to local DP (the sample's people: [tables.people.local]):
-- answered from randomized rows (dpsql/execution/local_rows.py, path=local), charged the
-- owner's row epsilon times k (2.0 here) whatever epsilon is asked, once per analyst and table
-- (their stored copy); filters, ORDER BY, LIMIT and windows run over the randomized rows.
-- Reading any other table, a seed, or a statistic is not this path.

-- case: local preview
-- expect: accepted path=local cost=2,0 columns=10 rows=100
SELECT * FROM people LIMIT 100;

-- case: local filter on randomized values
-- expect: accepted path=local cost=2,0 names="age|sex" rows<=20
SELECT age, sex FROM people WHERE sex = 'F' AND age > 60 LIMIT 20;

-- case: local rows whatever epsilon is asked
-- options: epsilon=0.1
-- expect: accepted path=local cost=2,0 columns=1
SELECT married FROM people;

-- case: local tablesample rows
-- expect: accepted path=local cost=2,0 rows=25
SELECT * FROM people TABLESAMPLE (25 ROWS);

-- case: local tablesample percent
-- expect: accepted path=local cost=2,0 columns=10
SELECT * FROM people TABLESAMPLE 1%;

-- case: local bernoulli sample reads its number as rows, as sqlglot writes it
-- expect: accepted path=local cost=2,0 columns=2 rows=5
SELECT sex, age FROM people TABLESAMPLE BERNOULLI (5);

-- case: local bernoulli sample in percent
-- expect: accepted path=local cost=2,0 columns=2
SELECT sex, age FROM people TABLESAMPLE BERNOULLI (5 PERCENT);

-- case: local order by randomized value
-- expect: accepted path=local cost=2,0 columns=1
SELECT age FROM people ORDER BY age DESC LIMIT 5;

-- case: local cte and window over randomized rows
-- expect: accepted path=local cost=2,0 columns=2
WITH t AS (SELECT age FROM people) SELECT age, ROW_NUMBER() OVER (ORDER BY age) AS r FROM t;

-- case: local window ranks randomized values, never the true ones
-- expect: accepted path=local cost=2,0 names="age|r" rows=20000
SELECT age, ROW_NUMBER() OVER (ORDER BY income) AS r FROM people;

-- case: local lag over randomized rows
-- expect: accepted path=local cost=2,0 names="age|previous" rows=10
SELECT age, LAG(age) OVER (ORDER BY signup_date, age) AS previous FROM people LIMIT 10;

-- case: local withheld column beside a released one
-- expect: accepted path=local cost=2,0 types=VARCHAR|BIGINT
SELECT email, age FROM people LIMIT 10;

-- case: local only withheld columns
-- expect: refused NonAggregatedColumn mentions=withheld
SELECT email FROM people LIMIT 10;

-- case: local only the unit
-- expect: refused NonAggregatedColumn mentions=withheld
SELECT person_id, state FROM people WHERE age > 30;

-- case: local self join of randomized rows
-- expect: refused UnsupportedQuery mentions=once
SELECT a.age, b.age FROM people a JOIN people b ON a.sex = b.sex LIMIT 5;

-- case: local cross join of a cte
-- expect: refused UnsupportedQuery mentions=joins
WITH t AS (SELECT age FROM people) SELECT a.age FROM t a, t b;

-- case: local qualified name
-- expect: accepted path=local cost=2,0 columns=1
SELECT age FROM main.people WHERE sex = 'M';

-- case: local aggregate stays central
-- expect: accepted path=private cells=1
SELECT COUNT(*) FROM people WHERE sex = 'F';

-- case: local group by stays central
-- expect: accepted path=private cells=1
SELECT sex, COUNT(*) FROM people GROUP BY sex;

-- case: local probe stays free
-- expect: accepted path=free cost=0,0 columns=10
SELECT * FROM people LIMIT 0;

-- case: local join with a private table
-- expect: refused UnsupportedQuery mentions="nothing else"
SELECT p.age, v.amount FROM people p JOIN visits v ON p.person_id = v.person_id;

-- case: local semi join with a private table
-- expect: refused UnsupportedQuery mentions="nothing else"
SELECT age FROM people WHERE person_id IN (SELECT person_id FROM visits WHERE amount > 4000);

-- case: local join with a public table
-- expect: refused UnsupportedQuery mentions="nothing else"
SELECT p.age, s.region FROM people p JOIN states s ON p.state = s.state;

-- case: local union
-- expect: refused UnsupportedQuery mentions="randomized local rows"
SELECT age FROM people UNION ALL SELECT age FROM people;

-- case: local tablesample seed
-- expect: refused UnsupportedQuery mentions=REPEATABLE
SELECT * FROM people TABLESAMPLE BERNOULLI (10) REPEATABLE (42);

-- case: local tablesample over a hundred percent
-- expect: refused UnsupportedQuery mentions=percentage
SELECT * FROM people TABLESAMPLE 150%;

-- case: local table function
-- expect: refused ForbiddenFunction
SELECT age, read_csv('/etc/passwd') FROM people;
