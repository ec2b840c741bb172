-- BigQuery's differential privacy syntax, run unchanged (dpsql/query/dp_clause.py): the
-- OPTIONS set the query's epsilon, delta and contribution bounds (within the owner's caps:
-- visits k = 10, g = 3 here, caps 1000 rows and 12 groups), contribution_bounds_per_row
-- clamps each row (NULL kept); contribution_bounds_per_group (a unit's own aggregate in a
-- group) is computed as ZetaSQL does on SUM and AVG (each unit's total or average per group
-- clamped, at most g groups: L1 = g * bound; AVG in the clause is always each person's
-- average; COUNT each person's count in the group, clamped), and accepted where it is
-- ZetaSQL's answer on the others: on VAR and the rest when k = 1. report_format => 'JSON'
-- makes an aggregate ZetaSQL's JSON report, a value the rest of the query may read
-- (dpsql/execution/reports.py). The corpus pins visits' k and g (grammar_tests/databases.py).

-- case: bigquery options set epsilon and groups
-- expect: accepted cells=1 keys=1 release=domain:8 l1[0]=10 cost=0.5,0 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS(epsilon = 0.5, delta = 1e-6, max_groups_contributed = 12,
          privacy_unit_column = person_id)
  category, COUNT(*) AS n
FROM visits GROUP BY category;

-- case: bigquery max rows raised within the cap
-- expect: accepted cells=1 l1[0]=50 cost=1,0 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 1, max_rows_contributed = 50) COUNT(*)
FROM visits;

-- case: bigquery max rows lowered
-- expect: accepted cells=1 l1[0]=2 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 2) COUNT(*) FROM visits;

-- case: bigquery max rows above the cap
-- expect: refused BoundsAboveCap mentions="cap of 1000"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 5000) COUNT(*) FROM visits;

-- case: bigquery privacy unit column not the unit
-- expect: refused BoundsAboveCap mentions=person_id
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, privacy_unit_column = visit_id) COUNT(*) FROM visits;

-- case: bigquery avg with contribution bounds per group
-- expect: accepted cells=1 measurements=2 keys=1 l1[0]=3 l1[1]=150 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
  category, AVG(amount, contribution_bounds_per_group => (0, 100)) AS a
FROM visits GROUP BY category;

-- case: bigquery avg without bounds is the average of each person's average
-- expect: accepted cells=1 measurements=2 l1[0]=1 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) AVG(amount) FROM visits;

-- case: bigquery var pop with contribution bounds per group where a person has several rows
-- expect: refused UnsupportedQuery mentions=contribution_bounds_per_row
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) VAR_POP(amount, contribution_bounds_per_group => (0, 100))
FROM visits;

-- case: bigquery sum with contribution bounds per row on an expression
-- expect: accepted cells=1 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) SUM(amount * 2, contribution_bounds_per_row => (0.0, 50.5))
FROM visits;

-- case: bigquery options with backquoted unit and a keyword value
-- expect: refused UnsupportedQuery mentions=LAPLACE_THRESHOLD
SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS(epsilon = 1, delta = 0, privacy_unit_column = `person_id`, group_selection_strategy = ANY)
  COUNT(*) FROM visits;

-- case: bigquery options not closed
-- expect: refused SQLSyntaxError mentions="not closed"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 1 COUNT(*) FROM visits;

-- case: bigquery sum with contribution bounds per group
-- expect: accepted cells=1 l1[0]=100 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) SUM(amount, contribution_bounds_per_group => (0, 100))
FROM visits;

-- case: bigquery grouped sum with contribution bounds per group
-- expect: accepted cells=1 keys=1 l1[0]=200 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 2)
  category, SUM(amount, contribution_bounds_per_group => (0, 100)) AS total
FROM visits GROUP BY category;

-- case: bigquery sum with contribution bounds per group and a negative bound beside a count
-- expect: accepted cells=2 keys=1 l1[1]=150
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
  category, COUNT(*) AS n, SUM(amount, contribution_bounds_per_group => (-50, 20)) AS total
FROM visits GROUP BY category;

-- case: bigquery sum with contribution bounds per group beside a median
-- expect: refused UnsupportedQuery mentions=contribution_bounds_per_row
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) category, MEDIAN(amount) AS m,
  SUM(amount, contribution_bounds_per_group => (0, 100)) AS total
FROM visits GROUP BY category;

-- case: bigquery sum with contribution bounds per group at one row per unit
-- expect: accepted cells=1 l1[0]=1000 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 1)
  SUM(amount, contribution_bounds_per_group => (0, 1000))
FROM visits;

