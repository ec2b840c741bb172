-- FROM: exactly one declared table. Engine catalogs, other schemas, files, table functions,
-- and set operations are refused before anything runs (joins: joins.sql).

-- case: undeclared table
-- expect: refused UnknownTable mentions=people
SELECT COUNT(*) FROM salaries;

-- case: undeclared table in group query
-- expect: refused UnknownTable
SELECT sex, COUNT(*) FROM patients GROUP BY sex;

-- case: information schema tables
-- expect: refused UnknownTable
SELECT COUNT(*) FROM information_schema.tables;

-- case: information schema columns
-- expect: refused UnknownTable
SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'people';

-- case: pg catalog class
-- expect: refused UnknownTable
SELECT COUNT(*) FROM pg_catalog.pg_class;

-- case: pg tables unqualified
-- expect: refused UnknownTable
SELECT COUNT(*) FROM pg_tables;

-- case: duckdb tables function
-- expect: refused ForbiddenFunction mentions=table
SELECT COUNT(*) FROM duckdb_tables();

-- case: duckdb settings function
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM duckdb_settings();

-- case: duckdb columns function
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM duckdb_columns();

-- case: read csv
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM read_csv('/etc/passwd');

-- case: read csv auto
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM read_csv_auto('people.csv');

-- case: read parquet
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM read_parquet('people.parquet');

-- case: read json
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM read_json('x.json');

-- case: glob files
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM glob('*');

-- case: range table function
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM range(10);

-- case: generate series table function
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM generate_series(1, 10);

-- case: file path as table
-- expect: refused UnknownTable
SELECT COUNT(*) FROM 'people.parquet';

-- case: table function in cte
-- expect: refused ForbiddenFunction
WITH f AS (SELECT * FROM read_csv('x.csv')) SELECT COUNT(*) FROM f;

-- case: table function in subquery
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM (SELECT * FROM read_parquet('x.parquet')) t;

-- case: values in from
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM (VALUES (1), (2)) v(x);

-- case: select without from
-- expect: refused UnsupportedQuery mentions=FROM
SELECT 1 + 1;

-- case: aggregate without from
-- expect: refused UnsupportedQuery
SELECT COUNT(*);

-- case: other catalog
-- expect: refused UnknownTable
SELECT COUNT(*) FROM memory.main.people;

-- case: other schema
-- expect: refused UnknownTable
SELECT COUNT(*) FROM private.people;

-- case: main schema is the default
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM main.people;

-- case: lateral join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people, LATERAL (SELECT age + 1 AS a) t;

-- case: union
-- expect: accepted cost=2,0 rows<=2
SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM visits;

-- case: union all
-- expect: accepted cost=2,0 rows=2
SELECT COUNT(*) FROM people UNION ALL SELECT COUNT(*) FROM people;

-- case: intersect
-- expect: refused UnsupportedQuery mentions=INTERSECT
SELECT COUNT(*) FROM people INTERSECT SELECT COUNT(*) FROM people;

-- case: except
-- expect: refused UnsupportedQuery mentions=EXCEPT
SELECT COUNT(*) FROM people EXCEPT SELECT COUNT(*) FROM people;

-- case: union by name
-- expect: accepted cost=2,0 names=n rows<=2
SELECT COUNT(*) AS n FROM people UNION BY NAME SELECT COUNT(*) AS n FROM visits;

-- case: union inside cte
-- expect: refused UnsupportedQuery
WITH u AS (SELECT age FROM people UNION ALL SELECT age FROM people) SELECT COUNT(*) FROM u;

-- case: union inside subquery
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM (SELECT age FROM people UNION SELECT age FROM people) t;

-- case: tablesample refused
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people TABLESAMPLE 10%;

-- case: using sample refused
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people USING SAMPLE 10%;
