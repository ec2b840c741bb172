"""Plain-text tables, as the command line and EXPLAIN print them."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return format_float(value)
    return str(value)


def format_float(value: float, digits: int = 6) -> str:
    """``value`` to about ``digits`` significant digits in fixed notation: a noisy sum reads
    450459239, not 4.50459e+08 (its integer digits are all kept: noise is in them, not in
    the exponent). Tiny and huge values, and inf and nan, keep Python's own notation."""
    if not math.isfinite(value) or abs(value) >= 1e15:
        return repr(value)
    if value == 0:
        return "0"
    if abs(value) < 1e-4:
        return f"{value:.{digits}g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with a repeated one numbered as DuckDB numbers a subquery's (``count``,
    ``count_1``): where columns are read by name (JSON objects, DataFrames, a query over an
    answer), PostgreSQL's names (``count`` for every COUNT) would otherwise collide."""
    seen = {n.lower() for n in names}
    out: list[str] = []
    taken: set[str] = set()
    for name in names:
        unique, k = name, 0
        while unique.lower() in taken or (k and unique.lower() in seen):
            k += 1
            unique = f"{name}_{k}"
        taken.add(unique.lower())
        out.append(unique)
    return out


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    line = "-+-".join("-" * w for w in widths)
    out = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), line]
    for r in cells:
        out.append(" | ".join(v.rjust(w) if _numeric(v) else v.ljust(w)
                              for v, w in zip(r, widths, strict=True)))
    return "\n".join(out)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]],
               lines: Sequence[str] = ()) -> str:
    """An HTML table (a notebook's display of a result), every text escaped, and ``lines``
    (paragraphs) after it."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    after = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{after}"
