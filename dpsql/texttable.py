"""Plain-text tables, as the command line and EXPLAIN print them."""

from __future__ import annotations

import math
from collections.abc import Sequence


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) and abs(value) < 1e15 else repr(value)
    return str(value)


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
