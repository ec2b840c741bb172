"""A noisy result as a pandas DataFrame (``cursor.fetch_df()``).

The frame has the result's columns and, after each noisy one, its 95% accuracy as a column
``"NAME ±95%"`` (as the command line's ``--accuracy``); ``frame.attrs`` holds what a table of
numbers cannot: ``notes`` (the bias and caveats, :mod:`dpsql.explanation.bias`), ``epsilon``
and ``delta`` (what the answer cost), ``reused`` and ``randomized``. pandas is imported here only
(``pip install dpsql[pandas]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dpsql.texttable import unique_names

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

    from dpsql.execution.postprocess import Result


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
