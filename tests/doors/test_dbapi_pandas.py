"""Python as analysts use it: ``cursor.fetch_df()`` and a result's notebook display."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import dpsql

SQL = "SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex"


@pytest.fixture
def cursor() -> dpsql.Cursor:
    conn = dpsql.connect(epsilon=1.0)
    cur = conn.cursor()
    cur.execute(SQL)
    yield cur
    conn.close()


def test_fetch_df_has_the_accuracy_columns_and_the_notes(cursor) -> None:
    rows, accuracy = cursor.fetchall(), cursor.accuracy
    cursor.execute(SQL)  # the stored answer: the same rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no pandas UserWarning, nor any other
        df = cursor.fetch_df()
    assert list(df.columns) == ["sex", "n", "n ±95%", "avg_income", "avg_income ±95%"]
    assert [tuple(r) for r in df[["sex", "n", "avg_income"]].itertuples(index=False)] == rows
    assert list(df["n ±95%"]) == [a[1] for a in accuracy]
    assert df.attrs["notes"] == cursor.notes and df.attrs["notes"]
    assert df.attrs["epsilon"] == 1.0 and df.attrs["reused"] is True
    assert cursor.fetchall() == []  # fetch_df consumed the rows


def test_read_sql_on_a_dbapi_connection_does_not_warn(cursor) -> None:
    """pandas warns for every DB-API connection but sqlite3's; a dpsql connection turns that
    warning off when it opens (filters set before it, "always" here, do not bring it back)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dpsql.connect(epsilon=1.0) as conn:
            df = pd.read_sql(SQL, conn)
            again = pd.read_sql(SQL, conn)  # every call, not only the first
    assert [str(w.message) for w in caught] == []
    assert list(df.columns) == ["sex", "n", "avg_income"] and df.equals(again)  # stored


def test_a_result_shows_as_html_with_its_accuracy_and_cost(cursor) -> None:
    result = cursor.result
    assert result is not None
    page = result._repr_html_()
    assert page.startswith("<table>") and "<th>avg_income</th>" in page
    n, accuracy = result.rows[0][1], result.accuracy[0][1]
    assert f"<td>{n} ± {accuracy:.4g}</td>" in page
    assert "privacy cost epsilon=1" in page
    assert all(note.replace("'", "&#x27;").replace('"', "&quot;")[:40] in page
               for note in result.notes)
