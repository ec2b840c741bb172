"""BigQuery's differential privacy clause, read into the tree so that queries written for it run
unchanged, with BigQuery's (ZetaSQL's) meaning.

    SELECT WITH DIFFERENTIAL_PRIVACY
      OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 12,
              privacy_unit_column = person_id)
      category, COUNT(*), AVG(amount, contribution_bounds_per_group => (0, 100))
    FROM visits GROUP BY category

**Parsing.** :data:`DIALECT` (``"dpsql"``) is DuckDB's SQL with BigQuery's clause: the clause
becomes a :class:`DifferentialPrivacy` node on its SELECT (arg ``differential_privacy``, one
:class:`exp.EQ` per option) and a call with named arguments ``name => value`` a
:class:`NamedArguments` node around the call (one :class:`exp.Kwarg` per argument, with the
position of its name). :func:`clause_tree` parses; :func:`lowered` reads the options off the
tree (:class:`DPOptions`) and rewrites the tree, node by node, into the SQL the checker knows;
:func:`resolve` is what the front doors and the planner call. Nothing is edited as text: a
query with the clause is planned from the SQL its lowered tree generates. A malformed clause is
a :class:`~dpsql.errors.SQLSyntaxError` with the position of the offending token; an unknown
option or a bad value a refusal before planning. Nothing here reads data.

**How each piece maps.**

* ``epsilon``, ``delta``: the query's own epsilon and delta, in place of the front door's
  (charged to the analyst's budget as any query's). Both are required, as in BigQuery, whose
  grammar writes them without brackets (``OPTIONS(epsilon = expression, delta = expression,
  [max_groups_contributed = expression], privacy_unit_column = column_name)``): a clause
  without either is refused (:class:`~dpsql.errors.InvalidPrivacyParameter`), never given the
  front door's default; outside the clause dpsql's defaults stay. ``privacy_unit_column`` stays
  optional: the unit is the owner's declaration;
* ``max_groups_contributed`` (or ``kappa``), ``max_rows_contributed``: the query's contribution
  bounds g and k (:class:`~dpsql.metadata.contribution.ContributionBounds`, within the owner's
  caps). A g written here always binds, as BigQuery's: each unit keeps at most g of the
  query's groups (of a joined relation's too), chosen at random, even where the groups are a
  public domain and the noise would not need it (outside the clause dpsql drops groups beyond
  g only where that lowers the noise: :func:`dpsql.privacy.aggregates.groups_cap`);
* ``privacy_unit_column``: must name the table's declared privacy unit (the owner's choice);
* ``group_selection_strategy``: ``LAPLACE_THRESHOLD`` or ``PUBLIC_GROUPS``, accepted: dpsql
  releases the keys of a declared public domain and thresholds the others, in both cases;
* ``contribution_bounds_per_row => (lo, hi)`` on SUM, AVG, PERCENTILE_CONT, VAR_POP,
  STDDEV_POP: each row's argument is clamped to ``[lo, hi]`` and a NULL stays NULL (as in
  ZetaSQL: a NULL row is skipped, never read as ``lo``): ``LEAST(GREATEST(x, lo), hi)`` of a
  column (which the checker reads clamped, NULL kept:
  :func:`~dpsql.query.total_expressions.clamped_column`), ``CASE WHEN e IS NULL THEN NULL ELSE
  LEAST(GREATEST(e, lo), hi) END`` of any other expression; on COUNT it is dropped (clamping a
  value never makes it NULL).
* ``contribution_bounds_per_group => (lo, hi)``: ZetaSQL clamps each privacy unit's *own*
  aggregate in a group, and a unit with no non-NULL value there contributes nothing. SUM: the
  unit's total (:data:`SUM_PER_GROUP`); AVG: the unit's average, and the AVG is the average
  over units of their clamped averages (:data:`AVG_PER_GROUP`); both answered on each unit's
  per-group aggregates (:mod:`dpsql.privacy.aggregates`, ``_per_group_sum`` and
  ``_per_person_avg``, with their sensitivities). COUNT: the unit's count in the group,
  clamped (:data:`SUM_PER_GROUP` of 1 per counted row, 0 for a NULL one: ``COUNT(*,
  contribution_bounds_per_group => (0, 1))`` counts the units in each group); the others
  (VAR, STDDEV, PERCENTILE_CONT) are clamped per row where that is ZetaSQL's answer (a unit
  contributes one row, k = 1), else refused.
* **Without bounds** inside the clause the owner's declared (or automatic) bounds of the column
  clamp each row (the notes say which bounds were used). AVG inside the clause is always
  ZetaSQL's average of each unit's average (:data:`AVG_PER_GROUP` with the bounds of ``x``,
  every unit's average lying within them), so that its meaning never depends on whether bounds
  were written; outside the clause AVG keeps dpsql's row-level meaning. SUM and COUNT without
  bounds are dpsql's row-level sums (each unit's rows capped at k): where no bound bites this
  is ZetaSQL's sum of each unit's total.
* ``report_format => 'JSON'`` on an aggregate: the call becomes ``DPSQL_REPORT(call)``
  (:data:`REPORT`), which the post-processing query answers with ZetaSQL's JSON report of the
  call's released value (:mod:`dpsql.execution.reports`): a whole output column, or a value
  an outer expression reads (``SUM(x, report_format => 'JSON').result.value``,
  ``JSON_QUERY_ARRAY(APPROX_QUANTILES(x, 4, report_format => 'JSON').result)``).
  ``'PROTO'`` is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NoReturn

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokens import TokenType  # type: ignore[attr-defined]

from dpsql.errors import InvalidPrivacyParameter, SQLSyntaxError, UnsupportedQuery
from dpsql.metadata.contribution import ContributionBounds
from dpsql.query.bigquery_json import lower_json_functions

#: ``SUM(x, contribution_bounds_per_group => (lo, hi))`` as dpsql's SQL reads it: the SUM of
#: each unit's total in a group clamped to ``[lo, hi]`` (dpsql.privacy.aggregates, ``_sum``)
SUM_PER_GROUP = "DPSQL_SUM_PER_GROUP"
#: ZetaSQL's AVG: ``DPSQL_AVG_PER_GROUP(x, lo, hi)`` the average over units of each unit's
#: average in the group clamped to ``[lo, hi]``; ``DPSQL_AVG_PER_GROUP(x)`` with the bounds of x
AVG_PER_GROUP = "DPSQL_AVG_PER_GROUP"
#: ``report_format => 'JSON'``: ``DPSQL_REPORT(aggregate)``, the aggregate's JSON report, built
#: by post-processing from its released value (dpsql.execution.reports)
REPORT = "DPSQL_REPORT"
#: The name of the dialect (:class:`DPSQL`) that parses the clause
DIALECT = "dpsql"

_OPTIONS = {"epsilon", "delta", "max_groups_contributed", "kappa", "max_rows_contributed",
            "privacy_unit_column", "group_selection_strategy"}
_STRATEGIES = {"LAPLACE_THRESHOLD", "PUBLIC_GROUPS"}
_CLAMPS = {"contribution_bounds_per_group", "contribution_bounds_per_row"}
_NAMED = _CLAMPS | {"report_format"}


class DifferentialPrivacy(exp.Expression):
    """``WITH DIFFERENTIAL_PRIVACY OPTIONS(name = value, ...)`` on a SELECT (its arg
    ``differential_privacy``): one :class:`exp.EQ` per option, in the order written."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False}


