-- Statement kinds: only one SELECT is ever answered. Everything else is refused in the parse
-- pass, before any name is resolved, and never reaches the engine.

-- case: insert
-- expect: refused NotASingleSelect mentions=INSERT
INSERT INTO people (person_id, age) VALUES (1, 30);

-- case: insert from select
-- expect: refused NotASingleSelect
INSERT INTO people SELECT * FROM people;

-- case: update
-- expect: refused NotASingleSelect mentions=UPDATE
UPDATE people SET age = 1 WHERE person_id = 7;

-- case: delete
-- expect: refused NotASingleSelect mentions=DELETE
DELETE FROM people WHERE age > 90;

-- case: truncate
-- expect: refused NotASingleSelect
TRUNCATE people;

-- case: create table
-- expect: refused NotASingleSelect mentions=CREATE
CREATE TABLE copy_of_people (person_id INTEGER, age INTEGER);

-- case: create table as select
-- expect: refused NotASingleSelect
CREATE TABLE leak AS SELECT * FROM people;

-- case: create view
-- expect: refused NotASingleSelect
CREATE VIEW v AS SELECT COUNT(*) FROM people;

-- case: create macro
-- expect: refused NotASingleSelect
CREATE MACRO twice(a) AS a * 2;

-- case: create secret
-- expect: refused NotASingleSelect mentions=CREATE
CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's');

-- case: drop table
-- expect: refused NotASingleSelect mentions=DROP
DROP TABLE people;

-- case: drop view if exists
-- expect: refused NotASingleSelect
DROP VIEW IF EXISTS v;

-- case: alter table add column
-- expect: refused NotASingleSelect mentions=ALTER
ALTER TABLE people ADD COLUMN leaked INTEGER;

-- case: alter table rename
-- expect: refused NotASingleSelect
ALTER TABLE people RENAME TO persons;

-- case: pragma database list
-- expect: refused NotASingleSelect mentions=PRAGMA
PRAGMA database_list;

-- case: pragma table info
-- expect: refused NotASingleSelect
PRAGMA table_info('people');

-- case: set threads
-- expect: refused NotASingleSelect mentions=SET
SET threads = 1;

-- case: set external access
-- expect: refused NotASingleSelect
SET enable_external_access = true;

-- case: set variable
-- expect: refused NotASingleSelect
SET VARIABLE x = 1;

-- case: reset setting
-- expect: refused NotASingleSelect
RESET threads;

-- case: copy to file
-- expect: refused NotASingleSelect mentions=COPY
COPY people TO 'people.csv';

-- case: copy query to file
-- expect: refused NotASingleSelect
COPY (SELECT * FROM people) TO 'out.parquet' (FORMAT PARQUET);

-- case: copy from file
-- expect: refused NotASingleSelect
COPY people FROM 'more_people.csv';

-- case: attach database
-- expect: refused NotASingleSelect mentions=ATTACH
ATTACH 'other.duckdb' AS other;

-- case: detach database
-- expect: refused NotASingleSelect mentions=DETACH
DETACH other;

-- case: install extension
-- expect: refused NotASingleSelect mentions=INSTALL
INSTALL httpfs;

-- case: load extension
-- expect: refused NotASingleSelect mentions=LOAD
LOAD httpfs;

-- case: call table function
-- expect: refused NotASingleSelect mentions=CALL
CALL pragma_version();

-- case: export database
-- expect: refused NotASingleSelect mentions=EXPORT
EXPORT DATABASE 'dump_dir';

-- case: export database with format
-- expect: refused NotASingleSelect
EXPORT DATABASE 'dump_dir' (FORMAT PARQUET);

-- case: import database
-- expect: refused NotASingleSelect mentions=IMPORT
IMPORT DATABASE 'dump_dir';

-- case: describe table
-- expect: refused NotASingleSelect
DESCRIBE people;

-- case: show tables
-- expect: refused NotASingleSelect
SHOW TABLES;

-- case: summarize table
-- expect: refused NotASingleSelect
SUMMARIZE people;

-- case: explain select
-- expect: refused NotASingleSelect
EXPLAIN SELECT COUNT(*) FROM people;

-- case: explain analyze select
-- expect: refused NotASingleSelect
EXPLAIN ANALYZE SELECT COUNT(*) FROM people;

-- case: values list
-- expect: refused NotASingleSelect
VALUES (1), (2);

-- case: pivot statement
-- expect: refused NotASingleSelect
PIVOT people ON sex USING COUNT(*);

-- case: begin transaction
-- expect: refused NotASingleSelect
BEGIN TRANSACTION;

-- case: checkpoint
-- expect: refused NotASingleSelect
CHECKPOINT;

-- case: vacuum
-- expect: refused NotASingleSelect
VACUUM;

-- case: use database
-- expect: refused NotASingleSelect
USE memory;

-- case: two selects
-- expect: refused NotASingleSelect mentions=2
SELECT COUNT(*) FROM people; SELECT COUNT(*) FROM visits;

-- case: select then drop
-- expect: refused NotASingleSelect
SELECT COUNT(*) FROM people; DROP TABLE people;

-- case: set then select
-- expect: refused NotASingleSelect
SET threads = 1; SELECT COUNT(*) FROM people;

-- case: three statements on three lines
-- expect: refused NotASingleSelect mentions=3
SELECT COUNT(*) FROM people;
SELECT SUM(age) FROM people;
SELECT AVG(age) FROM people;

-- case: only a comment
-- expect: refused NotASingleSelect
-- nothing but a comment here

-- case: empty query
-- text: ""
-- expect: refused SQLSyntaxError mentions=empty

-- case: whitespace only query
-- text: "  \n\t  "
-- expect: refused SQLSyntaxError mentions=empty

-- case: query longer than the limit
-- text: "SELECT COUNT(*) FROM people WHERE " + "age > 1 AND " * 10000 + "TRUE"
-- expect: refused QueryTooComplex mentions=longer

-- case: misspelt select
-- expect: refused SQLSyntaxError
SELEC COUNT(*) FROM people;

-- case: unbalanced parenthesis
-- expect: refused SQLSyntaxError
SELECT COUNT(* FROM people;

-- case: where without condition
-- expect: refused SQLSyntaxError
SELECT COUNT(*) FROM people WHERE;

-- case: unterminated string
-- expect: refused SQLSyntaxError
SELECT COUNT(*) FROM people WHERE sex = 'F;

-- case: from without table
-- expect: refused SQLSyntaxError
SELECT COUNT(*) FROM;

-- case: between without upper end
-- expect: refused SQLSyntaxError
SELECT COUNT(*) FROM people WHERE age BETWEEN 1;

-- case: case without end
-- expect: refused SQLSyntaxError
SELECT SUM(CASE WHEN age > 60 THEN 1 ELSE 0) FROM people;

-- case: limit without count
-- expect: refused SQLSyntaxError
SELECT COUNT(*) FROM people LIMIT;

-- case: parentheses nested deeper than the limit
-- text: "SELECT COUNT(*) FROM people WHERE " + "(" * 40 + "age > 1" + ")" * 40
-- expect: refused QueryTooComplex mentions=parentheses

-- case: an OR chain deeper than the tree limit
-- text: "SELECT COUNT(*) FROM people WHERE " + "age = 1 OR " * 250 + "TRUE"
-- expect: refused QueryTooComplex mentions=deeper
