-- The outer query: HAVING, ORDER BY, LIMIT/OFFSET, DISTINCT, arithmetic and windows over
-- aggregates run on the noisy cells only (post-processing, no extra cost).

-- case: having on count
-- expect: accepted cells=1 measurements=1 release=domain:2 rows=2
SELECT sex, COUNT(*) FROM people GROUP BY sex HAVING COUNT(*) > 100;

-- case: having on alias
-- expect: accepted cells=1 rows=2
SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING n > 1000;

-- case: having filters every group
-- expect: accepted cells=1 measurements=2 rows=0
SELECT education, AVG(age) FROM people GROUP BY education HAVING AVG(age) > 200;

-- case: having on aggregate not selected
-- expect: accepted columns=1 cells=1 measurements=2 rows=2
SELECT sex FROM people GROUP BY sex HAVING AVG(income) >= 0;

-- case: having with and
-- expect: accepted cells=2 rows<=8
SELECT category, COUNT(*) AS n, SUM(amount) AS total FROM visits GROUP BY category HAVING n > 10 AND total > 0;

-- case: having without group by
-- expect: accepted cells=1 rows=0
SELECT COUNT(*) FROM people HAVING COUNT(*) > 1e9;

-- case: having on public key
-- expect: accepted rows=1
SELECT sex, COUNT(*) FROM people GROUP BY sex HAVING sex = 'F';

-- case: order by aggregate desc
-- expect: accepted rows=6
SELECT education, COUNT(*) FROM people GROUP BY education ORDER BY COUNT(*) DESC;

-- case: order by alias
-- expect: accepted rows=8
SELECT category, SUM(amount) AS total FROM visits GROUP BY category ORDER BY total;

-- case: order by ordinal
-- expect: accepted rows=8
SELECT category, AVG(duration_min) FROM visits GROUP BY category ORDER BY 2 DESC;

-- case: order by key
-- expect: accepted rows=9
SELECT children, COUNT(*) FROM people GROUP BY children ORDER BY children;

-- case: order by key not selected
-- expect: accepted columns=1 rows=2
SELECT COUNT(*) FROM people GROUP BY sex ORDER BY sex;

-- case: order by aggregate not selected
-- expect: accepted columns=1 cells=1 measurements=2 rows=2
SELECT sex FROM people GROUP BY sex ORDER BY AVG(age);

-- case: order by nulls last
-- expect: accepted rows=2
SELECT CASE WHEN amount > 1000 THEN 'large' END AS big, COUNT(*) FROM visits GROUP BY big ORDER BY big NULLS LAST;

-- case: limit
-- expect: accepted rows=1
SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC LIMIT 1;

-- case: limit and offset
-- expect: accepted rows=3
SELECT education, COUNT(*) FROM people GROUP BY education ORDER BY education LIMIT 3 OFFSET 2;

-- case: offset past the end
-- expect: accepted rows=0
SELECT sex, COUNT(*) FROM people GROUP BY sex OFFSET 10;

-- case: limit zero
-- expect: accepted path=free cost=0,0 columns=2 rows=0
SELECT SUM(age), COUNT(*) FROM people LIMIT 0;

-- case: limit on thresholded groups
-- options: delta=1e-6
-- expect: accepted release=threshold rows<=5
SELECT state, COUNT(*) AS n FROM people GROUP BY state ORDER BY n DESC LIMIT 5;

-- case: outer arithmetic on count
-- expect: accepted cells=1 measurements=1 names="?column?" rows=1
SELECT COUNT(*) * 2 + 1 FROM people;

-- case: ratio of two aggregates
-- expect: accepted columns=1 cells=2 measurements=2 rows=1
SELECT SUM(age) / COUNT(*) FROM people;

-- case: ratio per group
-- expect: accepted cells=2 rows=8
SELECT category, SUM(amount) / COUNT(*) AS mean_amount FROM visits GROUP BY category;

-- case: round of avg
-- expect: accepted cells=1 names=a rows=1
SELECT ROUND(AVG(age), 1) AS a FROM people;

-- case: cast of count
-- expect: accepted rows=1
SELECT CAST(COUNT(*) AS DOUBLE) / 1000 AS thousands FROM people;