-- case: bigquery avg with contribution bounds per group on one row per person
-- expect: accepted cells=1 keys=1 rows=2
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = 1, privacy_unit_column = person_id)
  sex, AVG(income, contribution_bounds_per_group => (0, 100000)) AS income
FROM people GROUP BY sex;

-- case: bigquery avg with contribution bounds per row
-- expect: accepted cells=1 measurements=2 l1[0]=10 l1[1]=500 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
  category, AVG(amount, contribution_bounds_per_row => (0, 100)) AS a
FROM visits GROUP BY category;

-- case: bigquery sum with contribution bounds per row
-- expect: accepted cells=1 l1[0]=1000 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) SUM(amount, contribution_bounds_per_row => (0, 100))
FROM visits;

-- case: bigquery var pop with contribution bounds per row
-- expect: accepted cells=1 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) VAR_POP(amount, contribution_bounds_per_row => (0, 100))
FROM visits;

-- case: bigquery count star with contribution bounds per group, noise by the bound
-- expect: accepted cells=1 keys=1 l1[0]=100 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 1, privacy_unit_column = person_id)
  category, COUNT(*, contribution_bounds_per_group => (0, 100)) AS times
FROM visits GROUP BY category;

-- case: bigquery count of a column with contribution bounds per group
-- expect: accepted cells=1 l1[0]=20 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 20)
  COUNT(amount, contribution_bounds_per_group => (0, 20))
FROM visits;

-- case: bigquery count star with contribution bounds per group below k
-- expect: accepted cells=1 l1[0]=5 types=BIGINT rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*, contribution_bounds_per_group => (0, 5)) FROM visits;

-- case: bigquery count of units per group, each person's count clamped to one
-- expect: accepted cells=1 keys=1 l1[0]=3 types=BIGINT names="category|people" rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) category, COUNT(*, contribution_bounds_per_group => (0, 1)) AS people
FROM visits GROUP BY category;

-- case: bigquery count with contribution bounds per group raising the floor
-- expect: accepted cells=1 l1[0]=100 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*, contribution_bounds_per_group => (2, 100))
FROM visits;

-- case: bigquery percentile cont with contribution bounds per row
-- expect: accepted cells=1 types=DOUBLE rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0)
  PERCENTILE_CONT(amount, 0.5, contribution_bounds_per_row => (0, 100))
FROM visits;

-- case: bigquery report format json
-- expect: accepted cells=1 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*, report_format => 'JSON') AS n FROM visits;

-- case: bigquery report format json per group
-- expect: accepted cells=2 keys=1 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
  category, COUNT(*) AS n,
  SUM(amount, contribution_bounds_per_group => (0, 100), report_format => "JSON") AS total
FROM visits GROUP BY category;

-- case: bigquery report format read by field access
-- expect: accepted cells=1 names="ci|v" rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0)
  SUM(amount, contribution_bounds_per_group => (0, 100), report_format => 'JSON').result.noise_confidence_interval AS ci,
  SUM(amount, contribution_bounds_per_group => (0, 100), report_format => 'JSON').result.value AS v
FROM visits;

-- case: bigquery report format read with json functions
-- expect: accepted cells=1 names="v|half" rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0)
  JSON_VALUE(COUNT(*, report_format => 'JSON'), '$.result.value') AS v,
  DOUBLE(COUNT(*, report_format => 'JSON').result.noise_confidence_interval.upper_bound) AS half
FROM visits;

-- case: bigquery report format on a count of distinct persons
-- expect: accepted cells=1 keys=1 names="category|people" rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) category,
  COUNT(DISTINCT person_id, report_format => 'JSON') AS people
FROM visits GROUP BY category;

-- case: bigquery count distinct with contribution bounds per group
-- expect: refused UnsupportedQuery mentions="max_rows_contributed"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(DISTINCT category, contribution_bounds_per_group => (0, 1))
FROM visits;

-- case: bigquery report format ordered by a field of its alias
-- expect: accepted cells=1 keys=1 names="category|r" rows=3
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) category, COUNT(*, report_format => 'JSON') AS r
FROM visits GROUP BY category ORDER BY DOUBLE(r.result.value) DESC LIMIT 3;

-- case: bigquery report format of approx quantiles read over the released rows
-- expect: accepted cells=3 names="median|hi" rows=1
SELECT DOUBLE(r[OFFSET(1)].value) AS median, DOUBLE(r[OFFSET(1)].noise_confidence_interval.upper_bound) AS hi
FROM (
  SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0)
    JSON_QUERY_ARRAY(APPROX_QUANTILES(amount, 2, contribution_bounds_per_row => (0, 100), report_format => 'JSON').result) AS r
  FROM visits
);

-- case: bigquery report format on a median
-- expect: accepted cells=1 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) MEDIAN(amount, report_format => 'JSON') FROM visits;

