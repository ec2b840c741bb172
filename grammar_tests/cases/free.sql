-- Answers fixed by public information (dpsql/free.py): probes that release column names and
-- types only, and public domains with no aggregate. Exact, no charge (cost=0,0, path=free).
-- Run on "central" (databases.py): the sample data without people's local section, so that
-- its rows stay private here (local_rows.sql has the local path).
-- database: central

-- case: jupysql column probe
-- expect: accepted path=free cost=0,0 columns=10 rows=0
SELECT * FROM "people" WHERE 1=0;

-- case: where false on a row-level select
-- expect: accepted path=free names="day|amount" rows=0
SELECT day, amount FROM visits WHERE false;

-- case: where null is false
-- expect: accepted path=free rows=0
SELECT email FROM people WHERE NULL;

-- case: a false conjunct among others
-- expect: accepted path=free rows=0
SELECT email FROM people WHERE age > 30 AND 1 = 2;

-- case: superset virtual dataset probe
-- expect: accepted path=free names="category|amount" rows=0
SELECT * FROM (SELECT category, amount FROM visits) AS virtual_table LIMIT 0;

-- case: limit zero over a join
-- expect: accepted path=free names="drug|category" rows=0
SELECT p.drug, v.category FROM prescriptions p JOIN visits v ON p.visit_id = v.visit_id LIMIT 0;

-- case: fetch first zero rows on a thresholded key
-- expect: accepted path=free cost=0,0 rows=0
SELECT state, COUNT(*) FROM people GROUP BY state FETCH FIRST 0 ROWS ONLY;

-- case: false filter under group by keys
-- expect: accepted path=free rows=0
SELECT sex, COUNT(*) FROM people WHERE 1 = 0 GROUP BY sex;

-- case: false filter under a global aggregate is one noisy row
-- expect: accepted path=private cost=1,0 rows=1
SELECT COUNT(*) FROM people WHERE 1 = 0;

-- case: a filter that depends on a column is no probe
-- expect: refused NonAggregatedColumn
SELECT * FROM people WHERE age = 1000;

-- case: a filter on a parameter-like function is no probe
-- expect: refused NonAggregatedColumn
SELECT email FROM people WHERE length('a') = 0;

-- case: a probe of an undeclared table
-- expect: refused UnknownTable
SELECT * FROM nowhere WHERE 1 = 0;

-- case: a probe of an undeclared column
-- expect: refused UnknownColumn
SELECT salary FROM people LIMIT 0;

-- case: a probe that reads a file
-- expect: refused ForbiddenFunction
SELECT read_csv('/etc/passwd') FROM people LIMIT 0;

-- case: metabase field values
-- expect: accepted path=free cost=0,0 keys=1 release=domain:2 rows=2
SELECT "sex" FROM "people" GROUP BY "sex" ORDER BY "sex" ASC LIMIT 1000;

-- case: grafana template variable
-- expect: accepted path=free cost=0,0 release=domain:8 rows=8
SELECT DISTINCT category FROM visits;

-- case: distinct over two public keys
-- expect: accepted path=free release=domain:16 rows=16
SELECT DISTINCT sex, category FROM visits v JOIN people p ON v.person_id = p.person_id;

-- case: a public domain is not narrowed by a filter on another column
-- expect: accepted path=free release=domain:2 rows=2
SELECT sex FROM people WHERE income > 100000 GROUP BY sex;

-- case: distinct over a key without a public domain needs delta
-- expect: refused KeyReleaseRefused
SELECT DISTINCT state FROM people;

-- case: distinct over a key without a public domain is thresholded and charged
-- options: delta=1e-6
-- expect: accepted path=private release=threshold cost=1,1e-6
SELECT DISTINCT state FROM people;

-- case: a public key with an aggregate is charged
-- expect: accepted path=private cost=1,0 release=domain:2
SELECT sex, COUNT(*) FROM people GROUP BY sex;
