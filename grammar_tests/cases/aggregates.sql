-- Every supported aggregate, with its measurements and L1 sensitivities (aggregates.py has the
-- table). people: one row per person (k = 1); visits: k = 10 rows, g = 3 groups per person.

-- case: count star
-- expect: accepted columns=1 cells=1 measurements=1 keys=0 release=none l1[0]=1 types=BIGINT
-- expect: cost=1,0 names=count rows=1
SELECT COUNT(*) FROM people;

-- case: count star on visits
-- expect: accepted cells=1 measurements=1 l1[0]=10 types=BIGINT rows=1
SELECT COUNT(*) FROM visits;

-- case: count star lower case
-- expect: accepted cells=1 l1[0]=1 rows=1
select count(*) from people;

-- case: count one
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=BIGINT rows=1
SELECT COUNT(1) FROM people;

-- case: count nullable column
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=BIGINT rows=1
SELECT COUNT(income) FROM people;

-- case: count text column
-- expect: accepted cells=1 l1[0]=1
SELECT COUNT(email) FROM people;

-- case: count column on visits
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(amount) FROM visits;

-- case: count unbounded id column
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(visit_id) FROM visits;

-- case: count distinct privacy unit
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=BIGINT rows=1
SELECT COUNT(DISTINCT person_id) FROM visits;

-- case: count distinct privacy unit one row per unit
-- expect: accepted cells=1 measurements=1 l1[0]=1 rows=1
SELECT COUNT(DISTINCT person_id) FROM people;

-- case: count distinct privacy unit grouped
-- expect: accepted cells=1 measurements=1 keys=1 release=domain:8 l1[0]=3 rows=8
SELECT category, COUNT(DISTINCT person_id) FROM visits GROUP BY category;

-- case: count distinct category
-- expect: accepted cells=1 measurements=1 l1[0]=10 types=BIGINT rows=1
SELECT COUNT(DISTINCT category) FROM visits;

-- case: count distinct text on people
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT COUNT(DISTINCT education) FROM people;

-- case: count distinct expression
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT(DISTINCT MONTH(day)) FROM visits;

-- case: count if
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=BIGINT rows=1
SELECT COUNT_IF(age > 30) FROM people;

-- case: count if on visits
-- expect: accepted cells=1 l1[0]=10 rows=1
SELECT COUNT_IF(amount > 1000) FROM visits;

-- case: count if compound condition
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT COUNT_IF(sex = 'F' AND income IS NOT NULL) FROM people;

-- case: sum int column
-- expect: accepted cells=1 measurements=1 l1[0]=95 types=BIGINT rows=1
SELECT SUM(age) FROM people;

-- case: sum float column
-- expect: accepted cells=1 measurements=1 l1[0]=250000 types=DOUBLE rows=1
SELECT SUM(income) FROM people;

-- case: sum small int column
-- expect: accepted cells=1 l1[0]=8 types=BIGINT
SELECT SUM(children) FROM people;

-- case: sum amount many rows per unit
-- expect: accepted cells=1 l1[0]=50000 types=DOUBLE rows=1
SELECT SUM(amount) FROM visits;

-- case: sum duration many rows per unit
-- expect: accepted cells=1 l1[0]=2400 types=BIGINT rows=1
SELECT SUM(duration_min) FROM visits;

-- case: sum boolean column
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT SUM(CAST(married AS INTEGER)) FROM people;

-- case: avg int column
-- expect: accepted cells=1 measurements=2 l1[0]=1 l1[1]=38.5 types=DOUBLE rows=1
SELECT AVG(age) FROM people;

-- case: avg float column
-- expect: accepted cells=1 measurements=2 l1[0]=1 l1[1]=125000 types=DOUBLE rows=1
SELECT AVG(income) FROM people;

-- case: avg on visits
-- expect: accepted cells=1 measurements=2 l1[0]=10 l1[1]=1175 rows=1
SELECT AVG(duration_min) FROM visits;

-- case: mean is not avg
-- expect: refused UnsupportedAggregate mentions=AVG
SELECT MEAN(amount) FROM visits;

-- case: var
-- expect: accepted cells=1 measurements=3 l1[0]=1 l1[1]=38.5 l1[2]=1482.25 types=DOUBLE rows=1
SELECT VAR(age) FROM people;

-- case: variance
-- expect: accepted cells=1 measurements=3 l1[2]=1482.25 types=DOUBLE rows=1
SELECT VARIANCE(age) FROM people;

-- case: var samp
-- expect: accepted cells=1 measurements=3 rows=1
SELECT VAR_SAMP(children) FROM people;