class NamedArguments(exp.Expression):
    """A call with BigQuery's named arguments: ``this``, the call without them;
    ``expressions``, one :class:`exp.Kwarg` per ``name => value`` (``meta["position"]``: the
    1-based offset of its name in the text)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": True}


def _kwarg(parser: Any, expressions: list[exp.Expr]) -> exp.Expr:
    name = parser._tokens[parser._index - 2]  # name =>
    kwarg = exp.Kwarg(this=exp.var(expressions[0].name),
                      expression=parser._parse_disjunction())
    kwarg.meta["position"] = name.start + 1
    return kwarg


class _Parser(DuckDBParser):
    """DuckDB's parser, and BigQuery's clause: ``name => value`` is a Kwarg (as in sqlglot)
    that remembers where its name is; a call's Kwargs are taken out of its arguments before
    sqlglot builds it (SUM takes one argument) and kept around it in a NamedArguments node
    (``_named``: one list per call being parsed, innermost last)."""

    LAMBDAS: ClassVar[dict[Any, Any]] = {**DuckDBParser.LAMBDAS, TokenType.FARROW: _kwarg}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._named: list[list[exp.Kwarg]] = []

    def _parse_function_args(self, alias: bool = False) -> list[exp.Expr]:
        args = super()._parse_function_args(alias)
        if self._named:
            for distinct in (a for a in args if isinstance(a, exp.Distinct)):
                # COUNT(DISTINCT x, name => value): the named arguments are the call's
                self._named[-1].extend(e for e in distinct.expressions
                                       if isinstance(e, exp.Kwarg))
                distinct.set("expressions", [e for e in distinct.expressions
                                             if not isinstance(e, exp.Kwarg)])
            self._named[-1].extend(a for a in args if isinstance(a, exp.Kwarg))
            args = [a for a in args if not isinstance(a, exp.Kwarg)]
        return args

    def _parse_disjunction(self) -> exp.Expr | None:
        """A DISTINCT list's item, or a named argument after it (``name => value``)."""
        if (self._named and self._curr and self._next
                and self._next.token_type == TokenType.FARROW):
            self._advance(2)
            return _kwarg(self, [exp.var(self._tokens[self._index - 2].text)])
        return super()._parse_disjunction()

    def _parse_function_call(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        self._named.append([])
        name = self._curr.text if self._curr else ""
        try:
            result = super()._parse_function_call(*args, **kwargs)
        finally:
            named = self._named.pop()
        if not named or result is None:
            return result
        call = result.this if isinstance(result, exp.Window) else result
        wrapped = NamedArguments(this=call, expressions=named)
        wrapped.meta["name"] = name  # as written, for DPSQL's generator
        if call is result:
            return wrapped
        result.set("this", wrapped)
        return result

    def _parse_select_query(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        clause = None
        if (self._curr and self._curr.token_type == TokenType.SELECT and self._next
                and self._next.token_type == TokenType.WITH
                and self._index + 2 < len(self._tokens)
                and self._tokens[self._index + 2].text.upper() == "DIFFERENTIAL_PRIVACY"):
            select = self._curr
            self._advance(3)
            clause = self._clause()
            # The SELECT again, just before its projections, so that the SELECT is parsed as
            # any other: the clause's last token is read, the SELECT stands in its place.
            self._tokens[self._index - 1] = select
            self._retreat(self._index - 1)
        elif (self._curr and self._curr.token_type == TokenType.SELECT and self._next
              and self._next.token_type == TokenType.WITH
              and self._index + 2 < len(self._tokens)
              and self._tokens[self._index + 2].text.upper() == "ANONYMIZATION"):
            raise UnsupportedQuery("SELECT WITH ANONYMIZATION is BigQuery's deprecated clause; "
                                   "write SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)")
        query = super()._parse_select_query(*args, **kwargs)
        first = query
        while isinstance(first, exp.SetOperation):  # the clause is its first arm's
            first = first.this
        if clause is not None and isinstance(first, exp.Select):
            first.set("differential_privacy", clause)
        return query

    def _clause(self) -> DifferentialPrivacy:
        options: list[exp.Expr] = []
        if not self._match_text_seq("OPTIONS"):
            return DifferentialPrivacy(expressions=options)
        if not self._match(TokenType.L_PAREN):
            _syntax(self._curr or self._prev, "WITH DIFFERENTIAL_PRIVACY OPTIONS takes a list "
                    "in parentheses: OPTIONS(epsilon = 1, delta = 1e-6)")
        while not self._match(TokenType.R_PAREN):
            start = self._curr
            if not start or not self._next or self._next.token_type != TokenType.EQ:
                _syntax(start or self._prev, "OPTIONS takes name = value pairs, not "
                        f"{start.text if start else ''!r}")
            self._advance(2)
            option = exp.EQ(this=exp.column(start.text), expression=self._option_value())
            option.meta["position"] = start.start + 1
            options.append(option)
            if not self._match(TokenType.COMMA) and not (self._curr and self._curr.token_type
                                                         == TokenType.R_PAREN):
                _syntax(self._curr or self._prev, "WITH DIFFERENTIAL_PRIVACY OPTIONS( is not "
                        "closed; close it with )")
        return DifferentialPrivacy(expressions=options)

    def _option_value(self) -> exp.Expr:
        """An option's value: one word (a keyword such as ANY too, refused by name later) or
        an expression (a number, a negative one, a quoted or backquoted name)."""
        if self._curr and self._next and self._next.token_type in (TokenType.COMMA,
                                                                   TokenType.R_PAREN):
            self._advance()
            token = self._prev
            if token.token_type in (TokenType.NUMBER, TokenType.STRING):
                return exp.Literal(this=token.text,
                                   is_string=token.token_type == TokenType.STRING)
            return exp.column(token.text, quoted=token.token_type == TokenType.IDENTIFIER)
        value = self._parse_assignment()
        if value is None:
            _syntax(self._curr or self._prev, "OPTIONS takes name = value pairs: give each "
                    "option a value")
        return value


def _syntax(token: Any, message: str) -> NoReturn:
    raise SQLSyntaxError(message, token.start + 1 if token is not None else None)


def _clause_sql(generator: Any, clause: DifferentialPrivacy) -> str:
    options = ", ".join(generator.sql(option) for option in clause.expressions)
    return f"WITH DIFFERENTIAL_PRIVACY OPTIONS({options})"


def _named_sql(generator: Any, node: NamedArguments) -> str:
    """The call with its named arguments, under the name it was written with."""
    call = node.this
    args: list[exp.Expr] = []
    for key in call.arg_types:
        value = call.args.get(key)
        args.extend(value if isinstance(value, list) else [] if value is None else [value])
    name = node.meta.get("name") or call.sql_name()
    return str(generator.func(name, *args, *node.expressions))


class _Generator(DuckDB.Generator):  # type: ignore[misc]
    """DuckDB's SQL, and the clause and named arguments written back (a part of a composite
    query as a query of its own: :mod:`dpsql.query.composite`)."""

    TRANSFORMS: ClassVar[dict[Any, Any]] = {**DuckDB.Generator.TRANSFORMS,
                                            DifferentialPrivacy: _clause_sql,
                                            NamedArguments: _named_sql}

    def select_sql(self, expression: exp.Select) -> str:
        clause = expression.args.get("differential_privacy")
        if clause is None:
            return str(super().select_sql(expression))
        shown = expression.copy()
        shown.set("differential_privacy", None)
        shown.set("operation_modifiers", [clause.copy(),
                                          *(expression.args.get("operation_modifiers") or [])])
        return str(super().select_sql(shown))


class DPSQL(DuckDB):
    """DuckDB's SQL and BigQuery's differential privacy clause (registered as ``"dpsql"``),
    with BigQuery's backquoted names (``privacy_unit_column = `uid` ``)."""

    class Tokenizer(DuckDB.Tokenizer):
        IDENTIFIERS: ClassVar[list[Any]] = [*DuckDB.Tokenizer.IDENTIFIERS, "`"]

    Parser = _Parser
    Generator = _Generator


@dataclass(frozen=True)
class DPOptions:
    epsilon: float | None = None
    delta: float | None = None
    bounds: ContributionBounds | None = None
    #: whether an aggregate asks for ZetaSQL's JSON report (``report_format => 'JSON'``)
    report: bool = False


def might_hold_clause(sql: str) -> bool:
    """Whether ``sql`` may hold the clause or a named argument (the common case: neither)."""
    lowered = sql.lower()
    return "differential_privacy" in lowered or "=>" in sql or "anon" in lowered


def clause_tree(sql: str) -> exp.Expr:
    """``sql`` parsed in :data:`DIALECT`, the clause and named arguments as nodes."""
    from dpsql.query.parse import parse_query  # parse imports nothing of this module's users
    return parse_query(sql, DIALECT)


def split(sql: str) -> tuple[str, DPOptions | None]:
    """``sql`` without BigQuery's clause and named arguments (the lowered tree's SQL), and the
    options it set (None: no clause and no named argument, the text returned as it came)."""
    if not might_hold_clause(sql):
        return sql, None
    tree = clause_tree(sql)  # its refusals are the parse pass's, with the same positions
    _refuse_anonymization(tree)
    if not _has_clause(tree) and tree.find(NamedArguments) is None:
        return sql, None
    if isinstance(tree, exp.SetOperation) or private_subqueries(tree):
        return sql, None  # a composite: its parts are resolved one by one (query.composite)
    tree, options = lowered(tree)
    return tree.sql(dialect="duckdb"), options


def _has_clause(tree: exp.Expr) -> bool:
    return any(s.args.get("differential_privacy") for s in tree.find_all(exp.Select))


def private_subqueries(tree: exp.Expr) -> list[exp.Subquery]:
    """The scalar subqueries of ``tree`` whose SELECT holds the clause: not in FROM or JOIN
    (a query over a private query's answer: :mod:`dpsql.query.over_released`) nor in IN (a
    series limit: :mod:`dpsql.routes.series`), whose clause is lowered with the whole query's."""
    return [s for s in tree.find_all(exp.Subquery)
            if isinstance(s.this, exp.Select) and s.this.args.get("differential_privacy")
            and not isinstance(s.parent, exp.From | exp.Join | exp.In)]


def _refuse_anonymization(tree: exp.Expr) -> None:
    """BigQuery's deprecated ``WITH ANONYMIZATION`` and its ``ANON_`` aggregates clamp with
    other semantics (``CLAMPED BETWEEN``, ANON_AVG per unit's average): refused, naming the
    current syntax, never read as if they were it."""
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and str(node.this).upper().startswith("ANON_"):
            name = str(node.this).upper().removeprefix("ANON_")
            raise UnsupportedQuery(f"{node.this} is BigQuery's deprecated anonymization "
                                   f"aggregate; write {name}(...) (with contribution_bounds_"
                                   "per_row => (lower, upper) to clamp each row)")


def lowered(tree: exp.Expr) -> tuple[exp.Expr, DPOptions]:
    """``tree`` (from :func:`clause_tree`, mutated) in the SQL the checker knows, and the
    options its clause and named arguments set (module docstring)."""
    clauses = [s for s in tree.find_all(exp.Select) if s.args.get("differential_privacy")]
    if len(clauses) > 1:
        raise UnsupportedQuery("a query takes one WITH DIFFERENTIAL_PRIVACY clause, on its "
                               "outermost SELECT; remove the others")
    options = DPOptions()
    _keep_names(tree, clauses[0] if clauses else None)
    if clauses:
        options = _options_of(clauses[0].args["differential_privacy"])
        clauses[0].set("differential_privacy", None)
    if clauses:  # ZetaSQL's AVG of each unit's average, the owner's bounds (module docstring)
        for avg in list(clauses[0].find_all(exp.Avg)):
            if not isinstance(avg.parent, NamedArguments):
                avg.replace(exp.Anonymous(this=AVG_PER_GROUP, expressions=[avg.this]))
    clamps: list[str] = []
    reports: list[bool] = []
    for node in list(tree.find_all(NamedArguments)):
        node.replace(_lowered_call(node, clamps, reports))
    lower_json_functions(tree)  # BigQuery's JSON functions, as users read reports with them
    for quantiles in list(tree.find_all(exp.ApproxQuantiles)):
        # DuckDB writes it as APPROX_QUANTILE(x, [...]), which reads as another call: kept as
        # written, so that the SQL planned reads as the analyst's (the checker refuses it)
        quantiles.replace(exp.Anonymous(this="APPROX_QUANTILES", expressions=[
            a for a in (quantiles.this, quantiles.expression) if a is not None]))
    if clamps:  # checked against the k in force once bound (module docstring)
        bounds = replace(options.bounds or ContributionBounds(), per_group_clamps=tuple(clamps))
        options = replace(options, bounds=bounds)
    if reports:
        options = replace(options, report=True)
    return tree, options


def _keep_names(tree: exp.Expr, clause: exp.Select | None) -> None:
    """Alias each output column that lowering changes with the name it has as written,
    without its named arguments (``AVG(amount)``, not dpsql's internal form)."""
    for select in tree.find_all(exp.Select):
        for projection in select.expressions:
            if isinstance(projection, exp.Alias | exp.Star) or not (
                    projection.find(NamedArguments)
                    or (select is clause and projection.find(exp.Avg))):
                continue
            shown = projection.transform(_as_written)
            # BigQuery names a field access by its last field (``r.result.value``: value)
            text = shown.name if isinstance(shown, exp.Dot) else shown.sql(dialect="duckdb")
            name = exp.to_identifier(text, quoted=True)
            projection.replace(exp.Alias(this=projection.copy(), alias=name))


def _as_written(node: exp.Expr) -> exp.Expr:
    """``node`` as the analyst wrote it: without named arguments, APPROX_QUANTILES by name."""
    if isinstance(node, NamedArguments):
        return _as_written(node.this)  # the call taken out is not visited again
    if isinstance(node, exp.ApproxQuantiles):
        return exp.Anonymous(this="APPROX_QUANTILES", expressions=[
            a for a in (node.this, node.expression) if a is not None])
    return node


def _options_of(clause: DifferentialPrivacy) -> DPOptions:
    values: dict[str, exp.Expr] = {}
    for option in clause.expressions:
        name = option.this.name.lower()
        if name not in _OPTIONS:
            raise UnsupportedQuery(f"{name} is not an option of WITH DIFFERENTIAL_PRIVACY dpsql "
                                   f"knows; use {', '.join(sorted(_OPTIONS))}")
        if name in values:
            raise UnsupportedQuery(f"option {name} is given twice; give it once")
        values[name] = option.expression
    if "kappa" in values and "max_groups_contributed" in values:
        raise UnsupportedQuery("kappa and max_groups_contributed name the same option; give "
                               "one")
    strategy = values.get("group_selection_strategy")
    if strategy is not None and strategy.name.upper() not in _STRATEGIES:
        raise UnsupportedQuery(f"group_selection_strategy = {strategy.sql()} is not one of "
                               f"{', '.join(sorted(_STRATEGIES))}")
    groups = values.get("max_groups_contributed", values.get("kappa"))
    unit = values.get("privacy_unit_column")
    bounds = ContributionBounds(_whole(values.get("max_rows_contributed"), "max_rows_contributed"),
                                _whole(groups, "max_groups_contributed"),
                                unit.name if unit is not None else None,
                                groups_bound=groups is not None)
    epsilon, delta = _number(values.get("epsilon"), "epsilon"), _number(values.get("delta"),
                                                                        "delta")
    missing = [name for name in ("epsilon", "delta") if name not in values]
    if missing:  # BigQuery's grammar: OPTIONS(epsilon = expression, delta = expression, ...)
        raise InvalidPrivacyParameter(
            f"WITH DIFFERENTIAL_PRIVACY needs {' and '.join(missing)} in its OPTIONS, as in "
            f"BigQuery: write OPTIONS(epsilon = ..., delta = ...) (delta = 0 for pure epsilon-"
            "DP, where no group key is released by thresholding)")
    return DPOptions(epsilon, delta,
                     bounds if bounds != ContributionBounds() else None)


def _value(node: exp.Expr) -> float | None:
    """A number literal's value (negated under a minus), None for anything else."""
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string):
        return None
    try:
        value = float(inner.this)
    except ValueError:
        return None
    return -value if negative else value


def _number(node: exp.Expr | None, name: str) -> float | None:
    if node is None:
        return None
    value = _value(node)
    if value is None:
        raise InvalidPrivacyParameter(f"{name} = {node.sql()} must be a number")
    return value


def _whole(node: exp.Expr | None, name: str) -> int | None:
    if node is None:
        return None
    text = node.this if isinstance(node, exp.Literal) and not node.is_string else ""
    if not (isinstance(text, str) and text.isascii() and text.isdigit()):
        raise InvalidPrivacyParameter(f"{name} = {node.sql()} must be a whole number >= 1 (rows "
                                      "or groups one privacy unit may contribute)")
    return int(text)


def _lowered_call(node: NamedArguments, clamps: list[str], reports: list[bool]) -> exp.Expr:
    """The call of ``node`` in dpsql's SQL (module docstring); the per-row form of per-group
    bounds on VAR and the rest kept in ``clamps``, one True in ``reports`` for a report."""
    call: exp.Expr = node.this
    report = False
    for kwarg in node.expressions:
        name = kwarg.this.name.lower()
        if name == "report_format":
            _check_format(kwarg)
            report = True
        elif name not in _CLAMPS:
            raise UnsupportedQuery(f"named argument {name} => is not one dpsql knows; use "
                                   f"{', '.join(sorted(_NAMED))}")
    for kwarg in node.expressions:
        name = kwarg.this.name.lower()
        if name in _CLAMPS:
            call = _clamped(call, name, *_pair(kwarg, name), clamps)
    if not report:
        return call
    reports.append(True)
    return exp.Anonymous(this=REPORT, expressions=[call])


def _check_format(kwarg: exp.Kwarg) -> None:
    """``report_format => 'JSON'`` (or ``JSON`` unquoted); PROTO and others refused."""
    value = kwarg.expression
    if not (isinstance(value, exp.Literal) and value.is_string) and not isinstance(
            value, exp.Column):
        raise UnsupportedQuery(f"report_format => {value.sql()}: write report_format => 'JSON'")
    if value.name.upper() == "PROTO":
        raise UnsupportedQuery("report_format => 'PROTO' (ZetaSQL's protocol buffer) is not "
                               "supported; write report_format => 'JSON' for the same report "
                               "as a JSON value")
    if value.name.upper() != "JSON":
        raise UnsupportedQuery(f"report_format => {value.sql()} is not a format dpsql knows; "
                               "write report_format => 'JSON'")


def _pair(kwarg: exp.Kwarg, name: str) -> tuple[exp.Expr, exp.Expr]:
    value = kwarg.expression
    parts = value.expressions if isinstance(value, exp.Tuple) else []
    numbers = [_value(p) for p in parts]
    if len(numbers) != 2 or None in numbers:
        raise UnsupportedQuery(f"{name} => takes (lower, upper), two numbers, not "
                               f"{value.sql()}")
    if float(numbers[0] or 0.0) > float(numbers[1] or 0.0):
        raise UnsupportedQuery(f"{name} => {value.sql()}: lower is above upper")
    return parts[0], parts[1]


def _clamped(call: exp.Expr, name: str, lo: exp.Expr, hi: exp.Expr,
             clamps: list[str]) -> exp.Expr:
    if isinstance(call, exp.Count):
        if name != "contribution_bounds_per_group":
            return call  # clamping a value never makes it NULL: the count is unchanged
        return exp.Anonymous(this=SUM_PER_GROUP, expressions=[_counted(call), lo.copy(),
                                                              hi.copy()])
    function = call.sql(dialect="duckdb").split("(", 1)[0]
    if name == "contribution_bounds_per_group" and isinstance(call, exp.Sum | exp.Avg):
        kind = SUM_PER_GROUP if isinstance(call, exp.Sum) else AVG_PER_GROUP
        return exp.Anonymous(this=kind, expressions=[call.this, lo.copy(), hi.copy()])
    if name == "contribution_bounds_per_group":  # the row's clamp: checked once bound
        clamps.append(f"{function}(x, contribution_bounds_per_row => ({lo.sql()}, "
                      f"{hi.sql()}))")
    _first_argument(call, lambda arg: row_clamp(arg, lo, hi))
    return call


def _counted(count: exp.Count) -> exp.Expr:
    """What ``count`` adds per row: ZetaSQL's per-group COUNT is the sum over units of each
    unit's count in the group, clamped (:data:`SUM_PER_GROUP` of 1 per counted row)."""
    arg = count.this
    if isinstance(arg, exp.Distinct):
        raise UnsupportedQuery("COUNT(DISTINCT x, contribution_bounds_per_group => ...) is not "
                               "supported: a unit's distinct values are bounded by "
                               "max_rows_contributed; leave the bounds out")
    if arg is None or isinstance(arg, exp.Star):
        return exp.Literal.number(1)
    return exp.Case(ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.Null()),
                                true=exp.Literal.number(0))], default=exp.Literal.number(1))


