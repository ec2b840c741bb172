"""The salted hash's order over salts, on any engine (tests/engines): is it uniform?"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats
from sqlglot import exp

from dpsql.engines import ir

UNIFORMITY_CASES = [[], [exp.Literal.number(0), exp.Literal.number(7)]]


def assert_uniform_order(opened: Any, fixed: list[exp.Expression]) -> None:
    """Rows that differ in one input only (a unit's rows, ranks or keys, hashed last) come
    first in the salted hash's order equally often over salts: the k rows and g groups a unit
    keeps are a uniformly random choice. DuckDB's own ``hash(salt, ..., x)`` fails this (x's
    hash is XORed in unmixed: a chi-square near 2,300 where 8 degrees of freedom give 8)."""
    rng = np.random.default_rng(20261206)
    salts = [int(v) for v in rng.integers(0, 2 ** 62, size=2700)]
    values = exp.Values(expressions=[exp.Tuple(expressions=[exp.Literal.number(v)])
                                     for v in salts],
                        alias=exp.TableAlias(this=exp.to_identifier("s"),
                                             columns=[exp.to_identifier("salt")]))
    xs = exp.Values(expressions=[exp.Tuple(expressions=[exp.Literal.number(x)])
                                 for x in range(9)],
                    alias=exp.TableAlias(this=exp.to_identifier("v"),
                                         columns=[exp.to_identifier("x")]))
    hashed = ir.SaltedHash(expressions=[exp.column("salt"), *(f.copy() for f in fixed),
                                        exp.column("x")])
    rank = exp.Window(this=exp.RowNumber(), partition_by=[exp.column("salt")],
                      order=exp.Order(expressions=[exp.Ordered(this=hashed)]))
    ranked = exp.select("x", exp.alias_(rank, "r")).from_(values).join(xs, join_type="CROSS")
    first = exp.select("x", exp.alias_(exp.Count(this=exp.Star()), "n")).from_(
        ranked.subquery("f")).where("r = 1").group_by("x")
    counts = {int(x): n for x, n in opened.execute(first.sql(dialect=opened.dialect))[1]}
    assert sum(counts.values()) == len(salts)
    test = stats.chisquare([counts.get(x, 0) for x in range(9)])
    assert test.pvalue > 1e-6, counts  # a correct hash: once in 10^6 seeds
