-- The ledger views (dpsql/ledger/spending.py): dpsql.spending, dpsql.queries, dpsql.budgets,
-- answered exactly and free from the asking analyst's own ledger rows (path=ledger, cost 0).
-- Plan facts only: the rows depend on what the corpus charged before. A query naming a view
-- and anything else is refused, never split.

-- case: ledger spending per day
-- expect: accepted path=ledger cost=0,0 names="analyst|day|queries|epsilon|delta" types=VARCHAR|DATE|BIGINT|DOUBLE|DOUBLE
SELECT * FROM dpsql.spending;

-- case: ledger chart of spending per analyst per day
-- expect: accepted path=ledger cost=0,0 names="day|analyst|epsilon" types=DATE|VARCHAR|DOUBLE
SELECT day, analyst, SUM(epsilon) AS epsilon FROM dpsql.spending
WHERE day >= DATE '2026-01-01' GROUP BY day, analyst ORDER BY day, analyst;

-- case: ledger queries with a window
-- expect: accepted path=ledger names="id|running" types=BIGINT|DOUBLE
SELECT id, SUM(epsilon) OVER (ORDER BY id) AS running FROM dpsql.queries;

-- case: ledger budgets joined to spending in a cte
-- expect: accepted path=ledger names="analyst|share_spent|days" types=VARCHAR|DOUBLE|BIGINT
WITH d AS (SELECT analyst, COUNT(*) AS days FROM dpsql.spending GROUP BY analyst)
SELECT b.analyst, b.share_spent, d.days FROM dpsql.budgets b LEFT JOIN d ON b.analyst = d.analyst;

-- case: ledger view joined to a private table
-- expect: refused UnsupportedQuery mentions="read on their own"
SELECT s.day, COUNT(*) FROM dpsql.spending s JOIN visits v ON v.day = s.day GROUP BY s.day;

-- case: ledger view with a private subquery
-- expect: refused UnsupportedQuery mentions="read on their own"
SELECT * FROM dpsql.queries WHERE epsilon > (SELECT AVG(amount) FROM visits);

-- case: ledger view beside a file read
-- expect: refused UnsupportedQuery mentions="read on their own"
SELECT * FROM dpsql.spending, read_parquet('people.parquet');

-- case: an unknown ledger view
-- expect: refused UnknownTable mentions="no ledger view"
SELECT * FROM dpsql.charges;

-- case: ledger view through a function that runs sql
-- expect: refused ForbiddenFunction
SELECT query_table('visits') FROM dpsql.budgets;
