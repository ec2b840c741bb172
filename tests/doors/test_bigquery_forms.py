"""BigQuery's forms through the DB-API door, on the bundled sample data: APPROX_QUANTILES as a
list column, UNNEST of a literal array as a public table, a query over a private answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dpsql


@pytest.fixture
def cursor() -> Iterator[dpsql.dbapi.Cursor]:
    connection = dpsql.connect(epsilon=1.0)
    yield connection.cursor()
    connection.close()


def test_approx_quantiles_is_a_list_of_n_plus_one(cursor: dpsql.dbapi.Cursor) -> None:
    cursor.execute("SELECT APPROX_QUANTILES(age, 4) AS q, APPROX_QUANTILES(age, 4)[OFFSET(4)] "
                   "AS top FROM people")
    (row,) = cursor.fetchall()
    quantiles, top = row
    assert isinstance(quantiles, list) and len(quantiles) == 5
    assert top == quantiles[4]  # OFFSET(4) reads the list's last element
    assert all(18 <= q <= 95 for q in quantiles)  # within the declared bounds
    assert [d[0] for d in cursor.description] == ["q", "top"]


def test_unnest_multiplies_rows_and_is_a_public_key(cursor: dpsql.dbapi.Cursor) -> None:
    cursor.execute("SELECT x, COUNT(*) AS n FROM people CROSS JOIN UNNEST([1, 2, 3]) AS x "
                   "GROUP BY x ORDER BY x")
    rows = cursor.fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]  # every element, as a public key
    assert all(abs(r[1] - 20001) < 200 for r in rows)  # each person once per element


def test_a_query_over_a_private_answer_costs_the_inner(cursor: dpsql.dbapi.Cursor) -> None:
    cursor.execute("SELECT COUNT(*) AS groups, SUM(n) AS total FROM "
                   "(SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) AS s")
    ((groups, total),) = cursor.fetchall()
    assert groups == 2  # the public domain F, M
    assert abs(total - 20001) < 100
    assert cursor.result is not None and cursor.result.epsilon == pytest.approx(1.0)
