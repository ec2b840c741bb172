"""The engine IR: what dpsql asks of a SQL engine beyond the SQL all engines mean alike.

The passes (:mod:`dpsql.execution.rewrite`, :mod:`dpsql.query.joins`,
:mod:`dpsql.query.total_expressions`, ...) build the engine's query from sqlglot's own nodes where
every engine means the same thing (CASE, COALESCE, CAST to BIGINT or DOUBLE, ``ROW_NUMBER()``,
``ISNAN``, LEAST/GREATEST that skip NULLs) and from the nodes below where engines differ. Each node
states its semantics here, once; each engine's sqlglot dialect spells it in its Generator's
``TRANSFORMS``:

* :class:`dpsql.engines.duckdb_engine.dialect.DuckDBDialect` (the reference: every query is also
checked
  on DuckDB, see :func:`dpsql.routes.pipeline.check_engine_query`),
* :class:`dpsql.engines.postgres.dialect.PostgresDialect`,
* :class:`dpsql.engines.spark.dialect.SparkDialect`.

A node that a dialect does not spell is refused when the engine's SQL is generated
(:class:`~dpsql.errors.UnsupportedQuery`, before anything is charged), never sent to the
engine under a made-up name. To add an engine: subclass sqlglot's dialect for it, give its
Generator a ``TRANSFORMS`` entry for each node of :data:`NODES` it can compute with the
semantics below, and inherit :class:`Spelling` first.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from sqlglot import exp
from sqlglot.generator import Generator

from dpsql.errors import UnsupportedQuery

#: The salted hash's values are the integers in [0, HASH_RANGE).
HASH_RANGE = 2**64


# sqlglot 30 makes Func a trait beside Expression; before (28, which Superset 6.1's environment
# pins and dpsql's SQLAlchemy dialect is imported in), Func is an Expression already.
_NODE_BASES: tuple[type, ...] = (
    (exp.Func,) if issubclass(exp.Func, exp.Expression) else (exp.Expression, exp.Func))


class EngineNode(*_NODE_BASES):  # type: ignore[misc]
    """An operation whose spelling differs between engines (the base of the IR nodes)."""


class SaltedHash(EngineNode):
    """``SaltedHash(salt, v1, ..., vn)``: a 64-bit hash of the values keyed by the secret
    salt (the query's parameter), as an exact integer in [0, :data:`HASH_RANGE`); deterministic
    for one salt. Only its randomness over salts matters (it orders the rows of contribution
    bounding, and ``hash / 2^64`` is a secret offset in [0, 1)): engines may hash differently."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": True}
    is_var_len_args = True


class SafeCast(exp.TryCast, EngineNode):
    """``CAST(x AS type)`` that never raises: NULL where the value does not convert (DuckDB's
    TRY_CAST). An engine may read a few more spellings as NULL than DuckDB does; never an
    error, never a different non-NULL value. A TryCast is a SafeCast to every dialect."""


class ExactInteger(EngineNode):
    """``x`` (an integer) as the engine's widest exact integer type (HUGEINT, NUMERIC,
    DECIMAL(38, 0)), so that sums of it are exact: at least 10^38 in magnitude."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class ExactSum(exp.Sum, EngineNode):
    """``SUM(x)`` of integer terms, exact (at least 10^38 in magnitude), inside a CTE as in
    the final SELECT: DuckDB's and PostgreSQL's SUMs of BIGINTs are exact already (HUGEINT,
    NUMERIC), Spark's is a BIGINT that overflows. ``wide`` says a term itself may lie beyond
    BIGINT (a weighted term: a row's term times its unit's weight, up to 2^72), which an
    engine that slices BIGINT terms must sum another way."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "wide": False}


class Histogram(EngineNode):
    """``Histogram(bucket)``, an aggregate: per group, the map bucket -> number of its rows
    with that bucket, NULL buckets not counted; an empty group's map is empty. With a
    ``weight`` (an integer column), the map bucket -> sum of its rows' weights."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "weight": False}


class StrictLeast(EngineNode):
    """LEAST that is NULL when any argument is NULL (sqlglot's and SQL's LEAST skip NULLs)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False}
    is_var_len_args = True


