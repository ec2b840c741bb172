"""The owner's opt-in to row-level releases under local differential privacy: a table's
``local`` section (the mechanism and its privacy argument: :mod:`dpsql.privacy.local`)::

    [tables.people.local]
    epsilon = 2.0                # what one released row costs (a unit's k rows: k times this)
    row_count = "public"         # the number of rows is public: a query releases every row;
    # sample_rows = 100          # or: it is not, and a query releases 100 rows drawn uniformly
                                 # with replacement (each costs epsilon)

    [tables.people.local.columns]      # every column not listed is withheld (NULL)
    sex         = "rr"                          # k-ary randomized response over its domain
    married     = "rr"                          # a bool: Warner's coin
    age         = { release = "laplace", weight = 2 }   # clamp + discrete Laplace (int)
    income      = { release = "buckets", edges = [0, 25000, 50000, 100000, 250000] }
    signup_date = { release = "grain", grain = "year" } # the date's year, by randomized response

Release kinds, each checked against the column's declaration:

* ``rr``: a finite public domain (``values``, a bool, an int or date ``public_range`` of at
  most :data:`~dpsql.metadata.metadata.MAX_DOMAIN_SIZE` values; NULL is one more value when
  the column is nullable);
* ``laplace``: an int, or a float with ``step`` (the grid its values are rounded to), with
  ``lower`` and ``upper``, not nullable (a NULL would show through the noise);
* ``buckets``: a number with ``edges`` (at least two, increasing); the value is clamped to
  ``edges[0]..edges[-1]`` and released as its bucket's lower edge by randomized response
  (NULL its own bucket when nullable);
* ``grain``: a date with ``lower`` and ``upper`` and ``grain`` (year, quarter or month).

``weight`` (> 0, default 1) splits the row's epsilon: column c gets
``epsilon * weight_c / sum(weights)``. The privacy unit and ``unique`` columns are never
released (a linkable identifier), nor is free text without a domain.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpsql.errors import MetadataError
from dpsql.metadata.toml_values import no_unknown_keys

KINDS = ("rr", "laplace", "buckets", "grain")
GRAINS = ("year", "quarter", "month")
ROW_COUNTS = ("public", "sampled")
#: At most this many rows are drawn by one query of a table whose row count is not public.
MAX_SAMPLE_ROWS = 10_000
_LOCAL_KEYS = {"epsilon", "row_count", "sample_rows", "columns", "description"}
_RELEASE_KEYS = {"release", "weight", "step", "edges", "grain"}


@dataclass(frozen=True)
class ColumnRelease:
    """How one column of a released row is randomized (the kinds: module docstring)."""

    name: str
    kind: str
    weight: float = 1.0
    step: float | None = None  # laplace on a float: the grid
    edges: tuple[float, ...] = ()  # buckets
    grain: str | None = None  # grain


@dataclass(frozen=True)
class LocalSpec:
    """A table's ``local`` section: the row's epsilon, whether its row count is public (else
    ``sample_rows`` uniform draws per query), and the released columns."""

    epsilon: float
    columns: tuple[ColumnRelease, ...]
    public_row_count: bool
    sample_rows: int | None = None

    def column(self, name: str) -> ColumnRelease | None:
        return next((c for c in self.columns if c.name == name.lower()), None)

    def share(self, release: ColumnRelease) -> float:
        """The epsilon of one released column: ``epsilon * weight / sum(weights)``."""
        return self.epsilon * release.weight / sum(c.weight for c in self.columns)


def parse_local(spec: Any, columns: Mapping[str, Any], unit: str | None, where: str
                ) -> LocalSpec:
    """Validate a table's ``local`` section against its declared ``columns`` (name ->
    :class:`~dpsql.metadata.metadata.Column`) and privacy ``unit``."""
    where = f"{where}, local"
    if not isinstance(spec, dict):
        raise MetadataError(f"{where}: must be a table of settings ([tables.NAME.local])")
    no_unknown_keys(spec, _LOCAL_KEYS, where)
    epsilon = spec.get("epsilon")
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or \
            not math.isfinite(epsilon) or epsilon <= 0:
        raise MetadataError(f"{where}: epsilon must be a finite number > 0 (what one released "
                            f"row costs), not {epsilon!r}")
    public, sample = _row_count(spec, where)
    raw = spec.get("columns")
    if not isinstance(raw, dict) or not raw:
        raise MetadataError(f"{where}: no columns section; list the released columns and how "
                            "each is released (rr, laplace, buckets, grain)")
    releases = tuple(_release(name, value, columns, unit, f"{where}, column {name!r}")
                     for name, value in raw.items())
    return LocalSpec(float(epsilon), releases, public, sample)


def _row_count(spec: Mapping[str, Any], where: str) -> tuple[bool, int | None]:
    """``row_count = "public"`` or ``sample_rows = m``: the owner must choose (the number of
    rows a full release shows is the table's size)."""
    count, sample = spec.get("row_count"), spec.get("sample_rows")
    if count is not None and count not in ROW_COUNTS:
        raise MetadataError(f"{where}: row_count must be one of {', '.join(ROW_COUNTS)}, not "
                            f"{count!r}")
    if count == "public":
        if sample is not None:
            raise MetadataError(f"{where}: sample_rows is for a table whose row count is not "
                                "public; remove it, or row_count = \"public\"")
        return True, None
    if sample is None:
        raise MetadataError(f"{where}: declare row_count = \"public\" (a release shows how many "
                            "rows the table has) or sample_rows = m (each query draws m rows)")
    if isinstance(sample, bool) or not isinstance(sample, int) or \
            not 1 <= sample <= MAX_SAMPLE_ROWS:
        raise MetadataError(f"{where}: sample_rows must be a whole number in 1.."
                            f"{MAX_SAMPLE_ROWS}, not {sample!r}")
    return False, sample


def _release(name: str, value: Any, columns: Mapping[str, Any], unit: str | None,
             where: str) -> ColumnRelease:
    spec = {"release": value} if isinstance(value, str) else value
    if not isinstance(spec, dict):
        raise MetadataError(f"{where}: must be a release kind ({', '.join(KINDS)}) or a table "
                            "such as { release = \"rr\", weight = 2 }")
    no_unknown_keys(spec, _RELEASE_KEYS, where)
    column = columns.get(name.lower())
    if column is None:
        raise MetadataError(f"{where}: not one of the table's declared columns")
    if name.lower() == unit or column.unique:
        raise MetadataError(f"{where}: a privacy unit or a unique column identifies a row and "
                            "is never released; remove it (it is withheld as NULL)")
    kind = spec.get("release")
    if kind not in KINDS:
        raise MetadataError(f"{where}: release must be one of {', '.join(KINDS)}, not {kind!r}")
    weight = spec.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or \
            not math.isfinite(weight) or weight <= 0:
        raise MetadataError(f"{where}: weight must be a finite number > 0, not {weight!r}")
    extra = {"laplace": {"step"}, "buckets": {"edges"}, "grain": {"grain"}}.get(kind, set())
    stray = sorted(set(spec) - {"release", "weight"} - extra)
    if stray:
        raise MetadataError(f"{where}: {stray[0]} does not apply to release = {kind!r}")
    _check_fits(ColumnRelease(name.lower(), kind, grain=spec.get("grain")), column, where)
    return ColumnRelease(name.lower(), kind, float(weight), _step(spec, column, kind, where),
                         _edges(spec, column, kind, where), spec.get("grain"))


def _step(spec: Mapping[str, Any], column: Any, kind: str, where: str) -> float | None:
    if kind != "laplace":
        return None
    if column.type != "float":
        if "step" in spec:
            raise MetadataError(f"{where}: step is for a float; an int's grid is its integers")
        return None
    step = spec.get("step")
    if isinstance(step, bool) or not isinstance(step, int | float) or \
            not math.isfinite(step) or step <= 0:
        raise MetadataError(f"{where}: a float released by laplace needs step = s > 0 (the grid "
                            f"its values are rounded to), not {step!r}")
    return float(step)


def _edges(spec: Mapping[str, Any], column: Any, kind: str, where: str) -> tuple[float, ...]:
    if kind != "buckets":
        return ()
    edges = spec.get("edges")
    if not isinstance(edges, list) or len(edges) < 2 or any(
            isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e)
            for e in edges) or any(a >= b for a, b in itertools.pairwise(edges)):
        raise MetadataError(f"{where}: edges must be at least two increasing numbers, not "
                            f"{edges!r}")
    if len(edges) > 10_001:
        raise MetadataError(f"{where}: edges declares more than 10,000 buckets")
    if column.type == "int" and any(not float(e).is_integer() for e in edges):
        raise MetadataError(f"{where}: the edges of an int column must be whole numbers")
    return tuple(float(e) for e in edges)


def _check_fits(release: ColumnRelease, column: Any, where: str) -> None:
    """Refuse a release kind the column's declaration cannot support, naming what is missing."""
    kind = release.kind
    if kind == "rr" and (column.domain is None or len(column.domain) < 2):
        raise MetadataError(f"{where}: rr needs a public domain of at least two values: "
                            "declare values = [...] (or public_range for an int or a date), "
                            "or remove the column (it is then withheld)")
    if kind == "laplace":
        if not column.numeric or not column.bounded:
            raise MetadataError(f"{where}: laplace needs an int or float column with lower and "
                                "upper")
        if column.nullable:
            raise MetadataError(f"{where}: laplace cannot hide a NULL; release a nullable "
                                "number by buckets (NULL is its own bucket)")
    if kind == "buckets" and not column.numeric:
        raise MetadataError(f"{where}: buckets needs an int or float column")

    if kind == "grain":
        if column.type != "date" or not column.bounded:
            raise MetadataError(f"{where}: grain needs a date column with lower and upper")
        if release.grain not in GRAINS:
            raise MetadataError(f"{where}: grain must be one of {', '.join(GRAINS)}, not "
                                f"{release.grain!r}")
