"""DuckDB's spelling of the engine IR (:mod:`dpsql.engines.ir`): the reference dialect. Every
engine's query is also generated in it and checked on empty tables
(:func:`dpsql.routes.pipeline.check_engine_query`), so a query is refused the same way on every
engine; :meth:`dpsql.engines.DuckDBEngine.compile` runs it."""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.generator import Generator

try:
    from sqlglot.generators.duckdb import DuckDBGenerator
except ImportError:  # sqlglot < 30 (Superset 6.1's environment pins < 29): on the dialect
    DuckDBGenerator = DuckDB.Generator  # type: ignore[misc]

from dpsql.engines import ir


def _smallest(generator: Generator, node: ir.SmallestBy) -> str:
    # MIN_BY(arg, key, n) keeps the n smallest in a heap (no sort of the group) and skips a
    # NULL arg: each value travels in a one-field struct, which is never NULL.
    wrapped = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("v"),
                                                     expression=node.this)])
    smallest = generator.func("MIN_BY", wrapped, node.expression, node.args["count"])
    return f"LIST_TRANSFORM({smallest}, lambda x: x.v)"


def _hash(generator: Generator, node: ir.SaltedHash) -> str:
    # hash(a, ..., z) mixes each input's hash into the running one, but XORs the last input's
    # hash in unmixed: ordered by it over salts, values differing only in the last input (a
    # unit's rows, a rank, a unit's keys) come first far from uniformly (9 rows, 4,000 salts:
    # 87 to 779 times against 444 each, a chi-square of 2,300 on 8 degrees of freedom), which
    # biases which k rows and which g groups a unit keeps. Hashing the hash mixes every bit
    # (chi-square 6-7), and costs less than a constant last input (10M rows: +55 ms, +170 ms).
    return generator.func("hash", generator.func("hash", *node.expressions))


def _days(generator: Generator, node: ir.DaysSinceEpoch) -> str:
    # DATE minus DATE is a BIGINT number of days in DuckDB.
    return generator.sql(exp.Paren(this=exp.Sub(this=node.this, expression=ir.EPOCH.copy())))


def _weighted(node: ir.Histogram) -> exp.Expression:
    """A weighted histogram as one aggregate (the engine's own query gathers it as a GROUP
    BY instead, :mod:`dpsql.engines.histograms`): the group's buckets and weights listed,
    unnested and summed per bucket in a scalar subquery, as the two lists
    :func:`dpsql.engines.histograms.duckdb_gather` returns; NULL buckets not counted."""
    pairs = exp.select(*[exp.alias_(exp.Unnest(expressions=[exp.Anonymous(
        this="list", expressions=[v.copy()])]), name) for v, name in (
            (node.this, "__hb"), (node.args["weight"], "__hw"))])
    summed = exp.select(exp.column("__hb"), exp.alias_(exp.Sum(this=exp.column("__hw")),
                                                        "__hn")).from_(pairs.subquery(
        "__p")).where(exp.Not(this=exp.Is(this=exp.column("__hb"), expression=exp.Null()))
                      ).group_by("__hb")
    lists = exp.Array(expressions=[exp.Anonymous(this="list", expressions=[exp.column(c)])
                                   for c in ("__hb", "__hn")])
    return exp.Subquery(this=exp.select(lists).from_(summed.subquery("__s")))


class DuckDBDialect(DuckDB):
    """DuckDB, with the IR: ``hash`` is a UBIGINT in [0, 2^64), HUGEINT is exact to 1.7e38,
    ``histogram`` is a MAP (the engine runs histograms as a GROUP BY gathered into two lists
    instead, :mod:`dpsql.engines.histograms`), ``TRY_CAST`` is NULL where a value does not
    convert, ``ROUND(x)`` of a double rounds ties away from zero."""

    class Generator(ir.Spelling, DuckDBGenerator):
        ENGINE = "DuckDB"
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
            **DuckDBGenerator.TRANSFORMS, **ir.COMMON,
            ir.SaltedHash: _hash,
            ir.SafeCast: lambda self, e: self.trycast_sql(e),
            ir.ExactInteger: lambda self, e: f"CAST({self.sql(e, 'this')} AS HUGEINT)",
            ir.ExactSum: lambda self, e: self.func("SUM", e.this),
            ir.Histogram: lambda self, e: self.sql(_weighted(e)) if e.args.get("weight")
            else self.func("histogram", e.this),
            ir.DaysSinceEpoch: _days,
            ir.SmallestBy: _smallest,
            ir.Element: lambda self, e: f"({self.sql(e, 'this')})[{self.sql(e, 'expression')}]",
            # ROUND of a double without digits ties away from zero (1.x and 2.x alike).
            ir.RoundHalfAway: lambda self, e: self.func("ROUND", e.this),
        }
