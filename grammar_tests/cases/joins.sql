-- Joins (README, "Joins"; the privacy argument is in dpsql/joins.py). Private tables join on
-- the privacy unit (or along a declared unit_path); public tables (states, categories) join on
-- any key and give public GROUP BY domains. Contribution bounding runs on the joined rows:
-- k = product of the tables' k and of the public join multiplicities, g likewise, capped by k.

-- case: inner join on the unit
-- expect: accepted cells=1 measurements=1 l1[0]=10 rows=1
SELECT COUNT(*) FROM people p JOIN visits v ON p.person_id = v.person_id;

-- case: inner join using the unit
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(*) FROM people INNER JOIN visits USING (person_id);

-- case: left join on the unit
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(*) FROM people LEFT JOIN visits USING (person_id);

-- case: left outer join qualified by table names
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people LEFT OUTER JOIN visits ON people.person_id = visits.person_id;

-- case: right join of two private tables on the unit
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(*) FROM people RIGHT JOIN visits USING (person_id);

-- case: full outer join of two private tables on the unit
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people FULL OUTER JOIN visits USING (person_id);

-- case: join on the unit and more conditions
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id AND v.amount > p.age;

-- case: average amount by sex over a join
-- expect: accepted cells=1 keys=1 release=domain:2 rows=2
SELECT p.sex, AVG(v.amount) FROM visits v JOIN people p USING (person_id) GROUP BY p.sex;

-- case: unqualified columns of one table each
-- expect: accepted cells=2 rows=1
SELECT AVG(amount), AVG(age) FROM visits v JOIN people p USING (person_id) WHERE sex = 'F';

-- case: region from a public table is a public domain
-- expect: accepted keys=1 release=domain:4 l1[0]=10 cost=1,0 rows=4
SELECT s.region, COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id JOIN states s ON p.state = s.state GROUP BY s.region;

-- case: one row per person joined to a unique public key needs no bounding
-- expect: accepted keys=1 release=domain:4 l1[0]=1 rows=4
SELECT s.region, COUNT(*) FROM people p JOIN states s ON p.state = s.state GROUP BY s.region;

-- case: left join to a public table keeps unmatched rows
-- expect: accepted keys=1 l1[0]=1 run
SELECT s.region, COUNT(*) FROM people p LEFT JOIN states s USING (state) GROUP BY 1;

-- case: using column of a public table takes its domain
-- expect: accepted keys=1 release=domain:51 rows=51
SELECT state, COUNT(*) FROM people JOIN states USING (state) GROUP BY state;

-- case: sum of a public column takes its bounds from the public data
-- expect: accepted keys=1 release=domain:6 l1[0]=9500 rows=6
SELECT c.department, SUM(c.base_fee) FROM visits v JOIN categories c ON v.category = c.category GROUP BY 1;

-- case: public table joined on a non-key multiplies rows and k
-- expect: accepted keys=1 release=domain:4 l1[0]=51 rows=4
SELECT s.region, COUNT(*) FROM people p JOIN states s ON s.region <> p.sex GROUP BY 1;

-- case: private row matching many public rows is bounded after the join
-- expect: accepted cells=1 l1[0]=80 rows=1
SELECT COUNT(*) FROM visits v JOIN categories c ON v.amount > c.base_fee;

-- case: cross join with a public table
-- expect: accepted cells=1 l1[0]=80 rows=1
SELECT COUNT(*) FROM visits CROSS JOIN categories;

-- case: self join on the unit is bounded
-- expect: accepted cells=1 l1[0]=100 rows=1
SELECT COUNT(*) FROM visits a JOIN visits b ON a.person_id = b.person_id AND a.day < b.day;

-- case: foreign key path joins itself
-- expect: accepted keys=1 release=domain:8 l1[0]=20 rows=8
SELECT drug, COUNT(*) FROM prescriptions GROUP BY drug;

-- case: foreign key path joined to its target
-- expect: accepted keys=1 release=domain:8 l1[0]=200 rows=8
SELECT v.category, COUNT(*) FROM prescriptions r JOIN visits v ON r.visit_id = v.visit_id GROUP BY 1;

-- case: foreign key path joined on the unit it reaches
-- expect: accepted keys=1 release=domain:2 rows=2
SELECT p.sex, AVG(r.cost) FROM prescriptions r JOIN people p ON r.person_id = p.person_id GROUP BY 1;

-- case: semi join in
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT COUNT(*) FROM people WHERE person_id IN (SELECT person_id FROM visits WHERE amount > 1000);

-- case: anti join not in
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT COUNT(*) FROM people WHERE person_id NOT IN (SELECT person_id FROM visits WHERE category = 'dental');

-- case: exists correlated on the unit
-- expect: accepted keys=1 release=domain:2 rows=2
SELECT sex, COUNT(*) FROM people p WHERE age > 30 AND EXISTS (SELECT 1 FROM visits v WHERE v.person_id = p.person_id AND v.category = 'emergency') GROUP BY sex;

-- case: not exists over visits
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(*) FROM visits v WHERE NOT EXISTS (SELECT 1 FROM people p WHERE p.person_id = v.person_id AND p.age > 60);

-- case: join on other columns
-- expect: refused JoinRefused mentions=unit
SELECT COUNT(*) FROM visits v JOIN people p ON v.duration_min = p.age;

-- case: comma join of private tables
-- expect: refused JoinRefused mentions="cross join"
SELECT COUNT(*) FROM people, visits;

-- case: cross join of private tables
-- expect: refused JoinRefused mentions="cross join"
SELECT COUNT(*) FROM people CROSS JOIN visits;

-- case: self join on a non-unit column
-- expect: refused JoinRefused
SELECT COUNT(*) FROM people a JOIN people b ON a.age = b.age;

