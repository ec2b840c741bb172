-- FROM: exactly one declared table. Engine catalogs, other schemas, files, table functions,
-- joins (a later issue) and set operations are refused before anything runs.

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

-- case: comma join
-- expect: refused UnsupportedQuery mentions=join
SELECT COUNT(*) FROM people, visits;

-- case: inner join on
-- expect: refused UnsupportedQuery mentions=join
SELECT COUNT(*) FROM people p JOIN visits v ON p.person_id = v.person_id;

-- case: inner join using
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people INNER JOIN visits USING (person_id);

-- case: left join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people LEFT JOIN visits USING (person_id);

-- case: left outer join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people LEFT OUTER JOIN visits ON people.person_id = visits.person_id;

-- case: right join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people RIGHT JOIN visits USING (person_id);

-- case: full outer join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people FULL OUTER JOIN visits USING (person_id);

-- case: cross join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people CROSS JOIN visits;

-- case: natural join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people NATURAL JOIN visits;

-- case: self join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people a JOIN people b ON a.age = b.age;

-- case: semi join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people SEMI JOIN visits USING (person_id);

-- case: anti join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people ANTI JOIN visits USING (person_id);

-- case: positional join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people POSITIONAL JOIN visits;

-- case: asof join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM visits a ASOF JOIN visits b ON a.person_id = b.person_id AND a.day >= b.day;

-- case: lateral join
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people, LATERAL (SELECT age + 1 AS a) t;

-- case: join inside cte
-- expect: refused UnsupportedQuery mentions=join
WITH j AS (SELECT * FROM people JOIN visits USING (person_id)) SELECT COUNT(*) FROM j;

-- case: join of two ctes
-- expect: refused UnsupportedQuery
WITH a AS (SELECT * FROM people), b AS (SELECT * FROM visits) SELECT COUNT(*) FROM a JOIN b USING (person_id);

-- case: union
-- expect: refused UnsupportedQuery mentions=UNION
SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM visits;

-- case: union all
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people UNION ALL SELECT COUNT(*) FROM people;

-- case: intersect
-- expect: refused UnsupportedQuery mentions=INTERSECT
SELECT COUNT(*) FROM people INTERSECT SELECT COUNT(*) FROM people;

-- case: except
-- expect: refused UnsupportedQuery mentions=EXCEPT
SELECT COUNT(*) FROM people EXCEPT SELECT COUNT(*) FROM people;

-- case: union by name
-- expect: refused UnsupportedQuery
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
