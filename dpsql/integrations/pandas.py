"""A noisy result as a pandas DataFrame (``cursor.fetch_df()``).

The frame has the result's columns and, after each noisy one, its 95% accuracy as a column
``"NAME ±95%"`` (as the command line's ``--accuracy``); ``frame.attrs`` holds what a table of
numbers cannot: ``notes`` (the bias and caveats, :mod:`dpsql.explanation.bias`), ``epsilon``
and ``delta`` (what the answer cost), ``reused`` and ``randomized``. pandas is imported here only
(``pip install dpsql[pandas]``).

``pandas.read_sql(sql, conn)`` on a dpsql connection works as on sqlite3's (pandas runs it
through the DB-API the same way), but pandas warns (a UserWarning, "pandas only supports
SQLAlchemy connectable ...") for every DB-API connection that is not sqlite3's, on every call.
:func:`quiet_read_sql` turns that one warning off (a :mod:`warnings` filter on its text),
once a dpsql connection is open; pandas is not imported for it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dpsql.texttable import unique_names

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

    from dpsql.execution.postprocess import Result


#: The start of pandas' warning for a DB-API connection that is not sqlite3's (pandas 2 and 3).
READ_SQL_WARNING = "pandas only supports SQLAlchemy connectable"


def quiet_read_sql() -> None:
    """Silence pandas' UserWarning for a DB-API connection in ``pandas.read_sql`` (module
    docstring). Repeated calls keep one filter (``warnings.filterwarnings`` replaces an equal
    one)."""
    warnings.filterwarnings("ignore", message=READ_SQL_WARNING, category=UserWarning)


def accuracy_name(name: str, unit: str) -> str:
    """The header of a column's accuracy (ranks for quantiles), as the command line's."""
    return f"{name} ±95%" + (" (ranks)" if unit == "rank" else "")


def frame(result: Result, rows: Sequence[tuple[Any, ...]],
          accuracy: Sequence[tuple[float | None, ...]], notes: Sequence[str],
          reused: bool = False) -> pd.DataFrame:
    """``rows`` (with their ``accuracy``) of ``result``'s columns as a DataFrame."""
    try:
        import pandas as pd
    except ModuleNotFoundError:
        raise ModuleNotFoundError("fetch_df() needs pandas: pip install 'dpsql[pandas]'"
                                  ) from None
    data: dict[str, list[Any]] = {}
    names = unique_names([c.name for c in result.columns])  # count, count_1: one key each
    for i, (name, column) in enumerate(zip(names, result.columns, strict=True)):
        data[name] = [row[i] for row in rows]
        if column.accuracy_unit:
            data[accuracy_name(name, column.accuracy_unit)] = [a[i] for a in accuracy]
    df = pd.DataFrame(data, columns=list(data))
    df.attrs.update(notes=list(notes), epsilon=result.epsilon, delta=result.delta,
                    reused=reused, randomized=result.randomized)
    return df
