-- Names as analysts write them: aliases, qualified and quoted identifiers, any letter case,
-- comments anywhere. Output column names are the aliases or column names as written, else what
-- PostgreSQL names the item (count, sum, the function's name as written, ?column?).

-- case: alias with as
-- expect: accepted names=n rows=1
SELECT COUNT(*) AS n FROM people;

-- case: alias without as
-- expect: accepted names=n rows=1
SELECT COUNT(*) n FROM people;

-- case: quoted alias with space
-- expect: accepted names="number of people" rows=1
SELECT COUNT(*) AS "number of people" FROM people;

-- case: quoted alias keeps case
-- expect: accepted names=MeanAge rows=1
SELECT AVG(age) AS "MeanAge" FROM people;

-- case: several aliases
-- expect: accepted columns=3 names=s|n|avg_income rows=2
SELECT sex AS s, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex;

-- case: unaliased names are postgresql's
-- expect: accepted names="education|count|sum" rows=6
SELECT education, COUNT(*), SUM(income) FROM people GROUP BY education;

-- case: unaliased functions are named as written
-- expect: accepted names="date_trunc|var_samp|variance|stddev_pop|count" rows=12
SELECT DATE_TRUNC('month', day), VAR_SAMP(amount), VARIANCE(amount), StdDev_Pop(amount), COUNT(DISTINCT person_id) FROM visits GROUP BY 1;

-- case: unaliased arithmetic is ?column?
-- expect: accepted names="?column?|count|upper" rows=2
SELECT SUM(income) / COUNT(*), COUNT(*), UPPER(sex) FROM people GROUP BY sex;

-- case: a query over an answer with two columns of one name
-- expect: accepted names="count|count_1" rows=1
SELECT count, count_1 FROM (SELECT COUNT(*), COUNT(DISTINCT person_id) FROM people) AS t;

-- case: unaliased public read named as postgresql names it
-- expect: accepted path=public names="count|?column?" rows=1
SELECT COUNT(*), COUNT(*) + 1 FROM states;

-- case: table alias
-- expect: accepted rows=2
SELECT p.sex, COUNT(*) FROM people p GROUP BY p.sex;

-- case: table alias with as
-- expect: accepted names="sex|count" rows=2
SELECT p.sex, COUNT(*) FROM people AS p GROUP BY p.sex;

-- case: table name qualifier
-- expect: accepted rows=2
SELECT people.sex, COUNT(*) FROM people GROUP BY people.sex;

-- case: qualified column inside aggregate
-- expect: accepted l1[0]=50000 rows=1
SELECT SUM(v.amount) FROM visits v WHERE v.category = 'lab';

-- case: schema qualified column
-- expect: accepted rows=1
SELECT AVG(people.income) FROM main.people;

-- case: quoted table name
-- expect: accepted rows=1
SELECT COUNT(*) FROM "people";

-- case: quoted column names
-- expect: accepted names="sex|count" rows=2
SELECT "sex", COUNT(*) FROM "people" GROUP BY "sex";

-- case: quoted qualified column
-- expect: accepted rows=1
SELECT SUM("p"."age") FROM "people" AS "p";

-- case: upper case table and columns
-- expect: accepted release=domain:2 rows=2
SELECT SEX, COUNT(*) FROM PEOPLE GROUP BY SEX;

-- case: lower case keywords
-- expect: accepted rows=2
select sex, count(*) from people group by sex order by sex;

-- case: mixed case everything
-- expect: accepted l1[0]=95 rows=1
SeLeCt SuM(AgE) fRoM PeOpLe WhErE SeX = 'F';

-- case: mixed case function names
-- expect: accepted measurements=3 rows=1
SELECT StdDev_Pop(Income) FROM People;

-- case: quoted identifier with other case
-- expect: accepted rows=1
SELECT COUNT("Age") FROM people;

-- case: line comment before
-- expect: accepted rows=1
-- how many members?
SELECT COUNT(*) FROM people;

-- case: line comment after
-- expect: accepted rows=1
SELECT COUNT(*) FROM people; -- that is all

-- case: block comment inside
-- expect: accepted rows=1
SELECT /* the count */ COUNT(*) FROM /* the table */ people;

-- case: multi line query with comments
-- expect: accepted cells=2 release=domain:8 rows=8
SELECT category,          -- the key
       COUNT(*) AS n,     -- visits
       SUM(amount) AS total
FROM visits
/* only 2025 */
WHERE day >= DATE '2025-01-01'
GROUP BY category
ORDER BY n DESC;

-- case: comment hiding a second statement
-- expect: accepted rows=1
SELECT COUNT(*) FROM people -- ; DROP TABLE people
;

-- case: no trailing semicolon
-- expect: accepted rows=1
SELECT COUNT(*) FROM people

-- case: extra whitespace
-- expect: accepted rows=1
   SELECT    COUNT( * )
   FROM   people   ;

-- case: string with semicolon
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE email = 'a;b@example.com';

-- case: string with quote
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE email = 'o''brien@example.com';

-- case: alias shadowing a column in group by
-- expect: accepted keys=1 release=domain:2 rows=2
SELECT sex AS education, COUNT(*) FROM people GROUP BY sex;

-- case: alias used in order by
-- expect: accepted rows=6
SELECT education AS e, COUNT(*) AS n FROM people GROUP BY e ORDER BY n DESC, e;

-- case: alias not usable in where
-- expect: refused UnknownColumn
SELECT COUNT(*) AS n FROM people WHERE n > 5;