-- case: var pop
-- expect: accepted cells=1 measurements=3 l1[0]=1 l1[1]=4 l1[2]=16 rows=1
SELECT VAR_POP(children) FROM people;

-- case: var on visits
-- expect: accepted cells=1 measurements=3 l1[0]=10 l1[1]=25000 l1[2]=62500000 rows=1
SELECT VAR_POP(amount) FROM visits;

-- case: stddev
-- expect: accepted cells=1 measurements=3 l1[1]=38.5 types=DOUBLE rows=1
SELECT STDDEV(age) FROM people;

-- case: stddev samp
-- expect: accepted cells=1 measurements=3 rows=1
SELECT STDDEV_SAMP(income) FROM people;

-- case: stddev pop
-- expect: accepted cells=1 measurements=3 l1[2]=15625000000 rows=1
SELECT STDDEV_POP(income) FROM people;

-- case: all variance forms share three measurements
-- expect: accepted columns=5 cells=4 measurements=3 types=DOUBLE|DOUBLE|DOUBLE|DOUBLE rows=1
SELECT VAR_SAMP(age), VAR_POP(age), STDDEV(age), STDDEV_SAMP(age), STDDEV_POP(age) FROM people;

-- case: median
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=DOUBLE rows=1
SELECT MEDIAN(age) FROM people;

-- case: median float
-- expect: accepted cells=1 measurements=1 l1[0]=10 types=DOUBLE rows=1
SELECT MEDIAN(amount) FROM visits;

-- case: quantile cont
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=DOUBLE rows=1
SELECT QUANTILE_CONT(age, 0.9) FROM people;

-- case: quantile cont on visits
-- expect: accepted cells=1 measurements=1 l1[0]=10 rows=1
SELECT QUANTILE_CONT(duration_min, 0.25) FROM visits;

-- case: quantile cont zero
-- expect: accepted cells=1 rows=1
SELECT QUANTILE_CONT(income, 0) FROM people;

-- case: percentile cont within group
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=DOUBLE rows=1
SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) FROM people;

-- case: percentile cont within group on visits
-- expect: accepted cells=1 measurements=1 l1[0]=10 rows=1
SELECT PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY amount) FROM visits;

-- case: percentile cont with alias
-- expect: accepted names=p90 rows=1
SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY income) AS p90 FROM people;

-- case: quantile above one
-- expect: refused UnsupportedAggregate mentions=0
SELECT QUANTILE_CONT(age, 1.5) FROM people;

-- case: quantile not a literal
-- expect: refused UnsupportedAggregate
SELECT QUANTILE_CONT(age, age / 100) FROM people;

-- case: quantile cont without fraction
-- expect: refused UnsupportedAggregate
SELECT QUANTILE_CONT(age) FROM people;

-- case: quantile cont with order by inside
-- expect: accepted cells=1 measurements=1 l1[0]=1 rows=1
SELECT QUANTILE_CONT(age, 0.5 ORDER BY age) FROM people;

-- case: quantile synonym
-- expect: accepted cells=1 measurements=1 rows=1
SELECT QUANTILE(children, 0.75) FROM people;

-- case: quantile disc
-- expect: refused UnsupportedAggregate
SELECT QUANTILE_DISC(age, 0.5) FROM people;

-- case: percentile disc within group
-- expect: refused UnsupportedAggregate
SELECT PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY age) FROM people;

-- case: min
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=DOUBLE rows=1
SELECT MIN(age) FROM people;

-- case: max
-- expect: accepted cells=1 measurements=1 l1[0]=10 types=DOUBLE rows=1
SELECT MAX(amount) FROM visits;

-- case: min and max are two draws
-- expect: accepted cells=2 measurements=2 rows=1
SELECT MIN(age), MAX(age) FROM people;

-- case: median and quantile are two draws
-- expect: accepted cells=2 measurements=2 rows=1
SELECT MEDIAN(income), QUANTILE_CONT(income, 0.9) FROM people;

-- case: median written twice is one cell
-- expect: accepted columns=2 cells=1 measurements=1 rows=1
SELECT MEDIAN(age), MEDIAN(age) AS again FROM people;

-- case: same count twice shares one measurement
-- expect: accepted columns=2 cells=1 measurements=1 rows=1
SELECT COUNT(*), COUNT(*) AS n FROM people;

-- case: avg and count share the count
-- expect: accepted cells=2 measurements=2 l1[0]=1 l1[1]=38.5 rows=1
SELECT COUNT(age), AVG(age) FROM people;

-- case: several aggregates split epsilon
-- expect: accepted columns=4 cells=4 measurements=4 cost=1,0 types=BIGINT|BIGINT|DOUBLE|DOUBLE rows=1
SELECT COUNT(*), SUM(age), SUM(income), MEDIAN(age) FROM people;

