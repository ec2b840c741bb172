-- GROUP BY: keys with a public domain (declared values, public_range, bool, a CASE with
-- constant branches, an expression over public domains) release every key, empty ones
-- included, at delta = 0. Other keys need thresholding (delta > 0), else KeyReleaseRefused.

-- case: group by text column with values
-- expect: accepted columns=2 cells=1 measurements=1 keys=1 release=domain:2 l1[0]=1 cost=1,0
-- expect: names="sex|count" types=BIGINT rows=2
SELECT sex, COUNT(*) FROM people GROUP BY sex;

-- case: group by education domain
-- expect: accepted keys=1 release=domain:6 rows=6
SELECT education, COUNT(*) FROM people GROUP BY education;

-- case: group by public range
-- expect: accepted keys=1 release=domain:78 rows=78
SELECT age, COUNT(*) FROM people GROUP BY age;

-- case: group by small public range
-- expect: accepted release=domain:9 measurements=2 rows=9
SELECT children, AVG(income) FROM people GROUP BY children;

-- case: group by boolean column
-- expect: accepted release=domain:2 rows=2
SELECT married, COUNT(*) FROM people GROUP BY married;

-- case: group by category on visits
-- expect: accepted release=domain:8 l1[0]=10 rows=8
SELECT category, COUNT(*) FROM visits GROUP BY category;

-- case: sum per category is calibrated to all groups of a unit
-- expect: accepted release=domain:8 l1[0]=50000 types=DOUBLE rows=8
SELECT category, SUM(amount) FROM visits GROUP BY category;

-- case: avg per category
-- expect: accepted measurements=2 l1[0]=10 l1[1]=1175 rows=8
SELECT category, AVG(duration_min) FROM visits GROUP BY category;

-- case: median per category
-- expect: accepted measurements=1 l1[0]=10 rows=8
SELECT category, MEDIAN(amount) FROM visits GROUP BY category;

-- case: several aggregates per group
-- expect: accepted columns=5 cells=4 measurements=5 release=domain:2 rows=2
SELECT sex, COUNT(*), AVG(age), SUM(income), MAX(children) FROM people GROUP BY sex;

-- case: two keys with domains
-- expect: accepted keys=2 release=domain:12 rows=12
SELECT sex, education, COUNT(*) FROM people GROUP BY sex, education;

-- case: four keys with domains
-- expect: accepted keys=4 release=domain:216 rows=216
SELECT sex, married, children, education, COUNT(*) FROM people GROUP BY sex, married, children, education HAVING COUNT(*) > -1000000;

-- case: key not in select list
-- expect: accepted columns=1 keys=1 release=domain:2 rows=2
SELECT COUNT(*) FROM people GROUP BY sex;

-- case: key after the aggregate
-- expect: accepted names="count|sex" rows=2
SELECT COUNT(*), sex FROM people GROUP BY sex;

-- case: group by ordinal
-- expect: accepted keys=1 release=domain:2 rows=2
SELECT sex, COUNT(*) FROM people GROUP BY 1;

-- case: group by two ordinals
-- expect: accepted keys=2 release=domain:12 rows=12
SELECT education, sex, COUNT(*) AS n FROM people GROUP BY 1, 2;

-- case: group by alias
-- expect: accepted keys=1 names=s|n rows=2
SELECT sex AS s, COUNT(*) AS n FROM people GROUP BY s;

-- case: group by all
-- expect: accepted keys=2 release=domain:12 rows=12
SELECT sex, education, COUNT(*) FROM people GROUP BY ALL;

-- case: group by case with constant branches
-- expect: accepted keys=1 release=domain:3 names="band|count" rows=3
SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'middle' ELSE 'old' END AS band, COUNT(*) FROM people GROUP BY band;

-- case: group by case by ordinal
-- expect: accepted release=domain:2 rows=2
SELECT CASE WHEN age < 30 THEN 'young' ELSE 'older' END, COUNT(*) FROM people GROUP BY 1;

-- case: group by case without else includes null
-- expect: accepted release=domain:2 rows=2
SELECT CASE WHEN amount > 1000 THEN 'large' END AS big, COUNT(*) FROM visits GROUP BY big;

-- case: group by case on unbounded column is public
-- expect: accepted release=domain:2 rows=2
SELECT CASE WHEN income > 50000 THEN 'high' ELSE 'low' END AS bracket, AVG(age) FROM people GROUP BY bracket;

-- case: group by case with numeric branches
-- expect: accepted release=domain:3 rows=3
SELECT CASE WHEN duration_min <= 15 THEN 15 WHEN duration_min <= 60 THEN 60 ELSE 240 END AS slot, COUNT(*) FROM visits GROUP BY slot;

-- case: group by case repeated in group by clause
-- expect: accepted release=domain:2 rows=2
SELECT CASE WHEN married THEN 'yes' ELSE 'no' END, SUM(children) FROM people GROUP BY CASE WHEN married THEN 'yes' ELSE 'no' END;

