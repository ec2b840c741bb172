-- Nothing computed row by row may reach the answer: no bare private columns, no SELECT *, no
-- nested aggregates, no windows over private rows.
-- Run on "central" (databases.py): the sample data without people's local section, so that
-- its rows stay private here (local_rows.sql has the local path).
-- database: central

-- case: bare column
-- expect: refused NonAggregatedColumn mentions=aggregat
SELECT age FROM people;

-- case: bare column with where singling out
-- expect: refused NonAggregatedColumn
SELECT income FROM people WHERE person_id = 42;

-- case: bare column with limit
-- expect: refused NonAggregatedColumn
SELECT email FROM people LIMIT 10;

-- case: bare column beside aggregate
-- expect: refused NonAggregatedColumn mentions="GROUP BY"
SELECT age, COUNT(*) FROM people;

-- case: bare column in arithmetic with aggregate
-- expect: refused NonAggregatedColumn
SELECT COUNT(*) + age FROM people;

-- case: bare expression of column
-- expect: refused NonAggregatedColumn
SELECT age + 1 FROM people;

-- case: bare case over column
-- expect: refused NonAggregatedColumn
SELECT CASE WHEN age > 30 THEN 1 ELSE 0 END FROM people;

-- case: privacy unit beside aggregate
-- expect: refused NonAggregatedColumn
SELECT person_id, COUNT(*) FROM visits;

-- case: select star
-- expect: refused NonAggregatedColumn mentions="SELECT *"
SELECT * FROM people;

-- case: select star with where
-- expect: refused NonAggregatedColumn
SELECT * FROM visits WHERE amount > 4000;

-- case: select qualified star
-- expect: refused NonAggregatedColumn
SELECT p.* FROM people p;

-- case: select star beside aggregate
-- expect: refused NonAggregatedColumn
SELECT *, COUNT(*) FROM people;

-- case: select star exclude
-- expect: refused NonAggregatedColumn
SELECT * EXCLUDE (email) FROM people;

-- case: select columns regex
-- expect: refused NonAggregatedColumn
SELECT COLUMNS('inc.*') FROM people;

-- case: from first without select
-- expect: refused NonAggregatedColumn
FROM people;

-- case: table statement
-- expect: refused NonAggregatedColumn
TABLE people;

-- case: from first with aggregate
-- expect: accepted cells=1 rows=1
FROM people SELECT COUNT(*);

-- case: select star from cte
-- expect: refused NonAggregatedColumn
WITH t AS (SELECT age, income FROM people) SELECT * FROM t;

-- case: sum of count
-- expect: refused NestedAggregate mentions=nested
SELECT SUM(COUNT(*)) FROM people;

-- case: avg of sum
-- expect: refused NestedAggregate
SELECT AVG(SUM(age)) FROM people;

-- case: max of min
-- expect: refused NestedAggregate
SELECT MAX(MIN(income)) FROM people GROUP BY sex;

-- case: count of avg
-- expect: refused NestedAggregate
SELECT sex, COUNT(AVG(age)) FROM people GROUP BY sex;

-- case: nested aggregate in filter value
-- expect: refused NestedAggregate
SELECT SUM(age + COUNT(*)) FROM people;

-- case: nested aggregate in having
-- expect: refused NestedAggregate
SELECT sex, COUNT(*) FROM people GROUP BY sex HAVING SUM(COUNT(*)) > 1;

-- case: window sum over rows
-- expect: refused WindowOverPrivateRows mentions="private rows"
SELECT SUM(age) OVER () FROM people;

-- case: window row number over rows
-- expect: refused WindowOverPrivateRows
SELECT ROW_NUMBER() OVER (ORDER BY income) FROM people;

-- case: window partition over rows
-- expect: refused WindowOverPrivateRows
SELECT AVG(income) OVER (PARTITION BY sex) FROM people;

-- case: window lag over rows
-- expect: refused WindowOverPrivateRows
SELECT LAG(amount) OVER (PARTITION BY person_id ORDER BY day) FROM visits;

-- case: window ordered by private column beside aggregate
-- expect: refused WindowOverPrivateRows
SELECT sex, COUNT(*), ROW_NUMBER() OVER (ORDER BY age) FROM people GROUP BY sex;

-- case: window partitioned by private column over aggregate
-- expect: refused WindowOverPrivateRows
SELECT sex, SUM(COUNT(*)) OVER (PARTITION BY state) FROM people GROUP BY sex;

-- case: window inside aggregate
-- expect: refused WindowOverPrivateRows
SELECT SUM(ROW_NUMBER() OVER ()) FROM people;

-- case: window inside filter
-- expect: refused WindowOverPrivateRows
SELECT COUNT(*) FILTER (WHERE RANK() OVER (ORDER BY income) < 10) FROM people;

-- case: qualify over private rows
-- expect: refused WindowOverPrivateRows
SELECT COUNT(*) FROM people QUALIFY ROW_NUMBER() OVER (ORDER BY age) = 1;

-- case: window in cte
-- expect: refused UnsupportedQuery
WITH ranked AS (SELECT age, ROW_NUMBER() OVER (ORDER BY income) AS r FROM people) SELECT COUNT(*) FROM ranked WHERE r < 100;

-- case: undeclared column in select
-- expect: refused UnknownColumn mentions=salary
SELECT SUM(salary) FROM people;

-- case: column of other table
-- expect: refused UnknownColumn mentions=people
SELECT AVG(amount) FROM people;

-- case: wrong qualifier
-- expect: refused UnknownColumn
SELECT COUNT(visits.amount) FROM people;

-- case: unknown qualifier
-- expect: refused UnknownColumn
SELECT COUNT(x.age) FROM people p;

-- case: undeclared column in count
-- expect: refused UnknownColumn
SELECT COUNT(ssn) FROM people;

-- case: misspelt column
-- expect: refused UnknownColumn
SELECT AVG(incme) FROM people;

-- case: rowid pseudo column
-- expect: refused UnknownColumn
SELECT COUNT(rowid) FROM people;
