-- WHERE: row-level predicates on declared columns, made total in SQL. A filter never changes
-- the sensitivity. Comparisons the engine could not evaluate are refused before anything runs.

-- case: where greater than
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT COUNT(*) FROM people WHERE age > 30;

-- case: where and
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age > 30 AND sex = 'F';

-- case: where or
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE education = 'master' OR education = 'doctorate';

-- case: where not
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE NOT married;

-- case: where and or not with parentheses
-- expect: accepted rows=1
SELECT SUM(income) FROM people WHERE (age > 30 AND sex = 'F') OR NOT (married OR children > 2);

-- case: where in list
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE age IN (20, 30, 40);

-- case: where not in list
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE education NOT IN ('none', 'primary');

-- case: where in text list on visits
-- expect: accepted l1[0]=10 rows=1
SELECT COUNT(*) FROM visits WHERE category IN ('lab', 'pharmacy');

-- case: where between
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 30;

-- case: where not between
-- expect: accepted rows=1
SELECT AVG(amount) FROM visits WHERE amount NOT BETWEEN 100 AND 200;

-- case: where like
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE email LIKE '%@example.com';

-- case: where not like
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE email NOT LIKE 'a%';

-- case: where ilike
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE state ILIKE 'n%';

-- case: where starts with
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE starts_with(email, 'b');

-- case: where is null
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE income IS NULL;

-- case: where is not null
-- expect: accepted rows=1
SELECT AVG(income) FROM people WHERE income IS NOT NULL;

-- case: where is distinct from
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE sex IS DISTINCT FROM 'F';

-- case: where equals null
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE income = NULL;

-- case: where boolean column equals true
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE married = TRUE;

-- case: where boolean column is false
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE married IS FALSE;

-- case: where date literal comparison
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE signup_date >= DATE '2020-01-01';

-- case: where date string comparison
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE signup_date < '2018-06-30';

-- case: where date between
-- expect: accepted l1[0]=10 rows=1
SELECT COUNT(*) FROM visits WHERE day BETWEEN DATE '2025-03-01' AND DATE '2025-03-31';

-- case: where date cast
-- expect: accepted rows=1
SELECT SUM(amount) FROM visits WHERE day < CAST('2025-06-01' AS DATE);

-- case: where date in list
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE day IN ('2025-01-05', '2025-01-06');

-- case: where extract month
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE EXTRACT(month FROM day) = 1;

-- case: where year function
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE YEAR(signup_date) = 2020;

-- case: where date trunc
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE date_trunc('month', day) = DATE '2025-02-01';

-- case: where arithmetic
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE amount / duration_min > 10;

-- case: where division by zero is total
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE income / children > 10000;

-- case: where case expression
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE CASE WHEN sex = 'F' THEN age > 40 ELSE age > 50 END;

-- case: where coalesce
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE COALESCE(income, 0) < 10000;

-- case: where lower
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE lower(state) = 'ca';

-- case: where upper and trim
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE upper(trim(sex)) = 'F';

-- case: where substring
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE substring(email, 1, 1) = 'a';

-- case: where length
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE length(email) > 20;

-- case: where concat
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE sex || education = 'Fmaster';

-- case: where cast to varchar like
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE CAST(age AS VARCHAR) LIKE '3%';

-- case: where number in quotes
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE age = '30';

-- case: where constant true
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE TRUE;

-- case: where constant false
-- expect: accepted rows=1
SELECT COUNT(*) FROM people WHERE 1 = 0;

-- case: where on column not selected
-- expect: accepted rows=1
SELECT AVG(income) FROM people WHERE state = 'CA';

-- case: where text column compared with number
-- expect: refused UnboundedExpression mentions=text
SELECT COUNT(*) FROM people WHERE state = 1;

-- case: where number compared with text column
-- expect: refused UnboundedExpression
SELECT COUNT(*) FROM people WHERE 1 = sex;

-- case: where text column compared with number column
-- expect: refused UnboundedExpression
SELECT COUNT(*) FROM people WHERE email > age;

-- case: where text in number list
-- expect: refused UnboundedExpression
SELECT COUNT(*) FROM people WHERE sex IN (1, 2);

-- case: where text between numbers
-- expect: refused UnboundedExpression
SELECT COUNT(*) FROM people WHERE state BETWEEN 1 AND 5;

-- case: where number compared with non numeric text
-- expect: refused InvalidConstant mentions="not a number"
SELECT COUNT(*) FROM people WHERE age = 'thirty';

-- case: where number in list with non numeric text
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM people WHERE age IN ('30', 'x');

-- case: where between non numeric text
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM visits WHERE amount BETWEEN '10' AND 'lots';

-- case: where date compared with non date text
-- expect: refused InvalidConstant mentions=DATE
SELECT COUNT(*) FROM people WHERE signup_date > 'last year';

-- case: where date compared with impossible date
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM visits WHERE day = '2025-02-30';

-- case: where date compared with number
-- expect: refused UnboundedExpression mentions=date
SELECT COUNT(*) FROM visits WHERE day > 5;

-- case: where boolean compared with non boolean text
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM people WHERE married = 'maybe';

-- case: where like on number
-- expect: refused UnboundedExpression mentions=LIKE
SELECT COUNT(*) FROM people WHERE age LIKE '3%';

-- case: where comparison in aggregate with non numeric text
-- expect: refused InvalidConstant
SELECT SUM(CASE WHEN age = 'x' THEN 1 ELSE 0 END) FROM people;

-- case: where undeclared column
-- expect: refused UnknownColumn mentions=salary
SELECT COUNT(*) FROM people WHERE salary > 100;

-- case: where column of other table
-- expect: refused UnknownColumn
SELECT COUNT(*) FROM people WHERE amount > 100;

-- case: where aggregate
-- expect: refused UnsupportedQuery mentions=HAVING
SELECT COUNT(*) FROM people WHERE COUNT(*) > 1;

-- case: where window function
-- expect: refused WindowOverPrivateRows
SELECT COUNT(*) FROM people WHERE ROW_NUMBER() OVER () < 10;

-- case: where scalar subquery
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FROM people WHERE income > (SELECT AVG(income) FROM people);

-- case: where random sample
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM people WHERE random() < 0.5;

-- case: where regexp
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM people WHERE regexp_matches(email, 'x');

-- case: where current setting
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM people WHERE current_setting('threads') = '1';

-- case: where variable
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM people WHERE age = getvariable('x');

-- case: where current date
-- expect: accepted cells=1 rows=1
-- the clock is public: read once when the query is planned (dates.fold_clock)
SELECT COUNT(*) FROM people WHERE signup_date < current_date;

-- case: where equals any of an array literal
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE education = ANY('{master,"doctorate"}');

-- case: where equals any of an array constructor
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age = ANY(ARRAY[20, 30, 40]);

-- case: where differs from all of a typed array literal
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE age <> ALL('{20,30}'::int[]);

-- case: where equals any of an empty array
-- expect: accepted cells=1 rows=1
SELECT COUNT(*) FROM people WHERE sex = ANY('{}');

-- case: where any of a malformed array literal
-- expect: refused UnsupportedQuery mentions="unterminated array literal"
SELECT COUNT(*) FROM people WHERE sex = ANY('{F,M');

-- case: where any of a number array with non numeric text
-- expect: refused InvalidConstant
SELECT COUNT(*) FROM people WHERE age = ANY('{30,x}');

-- case: where greater than any stays refused
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FROM people WHERE age > ANY(ARRAY[30]);