class StrictGreatest(EngineNode):
    """GREATEST that is NULL when any argument is NULL."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": False}
    is_var_len_args = True


class DaysSinceEpoch(EngineNode):
    """The number of days from 1970-01-01 to the DATE ``x``, an integer (negative before)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class RoundHalfAway(EngineNode):
    """The DOUBLE ``x`` rounded to the nearest whole number, ties away from zero, as a DOUBLE:
    ``sign(x) * floor(|x| + 1/2)`` computed exactly (no rounding of ``|x| + 1/2``), so
    ``-2.5 -> -3``, ``0.49999999999999994 -> 0``, ``2^52 - 0.5 -> 2^52``; NULL for NULL, NaN
    and the infinities for themselves. Exact on every engine: the one rounding step of
    :func:`dpsql.query.total_expressions.round_digits`, of the fixed-point grid
    (:mod:`dpsql.execution.rewrite`) and of TO_TIMESTAMP's microseconds
    (:func:`dpsql.query.total_expressions._from_epoch`)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class Whole(EngineNode):
    """``x`` itself (a column or another atom), stated to be a whole number (an integer, or a
    DOUBLE holding one) or NULL: what the rewrite knows of its own columns (``__c``, an exact
    sum ``__p0``) and their names do not tell a dialect. Spelled as ``x`` by every engine
    (:data:`COMMON`); PostgreSQL leaves a product or quotient of it unguarded against
    underflow (:mod:`dpsql.engines.postgres.underflow`: its magnitude is 0 or at least 1)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class Chosen(EngineNode):
    """The constant ``x`` itself (a DOUBLE literal), computed from a value chosen from the data
    after the charge (an automatic bound's grid step: :mod:`dpsql.privacy.auto_values`). The
    SQL that runs after the charge must be the one compiled before it up to its constants
    (tests/privacy/test_auto_sql.py), so no dialect may let its value change the SQL's shape:
    PostgreSQL guards a product or quotient of it against underflow whatever its value
    (:mod:`dpsql.engines.postgres.underflow`). Spelled as ``x`` by every engine."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class SmallestBy(EngineNode):
    """``SmallestBy(value, key, n)``, an aggregate: per group, the list of ``value`` of the
    group's rows in ascending order of ``key``, at least the first ``n`` of them (more may
    follow), NULL values kept in their place, rows of equal keys in any order; read with
    :class:`Element`. Engines should keep the ``n`` smallest without sorting the group
    (DuckDB's top-n aggregate): the time must not grow faster than the group's rows
    (:func:`dpsql.execution.local_rows.selection`)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True, "count": True}


class Element(EngineNode):
    """``Element(list, i)``: the ``i``-th value (counted from 1) of a :class:`SmallestBy`
    list, ``i`` at most the length of the list."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}


NODES: tuple[type[EngineNode], ...] = (SaltedHash, SafeCast, ExactInteger, ExactSum, Histogram,
                                       StrictLeast, StrictGreatest, DaysSinceEpoch,
                                       RoundHalfAway, Whole, Chosen, SmallestBy,
                                       Element)
EPOCH = exp.cast(exp.Literal.string("1970-01-01"), "DATE")


def least(*args: exp.Expression) -> exp.Expression:
    """LEAST that skips NULLs, as every engine's own does (sqlglot's default propagates)."""
    return exp.Least(this=args[0], expressions=list(args[1:]), ignore_nulls=True)


def greatest(*args: exp.Expression) -> exp.Expression:
    """GREATEST that skips NULLs, as every engine's own does."""
    return exp.Greatest(this=args[0], expressions=list(args[1:]), ignore_nulls=True)


def strict(generator: Generator, node: exp.Expression) -> str:
    """StrictLeast / StrictGreatest (and sqlglot's LEAST without ``ignore_nulls``) as a CASE
    around the engine's own LEAST (which skips NULLs in DuckDB, PostgreSQL and Spark)."""
    args = [node.this, *node.expressions]
    kind = exp.Least if isinstance(node, StrictLeast | exp.Least) else exp.Greatest
    native = kind(this=args[0].copy(), expressions=[a.copy() for a in args[1:]],
                  ignore_nulls=True)
    missing = exp.or_(*[exp.Is(this=a.copy(), expression=exp.Null()) for a in args])
    return generator.sql(exp.Case(ifs=[exp.If(this=missing, true=exp.Null())], default=native))


def least_or_greatest(generator: Generator, node: exp.Least | exp.Greatest) -> str:
    """sqlglot's LEAST/GREATEST: the engine's own when it skips NULLs (``ignore_nulls``, as
    an analyst's LEAST is read), else NULL-propagating (:func:`strict`)."""
    if node.args.get("ignore_nulls"):
        name = "LEAST" if isinstance(node, exp.Least) else "GREATEST"
        return generator.func(name, node.this, *node.expressions)
    return strict(generator, node)


#: The spellings that do not differ between the engines (each dialect includes them).
COMMON: dict[type[exp.Expr], Any] = {
    StrictLeast: strict, StrictGreatest: strict,
    exp.Least: least_or_greatest, exp.Greatest: least_or_greatest,
    Whole: lambda generator, node: generator.sql(node.this),
    Chosen: lambda generator, node: generator.sql(node.this)}


class Spelling(Generator):
    """Inherited first by each dialect's Generator: an IR node without a ``TRANSFORMS`` entry
    is refused (sqlglot would otherwise write it as a function of the node's name)."""

    __slots__ = ()
    ENGINE: ClassVar[str] = "this engine"

    def function_fallback_sql(self, expression: exp.Func) -> str:
        if isinstance(expression, EngineNode):
            unspelled(self.ENGINE, expression)
        return super().function_fallback_sql(expression)


def unspelled(engine: str, node: exp.Expression) -> NoReturn:
    raise UnsupportedQuery(f"{engine} cannot compute {type(node).__name__} (in "
                          f"{node.sql(dialect='duckdb')[:80]}), which this query needs; "
                          "run it on another engine")
