"""The owner's declaration of a contribution bound chosen from the data (issue 21, item 2)::

    [tables.visits]
    privacy_unit = "person_id"
    max_rows_per_unit = { auto = true, max = 100, share = 0.1 }

Each query over the table then spends ``share`` (default :data:`DEFAULT_SHARE`) of its epsilon
on a private choice of k in ``[1, max]`` from the units' numbers of rows, and the rest on its
measurements, calibrated to that k (:mod:`dpsql.privacy.auto_bounds`, the argument). ``max`` is
also the cap of an analyst's own k (``SET dpsql.max_rows``, ``OPTIONS(max_rows_contributed)``),
which overrides the automatic one and costs nothing extra. Only ``max_rows_per_unit`` may be
automatic: with Laplace noise over public keys a unit keeps its k rows across all its groups
(issue 21, item 1), so g bounds nothing there.

A number column's bounds may be automatic the same way (:class:`AutoValueBound`)::

    [tables.visits.columns]
    amount = { type = "float", lower = 0, upper = { auto = true, max = 5000, share = 0.1 } }
    delta  = { type = "int", lower = { auto = true, min = -1000 }, upper = 1000 }

Each query whose SUM, AVG, VAR or STDDEV reads the column then spends ``share`` of its epsilon
on a private choice of that bound in ``[lower, max]`` (``[min, upper]``) from the units'
largest (smallest) values, and clamps those aggregates' inputs to it
(:mod:`dpsql.privacy.auto_values`). ``max`` (``min``) is the column's declared bound: every
value is still read clamped to it, and no chosen bound lies outside it. The shares of one
table's automatic bounds (k included) must sum to less than 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpsql.errors import MetadataError

#: The share of a query's epsilon spent on choosing k when the owner states none.
DEFAULT_SHARE = 0.1
_KEYS = {"auto", "max", "share"}


@dataclass(frozen=True)
class AutoBound:
    """k chosen per query from the data, at most ``cap``, for ``share`` of its epsilon."""

    cap: int
    share: float = DEFAULT_SHARE


def parse_auto(spec: Mapping[str, Any], key: str, where: str) -> AutoBound | None:
    """``spec[key]`` as an automatic bound, None when it is a plain number (or absent)."""
    value = spec.get(key)
    if not isinstance(value, dict):
        return None
    field = f"{where}: {key}"
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise MetadataError(f"{field} has an unknown setting {unknown[0]!r}; an automatic "
                            "bound takes auto = true, max = N and optionally share = 0.1")
    if key != "max_rows_per_unit":
        raise MetadataError(f"{field}: only max_rows_per_unit can be automatic; give "
                            f"{key} as a whole number")
    if value.get("auto") is not True:
        raise MetadataError(f"{field} = {{...}} needs auto = true (or give a whole number)")
    cap = value.get("max")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise MetadataError(f"{field}: max (the largest k the data may choose) must be a whole "
                            f"number >= 1, not {cap!r}")
    share = _share(value.get("share", DEFAULT_SHARE),
                   f"{field}: share (of each query's epsilon spent choosing k)")
    return AutoBound(cap, share)


@dataclass(frozen=True)
class AutoValueBound:
    """A column's lower or upper bound chosen per query from the data, for ``share`` of its
    epsilon, never beyond the column's declared ``lower``/``upper`` (its cap)."""

    share: float = DEFAULT_SHARE


#: The key naming the cap of an automatic lower and upper bound.
VALUE_CAP_KEYS = {"lower": "min", "upper": "max"}


def parse_auto_value(spec: Mapping[str, Any], key: str, numeric: bool, where: str
                     ) -> tuple[dict[str, Any], AutoValueBound | None]:
    """``spec`` with ``spec[key]`` (``lower`` or ``upper``) replaced by its cap when it is
    automatic, and that declaration (None when it is a plain bound or absent)."""
    value = spec.get(key)
    if not isinstance(value, dict):
        return dict(spec), None
    field, cap_key = f"{where}: {key}", VALUE_CAP_KEYS[key]
    unknown = sorted(set(value) - {"auto", cap_key, "share"})
    if unknown:
        raise MetadataError(f"{field} has an unknown setting {unknown[0]!r}; an automatic "
                            f"{key} bound takes auto = true, {cap_key} = N and optionally "
                            "share = 0.1")
    if not numeric:
        raise MetadataError(f"{field}: only an int or float column's bounds can be automatic; "
                            f"give {key} as a value")
    if value.get("auto") is not True:
        raise MetadataError(f"{field} = {{...}} needs auto = true (or give {key} as a number)")
    if cap_key not in value:
        raise MetadataError(f"{field}: an automatic {key} bound needs {cap_key} = N, the "
                            f"{'largest' if key == 'upper' else 'smallest'} bound the data may "
                            "choose")
    share = _share(value.get("share", DEFAULT_SHARE), f"{field}: share (of each query's "
                   "epsilon spent choosing the bound)")
    if "public_range" in spec or "values" in spec:
        raise MetadataError(f"{field}: a column with an automatic bound has no public_range "
                            "or values (its keys would move with the bound); declare the "
                            "bound as a number")
    replaced = dict(spec)
    replaced[key] = value[cap_key]
    return replaced, AutoValueBound(share)


def _share(share: Any, what: str) -> float:
    if isinstance(share, bool) or not isinstance(share, int | float) or \
            not math.isfinite(share) or not 0 < share < 1:
        raise MetadataError(f"{what} must be a number strictly between 0 and 1, not {share!r}")
    return float(share)


def check_shares(shares: Mapping[str, float], where: str) -> None:
    """The automatic bounds of one table, by field, spend less than each query's epsilon."""
    if sum(shares.values()) >= 1:
        listed = ", ".join(f"{name} {share:g}" for name, share in shares.items())
        raise MetadataError(f"{where}: the shares of its automatic bounds ({listed}) sum to "
                            "1 or more, leaving nothing for the query's measurements; lower "
                            "them")


def check_auto(spec: Mapping[str, Any], auto: AutoBound | None, unit: str | None,
               one_row: bool, where: str) -> None:
    """An automatic k needs a table bounded by its own unit, and its cap given once."""
    for key in ("max_groups_per_unit",):
        parse_auto(spec, key, where)  # refuses a dict there, naming the field
    if auto is None:
        return
    if unit is None or one_row:
        raise MetadataError(f"{where}: max_rows_per_unit = {{ auto = true }} needs a "
                            "privacy_unit and no one_row_per_unit (nothing else is bounded)")
    if "max_rows_per_unit_cap" in spec:
        raise MetadataError(f"{where}: max_rows_per_unit_cap with an automatic "
                            "max_rows_per_unit: its max is the cap; remove one of them")
