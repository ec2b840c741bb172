-- Privacy parameters (epsilon, delta, mechanism) are validated before anything runs; the cost
-- is (epsilon, the delta actually used). Gaussian noise needs delta > 0.

-- case: epsilon zero
-- options: epsilon=0
-- expect: refused InvalidPrivacyParameter mentions=epsilon
SELECT COUNT(*) FROM people;

-- case: epsilon negative
-- options: epsilon=-1
-- expect: refused InvalidPrivacyParameter mentions=epsilon
SELECT COUNT(*) FROM people;

-- case: epsilon nan
-- options: epsilon=nan
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: epsilon infinite
-- options: epsilon=inf
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: epsilon minus infinity
-- options: epsilon=-inf
-- expect: refused InvalidPrivacyParameter
SELECT SUM(age) FROM people;

-- case: epsilon absurdly large
-- options: epsilon=1e6
-- expect: refused InvalidPrivacyParameter mentions=epsilon
SELECT COUNT(*) FROM people;

-- case: epsilon just above the maximum
-- options: epsilon=100.5
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: epsilon tiny negative
-- options: epsilon=-1e-12
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: epsilon at the maximum
-- options: epsilon=100
-- expect: accepted cost=100,0
SELECT COUNT(*) FROM people;

-- case: epsilon small
-- options: epsilon=0.01
-- expect: accepted cost=0.01,0 rows=1
SELECT AVG(age) FROM people;

-- case: epsilon split over measurements
-- options: epsilon=0.3
-- expect: accepted measurements=3 cost=0.3,0 rows=1
SELECT VAR_POP(income) FROM people;

-- case: delta one
-- options: delta=1
-- expect: refused InvalidPrivacyParameter mentions=delta
SELECT COUNT(*) FROM people;

-- case: delta negative
-- options: delta=-1e-6
-- expect: refused InvalidPrivacyParameter mentions=delta
SELECT COUNT(*) FROM people;

-- case: delta nan
-- options: delta=nan
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: delta infinite
-- options: delta=inf
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: delta too large
-- options: delta=0.5
-- expect: refused InvalidPrivacyParameter
SELECT state, COUNT(*) FROM people GROUP BY state;

-- case: delta at the maximum
-- options: delta=0.1
-- expect: accepted release=threshold cost=1,0.1
SELECT state, COUNT(*) FROM people GROUP BY state;

-- case: unused delta is not charged
-- options: delta=1e-6
-- expect: accepted cost=1,0 rows=1
SELECT COUNT(*) FROM people;

-- case: parameters are checked before keys
-- options: epsilon=0
-- expect: refused InvalidPrivacyParameter
SELECT state, COUNT(*) FROM people GROUP BY state;

-- case: gaussian without delta
-- options: mechanism=gaussian
-- expect: refused InvalidPrivacyParameter mentions=delta
SELECT COUNT(*) FROM people;

-- case: gaussian with explicit zero delta
-- options: mechanism=gaussian delta=0
-- expect: refused InvalidPrivacyParameter
SELECT SUM(amount) FROM visits;

-- case: unknown mechanism
-- options: mechanism=exponential
-- expect: refused InvalidPrivacyParameter mentions=laplace
SELECT COUNT(*) FROM people;

-- case: empty mechanism name
-- options: mechanism=
-- expect: refused InvalidPrivacyParameter
SELECT COUNT(*) FROM people;

-- case: gaussian count
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted cells=1 measurements=1 l1[0]=1 cost=1,1e-6 types=BIGINT rows=1
SELECT COUNT(*) FROM people;

-- case: gaussian several aggregates
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted cells=3 measurements=4 cost=1,1e-6 types=BIGINT|BIGINT|DOUBLE rows=1
SELECT COUNT(*), SUM(age), AVG(income) FROM people;

-- case: gaussian on many rows per unit
-- options: mechanism=gaussian delta=1e-5 epsilon=0.5
-- expect: accepted l1[0]=10 l1[1]=50000 cost=0.5,1e-5 rows=1
SELECT COUNT(*), SUM(amount) FROM visits;

-- case: gaussian with public domain keys
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted release=domain:8 cost=1,1e-6 rows=8
SELECT category, COUNT(*), AVG(duration_min) FROM visits GROUP BY category;

-- case: gaussian count of units per group
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted release=domain:8 l1[0]=3 rows=8
SELECT category, COUNT(DISTINCT person_id) FROM visits GROUP BY category;

-- case: gaussian with thresholded keys
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted release=threshold cost=1,1e-6 rows>=1
SELECT state, COUNT(*), AVG(income) FROM people GROUP BY state;

-- case: gaussian with thresholded keys on visits
-- options: mechanism=gaussian delta=1e-6 epsilon=2
-- expect: accepted release=threshold measurements=2 cost=2,1e-6 rows<=12
SELECT visit_id % 12 AS m, SUM(amount) FROM visits GROUP BY m;

-- case: gaussian median uses the exponential mechanism
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted measurements=1 cost=1,0 rows=1
SELECT MEDIAN(age) FROM people;

-- case: gaussian median beside a count
-- options: mechanism=gaussian delta=1e-6
-- expect: accepted measurements=2 cost=1,1e-6 rows=1
SELECT MEDIAN(age), COUNT(*) FROM people;

-- case: gaussian with outer query
-- options: mechanism=gaussian delta=1e-7
-- expect: accepted rows=1
SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC LIMIT 1;

-- case: laplace named explicitly
-- options: mechanism=laplace
-- expect: accepted cost=1,0 rows=1
SELECT SUM(income) FROM people;