-- case: group by integer division of public range
-- expect: accepted release=domain:9 rows=9
SELECT age // 10 AS decade, COUNT(*) FROM people GROUP BY decade;

-- case: group by comparison of public range
-- expect: accepted release=domain:2 rows=2
SELECT age >= 65 AS retired, COUNT(*) FROM people GROUP BY retired;

-- case: group by function of declared values
-- expect: accepted release=domain:2 rows=2
SELECT lower(sex) AS s, COUNT(*) FROM people GROUP BY s;

-- case: group by expression and column
-- expect: accepted keys=2 release=domain:4 rows=4
SELECT sex, children > 2 AS large_family, COUNT(*) FROM people GROUP BY sex, large_family;

-- case: select distinct public key
-- expect: accepted columns=1 cells=0 measurements=0 keys=1 release=domain:2 rows=2
SELECT DISTINCT sex FROM people;

-- case: select distinct two public keys
-- expect: accepted cells=0 keys=2 release=domain:12 rows=12
SELECT DISTINCT sex, education FROM people;

-- case: group by without aggregate
-- expect: accepted cells=0 keys=1 release=domain:8 rows=8
SELECT category FROM visits GROUP BY category;

-- case: group by text without domain at delta zero
-- expect: refused KeyReleaseRefused mentions=delta mentions=values
SELECT state, COUNT(*) FROM people GROUP BY state;

-- case: group by email at delta zero
-- expect: refused KeyReleaseRefused mentions=email
SELECT email, COUNT(*) FROM people GROUP BY email;

-- case: group by date part at delta zero
-- expect: refused KeyReleaseRefused mentions=public_range
SELECT MONTH(signup_date) AS m, COUNT(*) FROM people GROUP BY m;

-- case: group by month of a public date range
-- expect: accepted keys=1 release=domain:12 rows=12
SELECT MONTH(day) AS m, COUNT(*) FROM visits GROUP BY m;

-- case: group by date_trunc month of a public date range
-- expect: accepted release=domain:12 rows=12
SELECT DATE_TRUNC('month', day) AS m, COUNT(*) FROM visits GROUP BY m ORDER BY m;

-- case: group by date_trunc week of a public date range
-- expect: accepted release=domain:53 rows=53
SELECT DATE_TRUNC('week', day) AS w, COUNT(*) FROM visits GROUP BY w;

-- case: group by date_trunc quarter of a public date range
-- expect: accepted release=domain:4 rows=4
SELECT DATE_TRUNC('quarter', day) AS q, SUM(amount) FROM visits GROUP BY q;

-- case: group by date_trunc year of a public date range
-- expect: accepted release=domain:1 rows=1
SELECT DATE_TRUNC('year', day) AS y, COUNT(*) FROM visits GROUP BY y;

-- case: group by date_trunc day of a public date range
-- expect: accepted release=domain:365
SELECT DATE_TRUNC('day', day) AS d, COUNT(*) FROM visits GROUP BY d;

-- case: group by a public date range itself
-- expect: accepted release=domain:365
SELECT day, COUNT(*) FROM visits GROUP BY day;

-- case: group by extract of a public date range
-- expect: accepted release=domain:7 rows=7
SELECT EXTRACT(dow FROM day) AS dow, COUNT(*) FROM visits GROUP BY dow;

-- case: group by year of a public date range
-- expect: accepted release=domain:1 rows=1
SELECT YEAR(day) AS y, COUNT(*) FROM visits GROUP BY y;

-- case: group by month and category of a public date range
-- expect: accepted release=domain:96 rows=96
SELECT DATE_TRUNC('month', day) AS m, category, COUNT(*) FROM visits GROUP BY m, category;

-- case: group by year at delta zero
-- expect: refused KeyReleaseRefused
SELECT YEAR(signup_date), COUNT(*) FROM people GROUP BY 1;

-- case: group by unbounded expression at delta zero
-- expect: refused KeyReleaseRefused
SELECT FLOOR(income / 10000) AS bracket, COUNT(*) FROM people GROUP BY bracket;

-- case: group by one public and one private key at delta zero
-- expect: refused KeyReleaseRefused mentions=state
SELECT sex, state, COUNT(*) FROM people GROUP BY sex, state;

-- case: select distinct private key at delta zero
-- expect: refused KeyReleaseRefused
SELECT DISTINCT state FROM people;

-- case: too many public key combinations
-- expect: refused KeyReleaseRefused mentions=combinations
SELECT age, children, education, sex, married, COUNT(*) FROM people GROUP BY age, children, education, sex, married;

-- case: group by state thresholded
-- options: delta=1e-6
-- expect: accepted keys=1 release=threshold measurements=1 l1[0]=1 cost=1,1e-6 rows>=1
SELECT state, COUNT(*) FROM people GROUP BY state;

