"""The answer of a composite query (:mod:`dpsql.query.composite`): its parts' released rows
combined by the query around them, in a locked in-memory DuckDB whose only tables are those
rows (``__release_i``, columns ``c0, c1, ...``). Nothing private is reachable from there: this
is post-processing of the parts' releases, and costs nothing.

Its work is the query's own (a cross join of ``VALUES`` lists grows as their product), which no
checker bounds, so it runs under the data owner's ``statement_timeout`` (``limit``), as a
public read or a ledger read does: its time depends on the query text and the released rows
only, so it needs no grid of its own (the charged answer's grid covers it)."""

from __future__ import annotations

import duckdb

from dpsql.engines import CursorCancel, locked
from dpsql.errors import DataError, QueryTimeout, UnsupportedQuery
from dpsql.execution.postprocess import Result, ResultColumn
from dpsql.execution.time_limits import Deadline
from dpsql.query.composite import RELEASE, Composite, outer_query


def combine(composite: Composite, answers: list[Result], limit: float,
            checking: bool = False) -> Result:
    """The query around the parts run over their answers (``answers[i]``: part i's), stopped
    after ``limit`` seconds (:class:`~dpsql.errors.QueryTimeout`).
    ``checking``: the answers are the parts' typed columns without rows, before the charge
    (:func:`dpsql.routes.releases.prepare_releases`): the query is bound as it will run, so a
    mistake in it (arms of different widths, a column it does not have) is a refusal then,
    not a failure after the charge."""
    if not composite.union:
        for i, answer in enumerate(answers):
            if len(answer.columns) != 1:
                raise UnsupportedQuery(f"scalar subquery {i + 1} selects "
                                       f"{len(answer.columns)} columns; select one")
    names = [[c.name for c in a.columns] for a in answers]
    sql = outer_query(composite, names).sql(dialect="duckdb")

    def fill(con: duckdb.DuckDBPyConnection) -> None:
        for i, answer in enumerate(answers):
            table = f'"{RELEASE.format(i)}"'
            types = [c.type for c in answer.columns]
            columns = ", ".join(f"c{j} {t}" for j, t in enumerate(types))
            con.execute(f"CREATE TABLE {table} ({columns})")
            locked.insert_rows(con, table, types, answer.rows)

    con = locked.in_memory(fill)
    deadline = Deadline(CursorCancel(con), limit)
    try:
        result = con.execute(sql)
        described = result.description or []
        rows = result.fetchall()
    except duckdb.Error as e:  # released rows only: the message may be shown as it is
        if deadline.fired:
            raise QueryTimeout(limit, charged=not checking) from None
        if checking:
            raise UnsupportedQuery("the query around the private queries cannot run on "
                                   f"their answers: {str(e).splitlines()[0]}") from None
        raise DataError("the query around the private queries failed on their answers: "
                        f"{str(e).splitlines()[0]}") from None
    finally:
        deadline.stop()
        con.close()
    columns = [ResultColumn(d[0], str(d[1])) for d in described]
    notes = [n for a in answers for n in a.notes]
    return Result(columns, rows, [(None,) * len(columns) for _ in rows],
                  epsilon=sum(a.epsilon for a in answers), delta=sum(a.delta for a in answers),
                  notes=list(dict.fromkeys(notes)))