-- case: bigquery report format of an expression over aggregates
-- expect: refused UnsupportedQuery mentions="not an expression"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) DPSQL_REPORT(COUNT(*) + 1) FROM visits;

-- case: bigquery report format in arithmetic
-- expect: refused UnsupportedQuery mentions="outer part"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*, report_format => 'JSON') + 1 FROM visits;

-- case: bigquery report format in a query over the released rows
-- expect: refused UnsupportedQuery mentions="move it inside"
SELECT DPSQL_REPORT(n) FROM (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) AS n FROM visits);

-- case: bigquery report format on public tables
-- expect: refused UnsupportedQuery mentions="remove report_format"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*, report_format => 'JSON') FROM categories;

-- case: bigquery report format proto on a sum
-- expect: refused UnsupportedQuery mentions="'JSON'"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0)
  SUM(amount, contribution_bounds_per_row => (0, 100), report_format => 'PROTO')
FROM visits;

-- case: bigquery privacy unit column on a joined table not the unit
-- expect: refused BoundsAboveCap mentions="privacy_unit_column"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, privacy_unit_column = p.sex)
  p.sex, COUNT(*)
FROM visits v JOIN people p ON v.person_id = p.person_id GROUP BY p.sex;

-- case: bigquery unknown option
-- expect: refused UnsupportedQuery mentions=max_rows_contributed
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, budget = 3) COUNT(*) FROM visits;

-- case: bigquery kappa is max groups contributed
-- expect: accepted cells=1 keys=1 l1[0]=1 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, kappa = 1)
  category, COUNT(DISTINCT person_id)
FROM visits GROUP BY category;

-- case: bigquery public groups strategy
-- expect: accepted cells=1 keys=1 release=domain:8 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS(epsilon = 1, delta = 0, group_selection_strategy = PUBLIC_GROUPS, max_groups_contributed = 8)
  category, COUNT(*)
FROM visits GROUP BY category;

-- case: bigquery max groups zero
-- expect: refused BoundsAboveCap mentions="whole number"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_groups_contributed = 0) COUNT(*) FROM visits;

-- case: bigquery max groups not whole
-- expect: refused InvalidPrivacyParameter mentions="whole number"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_groups_contributed = 1.5) COUNT(*) FROM visits;

-- case: bigquery negative epsilon
-- expect: refused InvalidPrivacyParameter mentions=epsilon
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 0, epsilon = -1) COUNT(*) FROM visits;

-- case: bigquery bounds do not apply to one row per unit
-- expect: accepted cells=1 l1[0]=1 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 40) COUNT(*) FROM people;

-- case: bigquery join with the unit column and raised rows
-- expect: accepted cells=1 keys=1 l1[0]=50 rows=2
SELECT WITH DIFFERENTIAL_PRIVACY
  OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 50, privacy_unit_column = v.person_id)
  p.sex, COUNT(*)
FROM visits v JOIN people p ON v.person_id = p.person_id GROUP BY p.sex;

-- case: bigquery clause after a cte
-- expect: accepted cells=1 l1[0]=20 rows=1
WITH t AS (SELECT * FROM visits)
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 20) COUNT(*) FROM t;

-- case: bigquery unit path table raised
-- expect: accepted cells=1 keys=1 l1[0]=40 rows=8
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, max_rows_contributed = 40) drug, COUNT(*)
FROM prescriptions GROUP BY drug;

-- case: bigquery two clauses
-- expect: refused UnsupportedQuery mentions="one WITH DIFFERENTIAL_PRIVACY"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) COUNT(*) FROM visits
WHERE person_id IN (SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) person_id FROM visits);

-- case: bigquery deprecated anonymization clause
-- expect: refused UnsupportedQuery mentions="WITH DIFFERENTIAL_PRIVACY"
SELECT WITH ANONYMIZATION OPTIONS(epsilon = 1, delta = 1e-6) COUNT(*) FROM visits;

-- case: bigquery deprecated anon aggregate
-- expect: refused UnsupportedQuery mentions="write SUM(...)"
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) ANON_SUM(amount) FROM visits;

-- case: bigquery approx quantiles as a list of five quantiles
-- expect: accepted cells=5 measurements=5 rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) APPROX_QUANTILES(amount, 4) FROM visits;

-- case: bigquery percentile cont without bounds uses the declared ones
-- expect: accepted cells=1 types=DOUBLE rows=1
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6) PERCENTILE_CONT(amount, 0.5)
FROM visits;

-- case: bigquery report format ordered by its json field itself
-- expect: refused UnsupportedQuery
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) category, COUNT(*, report_format => 'JSON') AS r
FROM visits GROUP BY category ORDER BY r.result.value DESC;