-- case: group by state thresholded with avg
-- options: delta=1e-6
-- expect: accepted release=threshold cells=2 measurements=3 rows>=1
SELECT state, COUNT(*), AVG(income) FROM people GROUP BY state;

-- case: thresholded avg alone adds a count of units
-- options: delta=1e-6
-- expect: accepted release=threshold cells=1 measurements=3 rows>=1
SELECT state, AVG(age) FROM people GROUP BY state;

-- case: group by email releases nothing or few
-- options: delta=1e-6
-- expect: accepted release=threshold rows<=5
SELECT email, COUNT(*) FROM people GROUP BY email;

-- case: group by email with sum releases nothing or few
-- options: epsilon=0.5 delta=1e-8
-- expect: accepted release=threshold cost=0.5,1e-8 rows<=5
SELECT email, SUM(income) FROM people GROUP BY email;

-- case: thresholded key on visits counts units
-- options: delta=1e-5
-- expect: accepted release=threshold measurements=2 l1[0]=10 l1[1]=3 rows<=12
SELECT visit_id % 12 AS m, COUNT(*) FROM visits GROUP BY m;

-- case: thresholded count of units shares the threshold measurement
-- options: delta=1e-5
-- expect: accepted release=threshold measurements=1 l1[0]=3 rows<=12
SELECT visit_id % 12 AS m, COUNT(DISTINCT person_id) FROM visits GROUP BY m;

-- case: thresholded two keys
-- options: delta=1e-6
-- expect: accepted keys=2 release=threshold rows>=1
SELECT state, sex, COUNT(*) FROM people GROUP BY state, sex;

-- case: thresholded expression key
-- options: delta=1e-6
-- expect: accepted release=threshold rows>=1
SELECT substring(email, 1, 1) AS initial, COUNT(*) FROM people GROUP BY initial;

-- case: thresholded year of signup
-- options: delta=1e-6
-- expect: accepted release=threshold rows<=11
SELECT YEAR(signup_date) AS y, COUNT(*) FROM people GROUP BY y;

-- case: select distinct thresholded
-- options: delta=1e-6
-- expect: accepted cells=0 measurements=1 release=threshold rows>=1
SELECT DISTINCT state FROM people;

-- case: public domain needs no delta even when given
-- options: delta=1e-6
-- expect: accepted release=domain:2 cost=1,0 rows=2
SELECT sex, COUNT(*) FROM people GROUP BY sex;

-- case: group by privacy unit
-- expect: refused KeyReleaseRefused mentions=person_id
SELECT person_id, COUNT(*) FROM visits GROUP BY person_id;

-- case: group by privacy unit with delta
-- options: delta=1e-6
-- expect: refused KeyReleaseRefused mentions="privacy unit"
SELECT person_id, SUM(amount) FROM visits GROUP BY person_id;

-- case: group by privacy unit on one row table
-- expect: refused KeyReleaseRefused
SELECT COUNT(*) FROM people GROUP BY person_id;

-- case: group by expression of privacy unit
-- options: delta=1e-6
-- expect: refused KeyReleaseRefused
SELECT person_id % 10 AS bucket, COUNT(*) FROM visits GROUP BY bucket;

-- case: group by qualified privacy unit
-- expect: refused KeyReleaseRefused
SELECT COUNT(*) FROM visits v GROUP BY v.person_id;

-- case: group by aggregate
-- expect: refused NestedAggregate
SELECT COUNT(*) FROM people GROUP BY COUNT(*);

-- case: group by ordinal of aggregate
-- expect: refused NestedAggregate
SELECT COUNT(*) FROM people GROUP BY 1;

-- case: group by ordinal out of range
-- expect: refused UnsupportedQuery mentions=range
SELECT sex, COUNT(*) FROM people GROUP BY 3;

-- case: group by window
-- expect: refused WindowOverPrivateRows
SELECT COUNT(*) FROM people GROUP BY ROW_NUMBER() OVER ();

-- case: group by undeclared column
-- expect: refused UnknownColumn
SELECT COUNT(*) FROM people GROUP BY region;

-- case: selected column not grouped
-- expect: refused NonAggregatedColumn mentions="GROUP BY"
SELECT sex, education, COUNT(*) FROM people GROUP BY sex;

-- case: grouping sets
-- expect: refused UnsupportedQuery
SELECT sex, education, COUNT(*) FROM people GROUP BY GROUPING SETS ((sex), (education));

-- case: rollup
-- expect: refused UnsupportedQuery
SELECT sex, education, COUNT(*) FROM people GROUP BY ROLLUP (sex, education);

-- case: cube
-- expect: refused UnsupportedQuery
SELECT sex, married, COUNT(*) FROM people GROUP BY CUBE (sex, married);