def counted_as_written(arg: exp.Expr | None) -> str | None:
    """``COUNT(*)`` or ``COUNT(x)`` if ``arg`` is what :func:`_counted` adds per row (the
    notes name the COUNT the analyst wrote), else None."""
    one, zero = exp.Literal.number(1), exp.Literal.number(0)
    if arg == one:
        return "COUNT(*)"
    if not isinstance(arg, exp.Case) or arg.args.get("default") != one:
        return None
    ifs = arg.args.get("ifs") or []
    if len(ifs) == 1 and isinstance(ifs[0].this, exp.Is) and ifs[0].args.get("true") == zero:
        return f"COUNT({ifs[0].this.this.sql(dialect='duckdb')})"
    return None


def _first_argument(call: exp.Expr, change: Callable[[exp.Expr], exp.Expr]) -> None:
    if isinstance(call, exp.Anonymous):
        call.expressions[0].replace(change(call.expressions[0]))
    elif call.this is not None:
        call.set("this", change(call.this))


def row_clamp(arg: exp.Expr, lo: exp.Expr, hi: exp.Expr) -> exp.Expr:
    """``arg`` clamped to ``[lo, hi]``, NULL kept (module docstring)."""
    clamped = exp.Least(this=exp.Greatest(this=arg, expressions=[lo.copy()], ignore_nulls=True),
                        expressions=[hi.copy()], ignore_nulls=True)
    if isinstance(arg, exp.Column):
        return clamped  # read clamped by the checker, NULL kept (clamped_column)
    return exp.Case(ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.Null()),
                                true=exp.Null())], default=clamped)