-- case: join on the unit or something else
-- expect: refused JoinRefused
SELECT COUNT(*) FROM people p JOIN visits v ON p.person_id = v.person_id OR p.age = v.duration_min;

-- case: self join multiplying a unit beyond the cap
-- expect: refused JoinRefused mentions=1000
SELECT COUNT(*) FROM visits a JOIN visits b USING (person_id) JOIN visits c USING (person_id) JOIN visits d USING (person_id);

-- case: public table left join private keeps rows of no one
-- expect: refused JoinRefused mentions="private table first"
SELECT COUNT(*) FROM states s LEFT JOIN people p ON p.state = s.state;

-- case: full join with a public table
-- expect: refused JoinRefused
SELECT COUNT(*) FROM people p FULL JOIN states s ON p.state = s.state;

-- case: group by the unit of a joined table
-- expect: refused KeyReleaseRefused mentions=unit
SELECT v.person_id, COUNT(*) FROM visits v JOIN people p USING (person_id) GROUP BY 1;

-- case: ambiguous column
-- expect: refused UnknownColumn mentions=several
SELECT COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id WHERE person_id > 3;

-- case: unknown qualifier in a join
-- expect: refused UnknownColumn
SELECT COUNT(*) FROM visits v JOIN people p USING (person_id) WHERE x.age > 3;

-- case: join to an undeclared table
-- expect: refused UnknownTable
SELECT COUNT(*) FROM visits v JOIN salaries s ON v.person_id = s.person_id;

-- case: natural join
-- expect: refused UnsupportedQuery mentions=NATURAL
SELECT COUNT(*) FROM people NATURAL JOIN visits;

-- case: semi join keyword
-- expect: refused UnsupportedQuery mentions=EXISTS
SELECT COUNT(*) FROM people SEMI JOIN visits USING (person_id);

-- case: anti join keyword
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people ANTI JOIN visits USING (person_id);

-- case: positional join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people POSITIONAL JOIN visits;

-- case: asof join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM visits a ASOF JOIN visits b ON a.person_id = b.person_id AND a.day >= b.day;

-- case: join inside cte
-- expect: refused UnsupportedQuery mentions="outer query"
WITH j AS (SELECT * FROM people JOIN visits USING (person_id)) SELECT COUNT(*) FROM j;

-- case: join of two ctes
-- expect: refused UnsupportedQuery mentions="declared tables"
WITH a AS (SELECT * FROM people), b AS (SELECT * FROM visits) SELECT COUNT(*) FROM a JOIN b USING (person_id);

-- case: join of public tables only
-- expect: accepted path=public rows=1
SELECT COUNT(*) FROM states s JOIN categories c ON true;

-- case: in subquery on a non-unit column
-- expect: refused JoinRefused mentions=unit
SELECT COUNT(*) FROM people WHERE age IN (SELECT age FROM people WHERE sex = 'F');

-- case: exists without correlation
-- expect: refused JoinRefused mentions=correlate
SELECT COUNT(*) FROM people WHERE EXISTS (SELECT 1 FROM visits);

-- case: exists whose subquery's alias hides the outer one
-- expect: refused JoinRefused mentions=hides
SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits v WHERE v.person_id = v.person_id AND v.duration_min > 30);

-- case: exists whose subquery's table hides the outer unaliased one
-- expect: refused JoinRefused mentions=hides
SELECT COUNT(*) FROM visits WHERE EXISTS (SELECT 1 FROM visits WHERE visits.person_id = visits.person_id);

-- case: exists correlated with an unaliased outer table
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM visits WHERE EXISTS (SELECT 1 FROM people p WHERE p.person_id = visits.person_id AND p.age > 60);

-- case: exists correlated on another column
-- expect: refused JoinRefused mentions=correlate
SELECT COUNT(*) FROM people p WHERE EXISTS (SELECT 1 FROM visits v WHERE v.duration_min = p.age);

-- case: semi join with an aggregate
-- expect: refused KeyReleaseRefused mentions=unit
SELECT COUNT(*) FROM people WHERE person_id IN (SELECT person_id FROM visits GROUP BY person_id HAVING COUNT(*) > 3);

-- case: semi join with a limit
-- expect: refused JoinRefused mentions=LIMIT
SELECT COUNT(*) FROM people WHERE person_id IN (SELECT person_id FROM visits LIMIT 10);

-- case: semi join under or
-- expect: refused UnsupportedQuery mentions=EXISTS
SELECT COUNT(*) FROM people WHERE age > 80 OR person_id IN (SELECT person_id FROM visits);

-- case: semi join on a public table
-- expect: refused JoinRefused mentions="same privacy unit"
SELECT COUNT(*) FROM people p WHERE EXISTS (SELECT 1 FROM states s WHERE s.state = p.state);

-- case: constant in on evaluated at plan time
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id AND p.age > CAST('old' AS INT);

-- case: semi join filter constant evaluated at plan time
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM people WHERE person_id IN (SELECT person_id FROM visits WHERE amount > CAST('x' AS DOUBLE));

-- case: foreign key path table read through a CTE
-- expect: refused UnsupportedQuery mentions=unit_path
WITH t AS (SELECT * FROM prescriptions) SELECT COUNT(*) FROM t;

-- case: foreign key path table read through a subquery in FROM
-- expect: refused UnsupportedQuery mentions=unit_path
SELECT COUNT(*) FROM (SELECT drug, cost FROM prescriptions WHERE cost > 10) r;

-- case: foreign key path table read through a nested CTE and grouped
-- expect: refused UnsupportedQuery mentions=unit_path
WITH a AS (SELECT * FROM prescriptions), b AS (SELECT drug FROM a) SELECT drug, COUNT(*) FROM b GROUP BY drug;
