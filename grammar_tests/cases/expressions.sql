-- Aggregated expressions: bounded by interval arithmetic over the declared column bounds and
-- clamped in SQL (bounds.py). l1[0] is k * max |value| for a SUM. Unbounded ones are refused.

-- case: sum of product with constant
-- expect: accepted cells=1 l1[0]=190 types=BIGINT rows=1
SELECT SUM(age * 2) FROM people;

-- case: sum of difference
-- expect: accepted l1[0]=77 types=BIGINT rows=1
SELECT SUM(age - 18) FROM people;

-- case: sum of negation
-- expect: accepted l1[0]=95 types=BIGINT
SELECT SUM(-age) FROM people;

-- case: sum of two columns
-- expect: accepted l1[0]=103 types=BIGINT rows=1
SELECT SUM(age + children) FROM people;

-- case: sum of division by constant
-- expect: accepted l1[0]=20833.333333333332 types=DOUBLE rows=1
SELECT SUM(income / 12) FROM people;

-- case: avg of division by constant
-- expect: accepted measurements=2 l1[0]=1 l1[1]=10416.666666666666 rows=1
SELECT AVG(income / 12) FROM people;

-- case: sum of product of two columns
-- expect: accepted l1[0]=12000000 types=DOUBLE rows=1
SELECT SUM(amount * duration_min) FROM visits;

-- case: sum of scaled float
-- expect: accepted l1[0]=2500 types=DOUBLE
SELECT SUM(income * 0.01) FROM people;

-- case: sum of division by bounded positive column
-- expect: accepted l1[0]=10000 types=DOUBLE rows=1
SELECT SUM(amount / duration_min) FROM visits;