-- case: count filter where
-- expect: accepted cells=1 measurements=1 l1[0]=1 types=BIGINT rows=1
SELECT COUNT(*) FILTER (WHERE age > 30) FROM people;

-- case: sum filter where
-- expect: accepted cells=1 l1[0]=250000 types=DOUBLE rows=1
SELECT SUM(income) FILTER (WHERE sex = 'F') FROM people;

-- case: avg filter where on visits
-- expect: accepted cells=1 measurements=2 l1[0]=10 l1[1]=25000 rows=1
SELECT AVG(amount) FILTER (WHERE category = 'dental') FROM visits;

-- case: two filters two cells
-- expect: accepted cells=2 measurements=2 names=women|men rows=1
SELECT COUNT(*) FILTER (WHERE sex = 'F') AS women, COUNT(*) FILTER (WHERE sex = 'M') AS men FROM people;

-- case: median filter where
-- expect: accepted cells=1 measurements=1 rows=1
SELECT MEDIAN(age) FILTER (WHERE married) FROM people;

-- case: filter with aggregate inside
-- expect: refused UnsupportedQuery
SELECT COUNT(*) FILTER (WHERE COUNT(*) > 1) FROM people;

-- case: string agg
-- expect: refused UnsupportedAggregate mentions=supported
SELECT STRING_AGG(email, ',') FROM people;

-- case: group concat
-- expect: refused UnsupportedAggregate
SELECT GROUP_CONCAT(state) FROM people;

-- case: list aggregate
-- expect: refused UnsupportedAggregate
SELECT LIST(age) FROM people;

-- case: array agg
-- expect: refused UnsupportedAggregate
SELECT ARRAY_AGG(email) FROM people;

-- case: first
-- expect: refused UnsupportedAggregate
SELECT FIRST(email) FROM people;

-- case: last
-- expect: refused UnsupportedAggregate
SELECT LAST(age) FROM people;

-- case: any value
-- expect: refused UnsupportedAggregate
SELECT ANY_VALUE(email) FROM people;

-- case: mode
-- expect: refused UnsupportedAggregate
SELECT MODE(age) FROM people;

-- case: arg max
-- expect: refused UnsupportedAggregate
SELECT ARG_MAX(email, income) FROM people;

-- case: arg min
-- expect: refused UnsupportedAggregate
SELECT ARG_MIN(age, income) FROM people;

-- case: max by
-- expect: refused UnsupportedAggregate
SELECT MAX_BY(email, income) FROM people;

-- case: bit and
-- expect: refused UnsupportedAggregate
SELECT BIT_AND(age) FROM people;

-- case: bool and
-- expect: refused UnsupportedAggregate
SELECT BOOL_AND(married) FROM people;

-- case: product
-- expect: refused UnsupportedAggregate
SELECT PRODUCT(children) FROM people;

-- case: approx count distinct
-- expect: refused UnsupportedAggregate
SELECT APPROX_COUNT_DISTINCT(email) FROM people;

-- case: histogram aggregate
-- expect: refused UnsupportedAggregate
SELECT HISTOGRAM(age) FROM people;

-- case: corr
-- expect: refused UnsupportedAggregate
SELECT CORR(age, income) FROM people;

-- case: sum distinct
-- expect: refused UnsupportedAggregate mentions=DISTINCT
SELECT SUM(DISTINCT age) FROM people;

-- case: avg distinct
-- expect: refused UnsupportedAggregate
SELECT AVG(DISTINCT income) FROM people;

-- case: sum of star refused
-- expect: refused UnsupportedAggregate
SELECT SUM(*) FROM people;

-- case: avg of star refused
-- expect: refused UnsupportedAggregate
SELECT AVG(*) FROM people;

-- case: median of star refused
-- expect: refused UnsupportedAggregate
SELECT MEDIAN(*) FROM people;

-- case: min max median of a bounded date column are dates
-- expect: accepted cells=3 measurements=3 types=DATE|DATE|DATE rows=1
SELECT MIN(day), MAX(day), MEDIAN(day) FROM visits;

-- case: median of a long date range is a date
-- expect: accepted types=DATE rows=1
SELECT MEDIAN(signup_date) FROM people;

-- case: latest visit per category
-- expect: accepted release=domain:8 types=DATE rows=8
SELECT category, MAX(day) FROM visits GROUP BY category;

-- case: quantile of a date expression is refused
-- expect: refused UnboundedExpression mentions=bounds
SELECT MEDIAN(DATE_TRUNC('month', day)) FROM visits;
