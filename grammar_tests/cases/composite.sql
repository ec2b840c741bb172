-- A UNION of private queries and a private query in a scalar subquery (dpsql/releases.py):
-- each part prepared and charged as if sent alone, the whole charged once as the sum of the
-- parts' costs, the rows combined by the query around them over the released rows alone
-- (post-processing). Where a part has BigQuery's clause, a part without it is an exact query
-- of a private table: refused, naming it.

-- case: composite union all of two clauses
-- expect: accepted cost=0.75,0 names="sex|n" rows=4
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 0) sex, COUNT(*) AS n
FROM people GROUP BY sex
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.25, delta = 0) sex, COUNT(*)
FROM people GROUP BY sex;

-- case: composite union all of private queries without the clause
-- options: epsilon=0.5
-- expect: accepted cost=1,0 rows=2
SELECT AVG(age) FROM people UNION ALL SELECT AVG(income) FROM people;

-- case: composite union distinct of released rows
-- expect: accepted cost=2,0 rows<=2
SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people;

-- case: composite arms answered free from public information
-- expect: accepted cost=0,0 rows=2
SELECT sex FROM people GROUP BY sex UNION SELECT sex FROM people GROUP BY sex;

-- case: composite parenthesised arms and an order by over the union
-- expect: accepted cost=2,0 names=n rows=2
(SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) AS n FROM people)
UNION ALL
(SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM visits)
ORDER BY n;

-- case: composite private scalar subquery in an outer expression
-- expect: accepted cost=1,0 names=near rows=1
SELECT ABS((SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) AVG(age)
            FROM people) - 40) < 100 AS near;

-- case: composite two private scalar subqueries
-- expect: accepted cost=1.5,0 rows=1
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people)
     - (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5, delta = 0) COUNT(*) FROM visits)
       AS difference;

-- case: composite exact arm beside a private one
-- expect: refused UnsupportedQuery mentions="arm 2 of the UNION" mentions="exact query"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
UNION ALL SELECT COUNT(*) FROM people;

-- case: composite exact arm behind a cte of the union
-- expect: refused UnsupportedQuery mentions="arm 2 of the UNION"
WITH p AS (SELECT income FROM people)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
UNION ALL SELECT SUM(income) FROM p;

-- case: composite exact scalar subquery beside a private one
-- expect: refused UnsupportedQuery mentions="without WITH DIFFERENTIAL_PRIVACY"
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people)
     - (SELECT COUNT(*) FROM people);

-- case: composite query around a private subquery reads a private table
-- expect: refused UnsupportedQuery mentions="reads people"
SELECT income - (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) AVG(income)
                 FROM people) FROM people;

-- case: composite intersect of private queries
-- expect: refused UnsupportedQuery mentions=INTERSECT
SELECT sex FROM people GROUP BY sex INTERSECT SELECT sex FROM people GROUP BY sex;

-- case: composite arm without delta
-- expect: refused InvalidPrivacyParameter mentions="arm 2" mentions=delta
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1) COUNT(*) FROM people;

-- case: composite private subquery in a private subquery
-- expect: refused UnsupportedQuery mentions="another private query"
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
        WHERE age > (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) AVG(age)
                     FROM people));

-- The attacker's pass of 2026-12-06 (docs/audit.md): what used to be refused only after the
-- charge, or not at all, is refused while the parts are prepared.

-- case: composite parts beyond the per-query epsilon limit in all
-- expect: refused InvalidPrivacyParameter mentions=max_query_epsilon mentions="in all"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 60, delta = 0) COUNT(*) FROM people
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 60, delta = 0) COUNT(*) FROM people;

-- case: composite arms of different widths
-- expect: refused UnsupportedQuery mentions="same number of result columns"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*), AVG(age) FROM people;

-- case: composite scalar subquery of two columns
-- expect: refused UnsupportedQuery mentions="selects 2 columns"
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*), AVG(age)
        FROM people) AS pair;

-- case: composite grouped scalar subquery
-- expect: refused UnsupportedQuery mentions="GROUP BY" mentions="LIMIT 1"
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) COUNT(*)
        FROM people GROUP BY state) AS n;

-- case: composite grouped scalar subquery limited to one row
-- expect: accepted cost=1,1e-06 names=n rows<=1
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) COUNT(*) AS c
        FROM people GROUP BY state ORDER BY c DESC LIMIT 1) AS n;

-- case: composite union ordered by a private table's subquery
-- expect: refused UnsupportedQuery mentions="MAX(income)"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) AS n FROM people
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
ORDER BY (SELECT MAX(income) FROM people);

-- case: composite query around the parts names a column they lack
-- expect: refused UnsupportedQuery mentions=nosuch
SELECT (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people)
       + nosuch AS n;

-- case: composite limit 0 probe is free
-- expect: accepted cost=0,0 names=n rows=0
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) AS n FROM people
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM visits
LIMIT 0;

-- case: composite limit 0 probe keeps the parts' refusals
-- expect: refused UnsupportedQuery mentions="arm 2 of the UNION"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM people
UNION ALL SELECT COUNT(*) FROM people LIMIT 0;