-- case: sum of integer division
-- expect: accepted l1[0]=10 types=BIGINT rows=1
SELECT SUM(age // 10) FROM people;

-- case: sum of modulo
-- expect: accepted l1[0]=10 rows=1
SELECT SUM(age % 10) FROM people;

-- case: sum of power
-- expect: accepted l1[0]=9025 types=DOUBLE rows=1
SELECT SUM(POWER(age, 2)) FROM people;

-- case: sum of square root
-- expect: accepted l1[0]=500 types=DOUBLE rows=1
SELECT SUM(SQRT(income)) FROM people;

-- case: sum of log of shifted column
-- expect: accepted cells=1 types=DOUBLE rows=1
SELECT SUM(LN(amount + 1)) FROM visits;

-- case: sum of sign
-- expect: accepted l1[0]=1 types=BIGINT rows=1
SELECT SUM(SIGN(age - 50)) FROM people;

-- case: sum of floor
-- expect: accepted l1[0]=50000 types=DOUBLE rows=1
SELECT SUM(FLOOR(amount)) FROM visits;

-- case: sum of ceil of division
-- expect: accepted l1[0]=250 rows=1
SELECT SUM(CEIL(income / 1000)) FROM people;

-- case: sum of case with constant results
-- expect: accepted cells=1 l1[0]=1 types=BIGINT rows=1
SELECT SUM(CASE WHEN age > 60 THEN 1 ELSE 0 END) FROM people;

-- case: sum of case without else
-- expect: accepted l1[0]=1 types=BIGINT rows=1
SELECT SUM(CASE WHEN age > 60 THEN 1 END) FROM people;

-- case: sum of case with column result
-- expect: accepted l1[0]=250000 types=DOUBLE rows=1
SELECT SUM(CASE WHEN sex = 'F' THEN income ELSE 0 END) FROM people;

-- case: sum of case with several branches
-- expect: accepted l1[0]=3 types=BIGINT rows=1
SELECT SUM(CASE WHEN age < 30 THEN 1 WHEN age < 60 THEN 2 ELSE 3 END) FROM people;

-- case: sum of simple case
-- expect: accepted l1[0]=10 rows=1
SELECT SUM(CASE category WHEN 'dental' THEN 1 ELSE 0 END) FROM visits;

-- case: sum of case scaling a column
-- expect: accepted l1[0]=55000 types=DOUBLE rows=1
SELECT SUM(CASE WHEN duration_min > 60 THEN amount * 1.1 ELSE amount END) FROM visits;

-- case: avg of case proportion
-- expect: accepted measurements=2 l1[0]=1 l1[1]=0.5 types=DOUBLE rows=1
SELECT AVG(CASE WHEN sex = 'F' THEN 1.0 ELSE 0.0 END) FROM people;

-- case: count of case
-- expect: accepted l1[0]=1 types=BIGINT rows=1
SELECT COUNT(CASE WHEN age > 60 THEN 1 END) FROM people;

-- case: sum of if function
-- expect: accepted l1[0]=1 rows=1
SELECT SUM(IF(age > 60, 1, 0)) FROM people;

-- case: sum of case on boolean column
-- expect: accepted l1[0]=8 rows=1
SELECT SUM(CASE WHEN married THEN children ELSE 0 END) FROM people;

-- case: sum of coalesce
-- expect: accepted l1[0]=250000 types=DOUBLE rows=1
SELECT SUM(COALESCE(income, 0)) FROM people;

-- case: sum of coalesce with negative default
-- expect: accepted l1[0]=250000 rows=1
SELECT SUM(COALESCE(income, -1000)) FROM people;

-- case: avg of coalesce
-- expect: accepted measurements=2 l1[1]=125000 rows=1
SELECT AVG(COALESCE(income, 0)) FROM people;

-- case: sum of nullif
-- expect: accepted l1[0]=8 rows=1
SELECT SUM(NULLIF(children, 0)) FROM people;

-- case: avg of cast to double
-- expect: accepted measurements=2 l1[0]=1 l1[1]=38.5 types=DOUBLE rows=1
SELECT AVG(CAST(age AS DOUBLE)) FROM people;

-- case: sum of cast to integer
-- expect: accepted l1[0]=250000 types=BIGINT rows=1
SELECT SUM(CAST(income AS INTEGER)) FROM people;

-- case: sum of cast of boolean
-- expect: accepted l1[0]=1 rows=1
SELECT SUM(CAST(age > 60 AS INTEGER)) FROM people;

-- case: sum of double colon cast
-- expect: accepted l1[0]=95 types=DOUBLE rows=1
SELECT SUM(age::DOUBLE) FROM people;

-- case: sum of try cast
-- expect: accepted l1[0]=8 rows=1
SELECT SUM(TRY_CAST(children AS BIGINT)) FROM people;

-- case: sum of comparison
-- expect: accepted l1[0]=1 rows=1
SELECT SUM(age > 30) FROM people;

-- case: sum of between
-- expect: accepted l1[0]=1 rows=1
SELECT SUM(CAST(age BETWEEN 30 AND 40 AS INTEGER)) FROM people;

-- case: count if with is null
-- expect: accepted l1[0]=1 rows=1
SELECT COUNT_IF(income IS NULL) FROM people;

-- case: avg of comparison is a proportion
-- expect: accepted measurements=2 rows=1
SELECT AVG(CAST(amount > 100 AS DOUBLE)) FROM visits;

-- case: sum of least
-- expect: accepted l1[0]=100000 types=DOUBLE rows=1
SELECT SUM(LEAST(income, 100000)) FROM people;

-- case: sum of greatest
-- expect: accepted l1[0]=30 types=BIGINT rows=1
SELECT SUM(GREATEST(age - 65, 0)) FROM people;

-- case: sum of least and greatest
-- expect: accepted l1[0]=50 types=DOUBLE rows=1
SELECT SUM(LEAST(GREATEST(income - 20000, 0), 50000) / 1000) FROM people;

-- case: least of text length makes it bounded
-- expect: accepted l1[0]=50 types=BIGINT rows=1
SELECT SUM(LEAST(LENGTH(email), 50)) FROM people;

-- case: clamping a division makes it bounded
-- expect: accepted l1[0]=1000 types=DOUBLE rows=1
SELECT SUM(LEAST(GREATEST(income / (age - 50), -1000), 1000)) FROM people;

-- case: sum of abs
-- expect: accepted l1[0]=45 types=BIGINT rows=1
SELECT SUM(ABS(age - 50)) FROM people;

-- case: sum of round
-- expect: accepted l1[0]=250 types=DOUBLE rows=1
SELECT SUM(ROUND(income / 1000)) FROM people;

-- case: sum of round with digits
-- expect: accepted l1[0]=50000 types=DOUBLE rows=1
SELECT SUM(ROUND(amount, 1)) FROM visits;

-- case: round with column digits
-- expect: refused UnboundedExpression mentions=ROUND
SELECT SUM(ROUND(amount, duration_min)) FROM visits;

-- case: avg of nested abs coalesce division
-- expect: accepted measurements=2 l1[0]=1 l1[1]=100 types=DOUBLE rows=1
SELECT AVG(ABS(COALESCE(income, 0) - 50000) / 1000) FROM people;

-- case: nested case inside coalesce inside round
-- expect: accepted cells=1 rows=1
SELECT SUM(ROUND(COALESCE(CASE WHEN age > 65 THEN income * 0.5 END, 0) / 100, 2)) FROM people;

-- case: sum of year of date
-- expect: accepted l1[0]=2025 types=BIGINT rows=1
SELECT SUM(YEAR(signup_date)) FROM people;

-- case: sum of month of date
-- expect: accepted l1[0]=120 rows=1
SELECT SUM(MONTH(day)) FROM visits;

-- case: avg of extract
-- expect: accepted measurements=2 l1[0]=10 rows=1
SELECT AVG(EXTRACT(dow FROM day)) FROM visits;

-- case: variance of expression
-- expect: accepted measurements=3 l1[0]=10 l1[1]=500 rows=1
SELECT VARIANCE(amount / 50) FROM visits;

-- case: median of expression
-- expect: accepted measurements=1 rows=1
SELECT MEDIAN(income / 1000) FROM people;

-- case: max of expression
-- expect: accepted measurements=1 rows=1
SELECT MAX(age - children) FROM people;

-- case: count distinct of expression
-- expect: accepted l1[0]=1 rows=1
SELECT COUNT(DISTINCT age // 10) FROM people;

-- case: sum of unbounded id column
-- expect: refused UnboundedExpression mentions=visit_id
SELECT SUM(visit_id) FROM visits;

-- case: avg of unbounded id column
-- expect: refused UnboundedExpression mentions=bounds
SELECT AVG(visit_id) FROM visits;

-- case: sum of privacy unit
-- expect: refused UnboundedExpression
SELECT SUM(person_id) FROM people;

-- case: median of unbounded column
-- expect: refused UnboundedExpression
SELECT MEDIAN(visit_id) FROM visits;

-- case: product with unbounded column
-- expect: refused UnboundedExpression
SELECT SUM(age * person_id) FROM people;

-- case: division by range containing zero
-- expect: refused UnboundedExpression mentions=zero
SELECT SUM(income / (age - 50)) FROM people;

-- case: division by column that can be zero
-- expect: refused UnboundedExpression
SELECT SUM(100 / children) FROM people;

-- case: avg of division by zero range
-- expect: refused UnboundedExpression
SELECT AVG(amount / (duration_min - 60)) FROM visits;

-- case: log of zero
-- expect: refused UnboundedExpression
SELECT SUM(LN(income)) FROM people;

-- case: length of text unbounded
-- expect: refused UnboundedExpression
SELECT SUM(LENGTH(email)) FROM people;

-- case: sum of text column
-- expect: refused UnboundedExpression mentions=text
SELECT SUM(sex) FROM people;

-- case: avg of date column
-- expect: refused UnboundedExpression
SELECT AVG(signup_date) FROM people;

-- case: sum of text cast to integer
-- expect: refused UnboundedExpression
SELECT SUM(CAST(email AS INTEGER)) FROM people;

-- case: case mixing text and number
-- expect: refused UnboundedExpression mentions=CAST
SELECT SUM(CASE WHEN age > 60 THEN 'old' ELSE 0 END) FROM people;

-- case: coalesce mixing types
-- expect: refused UnboundedExpression
SELECT COUNT(COALESCE(income, email)) FROM people;

-- case: arithmetic on text
-- expect: refused UnboundedExpression
SELECT SUM(email + 1) FROM people;

-- case: power with column exponent
-- expect: refused UnboundedExpression
SELECT SUM(POWER(2, age)) FROM people;

-- case: random in aggregate
-- expect: refused ForbiddenFunction
SELECT SUM(random()) FROM people;

-- case: hash in aggregate
-- expect: refused ForbiddenFunction mentions=HASH
SELECT SUM(hash(email) % 2) FROM people;

-- case: regexp in filter
-- expect: refused ForbiddenFunction
SELECT COUNT(*) FILTER (WHERE regexp_matches(email, '^a')) FROM people;

-- case: getenv in aggregate
-- expect: refused ForbiddenFunction
SELECT COUNT(getenv('HOME')) FROM people;

-- case: read text in aggregate
-- expect: refused ForbiddenFunction
SELECT SUM(LENGTH(read_text('/etc/passwd'))) FROM people;

-- case: scalar subquery in aggregate
-- expect: refused UnsupportedQuery mentions=subquer
SELECT SUM((SELECT MAX(age) FROM people)) FROM people;

-- case: aggregate over list literal
-- expect: refused ForbiddenFunction
SELECT SUM(len([age, children])) FROM people;

-- case: date_part year of a date column
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE DATE_PART('year', day) = 2025;

-- case: to_date of a text column is read with try_strptime
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE TO_DATE(category, 'YYYY-MM-DD') IS NULL;

-- case: to_date with a format from a column is refused
-- expect: refused InvalidConstant mentions=format
SELECT COUNT(*) FROM visits WHERE TO_DATE(category, category) IS NULL;

-- case: cast of a date column to timestamptz is refused
-- expect: refused UnboundedExpression mentions=TIMESTAMPTZ
SELECT COUNT(*) FROM visits WHERE CAST(day AS TIMESTAMPTZ) >= '2025-06-01';

-- case: cast of a date column to timestamp
-- expect: accepted rows=1
SELECT COUNT(*) FROM visits WHERE CAST(day AS TIMESTAMP) >= TIMESTAMP '2025-06-01 00:00:00';