def resolve(sql: str, epsilon: float | None, delta: float,
            bounds: ContributionBounds | None) -> tuple[str, float | None, float,
                                                        ContributionBounds | None]:
    """The query without the clause, and the privacy parameters and bounds in force: the
    clause's own over the front door's (a session's settings, a connection's arguments)."""
    resolved = resolve_query(sql, epsilon, delta, bounds)
    return resolved.sql, resolved.epsilon, resolved.delta, resolved.bounds


@dataclass(frozen=True)
class Resolved:
    """:func:`resolve_query`'s answer: what is planned, with what, and whether it asks for
    a JSON report (``report_format``)."""

    sql: str
    epsilon: float | None
    delta: float
    bounds: ContributionBounds | None
    report: bool = False


def resolve_query(sql: str, epsilon: float | None, delta: float,
                  bounds: ContributionBounds | None) -> Resolved:
    """:func:`resolve`, and whether ``report_format => 'JSON'`` asks for a report."""
    sql, options = split(sql)
    return _resolved(sql, options, epsilon, delta, bounds)


def resolve_tree(tree: exp.Expr, epsilon: float | None, delta: float,
                 bounds: ContributionBounds | None) -> Resolved:
    """:func:`resolve_query` of a tree from :func:`clause_tree` (mutated): one part of a
    composite query (:mod:`dpsql.query.composite`), resolved as if sent alone."""
    _refuse_anonymization(tree)
    if not _has_clause(tree) and tree.find(NamedArguments) is None:
        return Resolved(tree.sql(dialect="duckdb"), epsilon, delta, bounds)
    tree, options = lowered(tree)
    return _resolved(tree.sql(dialect="duckdb"), options, epsilon, delta, bounds)


def _resolved(sql: str, options: DPOptions | None, epsilon: float | None, delta: float,
              bounds: ContributionBounds | None) -> Resolved:
    if options is None:
        return Resolved(sql, epsilon, delta, bounds)
    if options.bounds is not None:
        bounds = (bounds or ContributionBounds()).merged(options.bounds)
    return Resolved(sql, options.epsilon if options.epsilon is not None else epsilon,
                    options.delta if options.delta is not None else delta, bounds,
                    options.report)
