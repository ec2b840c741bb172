"""Group keys as released values: one canonical form and one total order.

Which groups are released, and in which order, is an output like any cell. The engine returns
groups in an order that depends on the data (first appearance, hash buckets, threads), and it
groups values that compare equal but print differently (``-0.0`` and ``0.0``) under whichever
came first. So every released key is first made canonical (``-0.0`` becomes ``0.0``, every NaN
the one NaN below) and released groups are sorted by :func:`order`, a total order on canonical
values alone: NULL last, NaN after every number, values of different types apart. Python's own
``<`` is not total on floats (NaN compares false with everything), so ``sorted`` over raw keys
would keep part of the engine's order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

NAN = float("nan")


def canonical(key: Sequence[object]) -> tuple[object, ...]:
    """``key`` with every float made canonical: ``-0.0`` as ``0.0``, every NaN as :data:`NAN`
    (one object, so that dictionary look-ups find it)."""
    return tuple(_canonical_value(v) for v in key)


def _canonical_value(value: object) -> object:
    if isinstance(value, float):
        if math.isnan(value):
            return NAN
        return value + 0.0  # -0.0 + 0.0 is 0.0 in IEEE arithmetic
    return value


def order(key: Sequence[object]) -> tuple[tuple[int, str, object], ...]:
    """A sort key that totally orders canonical key tuples by their values alone."""
    return tuple(_order_value(v) for v in key)


def _order_value(value: object) -> tuple[int, str, object]:
    if value is None:
        return (2, "", 0)
    if isinstance(value, float) and math.isnan(value):
        return (1, "float", 0)
    if isinstance(value, bool | int | float):
        return (0, "number", value)
    return (0, type(value).__name__, value)


def distinct(keys: Iterable[Sequence[object]]) -> list[tuple[object, ...]]:
    """Canonical keys without repeats, in first-seen order (for public domains, whose order is
    the owner's)."""
    seen: dict[tuple[object, ...], None] = {}
    for key in keys:
        seen.setdefault(canonical(key), None)
    return list(seen)