-- case: case over aggregate
-- expect: accepted rows=2
SELECT sex, CASE WHEN COUNT(*) > 100 THEN 'many' ELSE 'few' END AS size FROM people GROUP BY sex;

-- case: greatest over count
-- expect: accepted rows=1
SELECT GREATEST(COUNT(*), 0) FROM people WHERE age > 90;

-- case: coalesce over avg
-- expect: accepted rows=1
SELECT COALESCE(AVG(income), 0) FROM people;

-- case: sqrt over variance
-- expect: accepted cells=1 measurements=3 rows=1
SELECT SQRT(VAR_POP(age)) FROM people;

-- case: difference of two filtered counts
-- expect: accepted cells=2 rows=1
SELECT COUNT(*) FILTER (WHERE sex = 'F') - COUNT(*) FILTER (WHERE sex = 'M') AS gap FROM people;

-- case: literal beside aggregate
-- expect: accepted columns=2 rows=1
SELECT 'total' AS label, COUNT(*) FROM people;

-- case: key and expression of key
-- expect: accepted columns=3 rows=2
SELECT sex, lower(sex) AS s, COUNT(*) FROM people GROUP BY sex;

-- case: window share of total
-- expect: accepted cells=1 measurements=1 release=domain:2 names=pct|sex rows=2
SELECT COUNT(*) * 100.0 / SUM(COUNT(*)) OVER () AS pct, sex FROM people GROUP BY sex;

-- case: window share per category
-- expect: accepted cells=1 rows=8
SELECT category, SUM(amount) / SUM(SUM(amount)) OVER () AS share FROM visits GROUP BY category;

-- case: window rank over count
-- expect: accepted rows=6
SELECT education, RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM people GROUP BY education;

-- case: window row number over key
-- expect: accepted rows=2
SELECT sex, ROW_NUMBER() OVER (ORDER BY sex) AS rn, COUNT(*) FROM people GROUP BY sex;

-- case: window running total
-- expect: accepted rows=9
SELECT children, SUM(COUNT(*)) OVER (ORDER BY children ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cumulative FROM people GROUP BY children;

-- case: window lag over groups
-- expect: accepted rows=78
SELECT age, COUNT(*) - LAG(COUNT(*)) OVER (ORDER BY age) AS change FROM people GROUP BY age;

-- case: window partitioned by a key
-- expect: accepted keys=2 rows=12
SELECT sex, education, COUNT(*) * 1.0 / SUM(COUNT(*)) OVER (PARTITION BY sex) AS share FROM people GROUP BY sex, education;

-- case: window avg of aggregates
-- expect: accepted rows=8
SELECT category, AVG(COUNT(*)) OVER () AS typical FROM visits GROUP BY category;

-- case: qualify over aggregates
-- expect: accepted rows=1
SELECT sex, COUNT(*) AS n FROM people GROUP BY sex QUALIFY ROW_NUMBER() OVER (ORDER BY n DESC) = 1;

-- case: distinct over aggregates
-- expect: accepted rows=1
SELECT DISTINCT COUNT(*) > 0 AS any_rows FROM people GROUP BY sex;

-- case: outer random
-- expect: refused ForbiddenFunction
SELECT COUNT(*), random() FROM people;

-- case: order by random
-- expect: refused ForbiddenFunction
SELECT sex, COUNT(*) FROM people GROUP BY sex ORDER BY random();

-- case: outer current setting
-- expect: refused ForbiddenFunction
SELECT COUNT(*), current_setting('threads') FROM people;

-- case: outer getenv
-- expect: refused ForbiddenFunction
SELECT COUNT(*) || getenv('HOME') FROM people;

-- case: having on private column
-- expect: refused NonAggregatedColumn
SELECT sex, COUNT(*) FROM people GROUP BY sex HAVING age > 30;

-- case: order by private column
-- expect: refused NonAggregatedColumn
SELECT sex, COUNT(*) FROM people GROUP BY sex ORDER BY age;

-- case: order by private column without groups
-- expect: refused NonAggregatedColumn
SELECT COUNT(*) FROM people ORDER BY income;

-- case: named window clause
-- expect: refused UnsupportedQuery mentions=WINDOW
SELECT sex, RANK() OVER w FROM people GROUP BY sex WINDOW w AS (ORDER BY COUNT(*));
