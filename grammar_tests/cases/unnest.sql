-- BigQuery's UNNEST of a literal array in a join (dpsql/query/joins.py, literal_table): a public
-- table written in the query, one row per element. Each private row joined with it becomes one
-- row per element, so the joined k is the table's k times the array's length (people: 1 x 3),
-- and bounding runs on the joined rows as for any join with a public table.

-- case: unnest literal array multiplies each row
-- expect: accepted cells=1 l1[0]=3 rows=1
SELECT COUNT(*) FROM people CROSS JOIN UNNEST([1, 2, 3]) AS x;

-- case: unnest literal array as a public group key
-- expect: accepted cells=1 keys=1 release=domain:3 l1[0]=3 rows=3
SELECT x, COUNT(*) AS n FROM people CROSS JOIN UNNEST([1, 2, 3]) AS x GROUP BY x;

-- case: unnest literal strings in the clause
-- expect: accepted keys=1 release=domain:2 cost=1,0 rows=2
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 1, max_groups_contributed = 2)
  tag, COUNT(*) AS n
FROM people CROSS JOIN UNNEST(['a', 'b']) AS tag GROUP BY tag;

-- case: unnest of a column is not a literal array
-- expect: refused UnsupportedQuery mentions="only declared tables"
SELECT COUNT(*) FROM people CROSS JOIN UNNEST([age, children]) AS x;

-- case: unnest of mixed types is refused
-- expect: refused UnsupportedQuery mentions="only declared tables"
SELECT COUNT(*) FROM people CROSS JOIN UNNEST([1, 'a']) AS x;

-- case: approx quantiles as a list column
-- expect: accepted cells=6 measurements=6 cost=1,0 rows=1
SELECT APPROX_QUANTILES(income, 5) AS q FROM people;

-- case: approx quantiles read by offset
-- expect: accepted cells=3 rows=1
SELECT APPROX_QUANTILES(age, 2)[OFFSET(1)] AS median_age, ARRAY_LENGTH(APPROX_QUANTILES(age, 2)) AS n FROM people;

-- case: approx quantiles needs a whole number of quantiles
-- expect: refused UnsupportedAggregate mentions="whole number n"
SELECT APPROX_QUANTILES(age, 0) FROM people;
