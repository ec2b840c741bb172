"""BigQuery's differential privacy clause, read so that queries written for it run unchanged.

    SELECT WITH DIFFERENTIAL_PRIVACY
      OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 12,
              privacy_unit_column = person_id)
      category, COUNT(*), AVG(amount, contribution_bounds_per_group => (0, 100))
    FROM visits GROUP BY category

:func:`split` takes the clause out of the text, before it is parsed, and returns the query in
dpsql's own SQL with the :class:`DPOptions` it set. How each piece maps:

* ``epsilon``, ``delta``: the query's own epsilon and delta, in place of the front door's
  (charged to the analyst's budget as any query's);
* ``max_groups_contributed`` (or ``kappa``), ``max_rows_contributed``: the query's contribution
  bounds g and k (:class:`~dpsql.metadata.contribution.ContributionBounds`, within the owner's
  caps);
* ``privacy_unit_column``: must name the table's declared privacy unit (the owner's choice);
* ``group_selection_strategy``: ``LAPLACE_THRESHOLD`` or ``PUBLIC_GROUPS``, accepted: dpsql
  releases the keys of a declared public domain and thresholds the others, in both cases;
* ``contribution_bounds_per_row => (lo, hi)`` on SUM, AVG, PERCENTILE_CONT, VAR_POP,
  STDDEV_POP: each row's argument is clamped to ``[lo, hi]`` (``LEAST(GREATEST(x, lo), hi)``),
  which the checker's interval arithmetic then uses; on COUNT it is dropped (clamping a value
  never makes it NULL).
* ``contribution_bounds_per_group => (lo, hi)``: BigQuery clamps a unit's *total* within a
  group (its per-(unit, group) partial aggregate), and for AVG averages the units' averages.
  On SUM dpsql computes exactly that: the call becomes ``DPSQL_SUM_PER_GROUP(x, lo, hi)``
  (:data:`SUM_PER_GROUP`), answered on each unit's totals with the groups cap g applied
  (:func:`dpsql.privacy.aggregates._per_group_sum`: L1 = g' max(|lo|, |hi|)). On AVG and the
  others answering with per-row clamping would be another query's answer; where the two
  coincide it is accepted, checked once the query is bound
  (:func:`dpsql.metadata.contribution.check_per_group`, the k in force known): when a unit
  contributes one row (k = 1: a one-row-per-unit table, or ``max_rows_contributed = 1``),
  where a unit's total in its one group *is* its row, clamped per row here; on COUNT when
  ``lo <= 0`` and ``hi >= k``, since a unit's count in a group is already in ``[0, k]``.
  Otherwise it is refused, naming ``contribution_bounds_per_row`` or ``max_rows_contributed``.
* ``report_format`` (ZetaSQL's ``'JSON'``/``'PROTO'``, a structured value with its noise
  interval, one cell instead of a number; BigQuery's own functions do not take it): refused,
  since the table would differ; dpsql returns the value, and its accuracy through
  ``--accuracy`` or the DB-API's ``cursor.accuracy``.

Nothing here reads data; an unknown option or a malformed value is refused before planning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from dpsql.errors import InvalidPrivacyParameter, UnsupportedQuery
from dpsql.metadata.contribution import ContributionBounds

_TOKENIZER = DuckDB().tokenizer_class()
_OPTIONS = {"epsilon", "delta", "max_groups_contributed", "kappa", "max_rows_contributed",
            "privacy_unit_column", "group_selection_strategy"}
_STRATEGIES = {"LAPLACE_THRESHOLD", "PUBLIC_GROUPS"}
_CLAMPS = {"contribution_bounds_per_group", "contribution_bounds_per_row"}
#: ``SUM(x, contribution_bounds_per_group => (lo, hi))`` as dpsql's SQL reads it: the SUM of
#: each unit's total in a group clamped to ``[lo, hi]`` (dpsql.privacy.aggregates, ``_sum``)
SUM_PER_GROUP = "DPSQL_SUM_PER_GROUP"


@dataclass(frozen=True)
class DPOptions:
    epsilon: float | None = None
    delta: float | None = None
    bounds: ContributionBounds | None = None


def split(sql: str) -> tuple[str, DPOptions | None]:
    """``sql`` without BigQuery's clause and named arguments, and the options it set (None:
    no clause and no named argument, the text returned as it came)."""
    lowered = sql.lower()
    if "differential_privacy" not in lowered and "=>" not in sql and "anon" not in lowered:
        return sql, None  # the common case: nothing to tokenize
    try:
        tokens = _TOKENIZER.tokenize(sql)
    except TokenError:
        return sql, None  # the parser refuses it, with its own message
    _refuse_anonymization(tokens)
    edits: list[tuple[int, int, str]] = []
    options = _clause(sql, tokens, edits)
    # contribution_bounds_per_group: COUNT's (lo, hi); the per-row form of the others'
    counts: list[tuple[float, float]] = []
    clamps: list[str] = []
    _named_arguments(sql, tokens, edits, counts, clamps)
    if options is None and not edits:
        return sql, None
    for start, end, text in sorted(edits, reverse=True):
        # Padded to the length it replaces (every replacement is shorter), so that a syntax
        # error's position in the result is its position in the analyst's text.
        sql = sql[:start] + text.ljust(end - start) + sql[end:]
    options = options or DPOptions()
    if counts or clamps:  # checked against the k in force once bound (module docstring)
        tightest = (max(lo for lo, _ in counts), min(hi for _, hi in counts)) if counts \
            else None
        bounds = replace(options.bounds or ContributionBounds(), count_per_group=tightest,
                         per_group_clamps=tuple(clamps))
        options = replace(options, bounds=bounds)
    return sql, options


def _refuse_anonymization(tokens: list[Token]) -> None:
    """BigQuery's deprecated ``WITH ANONYMIZATION`` and its ``ANON_`` aggregates clamp with
    other semantics (``CLAMPED BETWEEN``, ANON_AVG per unit's average): refused, naming the
    current syntax, never read as if they were it."""
    for i, t in enumerate(tokens[:-1]):
        following = tokens[i + 1]
        if (t.token_type == TokenType.WITH and following.text.upper() == "ANONYMIZATION"
                and i and tokens[i - 1].token_type == TokenType.SELECT):
            raise UnsupportedQuery("SELECT WITH ANONYMIZATION is BigQuery's deprecated clause; "
                                   "write SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)")
        if (t.text.upper().startswith("ANON_") and following.token_type == TokenType.L_PAREN
                and t.token_type == TokenType.VAR):
            name = t.text.upper().removeprefix("ANON_")
            raise UnsupportedQuery(f"{t.text} is BigQuery's deprecated anonymization aggregate; "
                                   f"write {name}(...) (with contribution_bounds_per_row => "
                                   "(lower, upper) to clamp each row)")


def _clause(sql: str, tokens: list[Token], edits: list[tuple[int, int, str]]
            ) -> DPOptions | None:
    found = None
    for i in range(len(tokens) - 2):
        if (tokens[i].token_type == TokenType.SELECT and tokens[i + 1].token_type
                == TokenType.WITH and tokens[i + 2].text.upper() == "DIFFERENTIAL_PRIVACY"):
            if found is not None:
                raise UnsupportedQuery("a query takes one WITH DIFFERENTIAL_PRIVACY clause, on "
                                       "its outermost SELECT; remove the others")
            found = i + 1
    if found is None:
        return None
    end = found + 2
    values: dict[str, str] = {}
    if end < len(tokens) and tokens[end].text.upper() == "OPTIONS":
        end, values = _options(sql, tokens, end + 1)
    edits.append((tokens[found].start, tokens[end - 1].end + 1, " "))
    return _options_of(values)


def _options(sql: str, tokens: list[Token], i: int) -> tuple[int, dict[str, str]]:
    """The ``(name = value, ...)`` list from token ``i``: the token after it, and its values."""
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        raise UnsupportedQuery("WITH DIFFERENTIAL_PRIVACY OPTIONS takes a list in parentheses: "
                               "OPTIONS(epsilon = 1, delta = 1e-6)")
    values: dict[str, str] = {}
    depth, i, start = 0, i + 1, i + 1
    while i < len(tokens):
        t = tokens[i]
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN and depth:
            depth -= 1
        elif t.token_type in (TokenType.COMMA, TokenType.R_PAREN) and not depth:
            if i > start:
                _option(sql, tokens[start:i], values)
            if t.token_type == TokenType.R_PAREN:
                return i + 1, values
            start = i + 1
        i += 1
    raise UnsupportedQuery("WITH DIFFERENTIAL_PRIVACY OPTIONS( is not closed; close it with )")


def _option(sql: str, tokens: list[Token], values: dict[str, str]) -> None:
    name = tokens[0].text.lower()
    if len(tokens) < 3 or tokens[1].token_type != TokenType.EQ:
        raise UnsupportedQuery(f"OPTIONS takes name = value pairs, not {name!r}")
    if name not in _OPTIONS:
        raise UnsupportedQuery(f"{name} is not an option of WITH DIFFERENTIAL_PRIVACY dpsql "
                               f"knows; use {', '.join(sorted(_OPTIONS))}")
    if name in values:
        raise UnsupportedQuery(f"option {name} is given twice; give it once")
    values[name] = sql[tokens[2].start:tokens[-1].end + 1].strip()


def _options_of(values: dict[str, str]) -> DPOptions:
    if "kappa" in values and "max_groups_contributed" in values:
        raise UnsupportedQuery("kappa and max_groups_contributed name the same option; give "
                               "one")
    strategy = values.get("group_selection_strategy")
    if strategy is not None and strategy.strip("'\"").upper() not in _STRATEGIES:
        raise UnsupportedQuery(f"group_selection_strategy = {strategy} is not one of "
                               f"{', '.join(sorted(_STRATEGIES))}")
    groups = values.get("max_groups_contributed", values.get("kappa"))
    unit = values.get("privacy_unit_column")
    bounds = ContributionBounds(_whole(values.get("max_rows_contributed"), "max_rows_contributed"),
                                _whole(groups, "max_groups_contributed"),
                                unit.strip('`"') if unit else None)
    return DPOptions(_number(values.get("epsilon"), "epsilon"),
                     _number(values.get("delta"), "delta"),
                     bounds if bounds != ContributionBounds() else None)


def _number(text: str | None, name: str) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidPrivacyParameter(f"{name} = {text} must be a number") from None


def _whole(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise InvalidPrivacyParameter(f"{name} = {text} must be a whole number >= 1 (rows or "
                                      "groups one privacy unit may contribute)")
    return int(text)


def _named_arguments(sql: str, tokens: list[Token], edits: list[tuple[int, int, str]],
                     counts: list[tuple[float, float]], clamps: list[str]) -> None:
    """``f(x, contribution_bounds_per_row => (lo, hi))`` -> ``f(LEAST(GREATEST(x, lo), hi))``
    (module docstring); COUNT drops them, keeping its per-group bounds in ``counts``;
    ``report_format`` and per-group bounds on other aggregates are refused."""
    opens: list[tuple[int, int | None]] = []  # per open parenthesis: its token, first comma
    for i, t in enumerate(tokens):
        if t.token_type == TokenType.L_PAREN:
            opens.append((i, None))
        elif t.token_type == TokenType.R_PAREN and opens:
            opens.pop()
        elif t.token_type == TokenType.COMMA and opens and opens[-1][1] is None:
            opens[-1] = (opens[-1][0], i)
        elif (t.token_type == TokenType.FARROW and i > 1 and opens
              and tokens[i - 2].token_type == TokenType.COMMA):
            _named(sql, tokens, i, opens[-1][0], edits, counts, clamps)


def _named(sql: str, tokens: list[Token], arrow: int, paren: int,
           edits: list[tuple[int, int, str]], counts: list[tuple[float, float]],
           clamps: list[str]) -> None:
    name = tokens[arrow - 1].text.lower()
    if name == "report_format":
        raise UnsupportedQuery("report_format (a JSON or PROTO report of a result, one "
                               "structured cell) is not supported: dpsql returns the value as "
                               "a number, and its accuracy with --accuracy or the DB-API's "
                               "cursor.accuracy; remove report_format")
    if name not in _CLAMPS:
        raise UnsupportedQuery(f"named argument {name} => is not one dpsql knows; use "
                               f"{', '.join(sorted(_CLAMPS))} => (lower, upper)")
    end, lo, hi = _pair(sql, tokens, arrow + 1, name)
    function = tokens[paren - 1].text.upper() if paren else ""
    comma = tokens[arrow - 2]
    if function == "COUNT":  # counts are bounded by k: the bounds are dropped
        if name == "contribution_bounds_per_group":
            counts.append((float(lo), float(hi)))
        edits.append((comma.start, end, ""))
        return
    first_comma = next(j for j in range(paren + 1, arrow) if tokens[j].token_type ==
                       TokenType.COMMA)
    arg = sql[tokens[paren].end + 1:tokens[first_comma].start]
    if function == "SUM" and name == "contribution_bounds_per_group":
        # BigQuery's own semantics, computed on the per-(unit, group) totals (module docstring)
        # (the SUM's own closing parenthesis stays where it is)
        edits.append((tokens[paren - 1].start, end, f"{SUM_PER_GROUP}({arg.strip()}, {lo}, {hi}"))
        return
    if name == "contribution_bounds_per_group":  # the row's clamp: checked once bound
        clamps.append(f"{function}(x, contribution_bounds_per_row => ({lo}, {hi}))")
    first_comma = next(j for j in range(paren + 1, arrow) if tokens[j].token_type ==
                       TokenType.COMMA)
    arg = sql[tokens[paren].end + 1:tokens[first_comma].start]
    rest = sql[tokens[first_comma].start:comma.start]  # PERCENTILE_CONT's percentile
    edits.append((tokens[paren].end + 1, end,
                  f"LEAST(GREATEST({arg.strip()}, {lo}), {hi}){rest}"))


def _pair(sql: str, tokens: list[Token], i: int, name: str) -> tuple[int, str, str]:
    """``(lo, hi)`` from token ``i``: the text offset after it, and its two numbers."""
    j = i
    while j < len(tokens) and tokens[j].token_type != TokenType.R_PAREN:
        j += 1
    text = sql[tokens[i].start:tokens[min(j, len(tokens) - 1)].end + 1]
    parts = [p.strip() for p in text.strip().removeprefix("(").removesuffix(")").split(",")]
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise UnsupportedQuery(f"{name} => takes (lower, upper), two numbers, not "
                               f"{text}") from None
    if lo > hi:
        raise UnsupportedQuery(f"{name} => {text}: lower is above upper")
    return tokens[j].end + 1, parts[0], parts[1]


def resolve(sql: str, epsilon: float | None, delta: float,
            bounds: ContributionBounds | None) -> tuple[str, float | None, float,
                                                        ContributionBounds | None]:
    """The query without the clause, and the privacy parameters and bounds in force: the
    clause's own over the front door's (a session's settings, a connection's arguments)."""
    sql, options = split(sql)
    if options is None:
        return sql, epsilon, delta, bounds
    if options.bounds is not None:
        bounds = (bounds or ContributionBounds()).merged(options.bounds)
    return (sql, options.epsilon if options.epsilon is not None else epsilon,
            options.delta if options.delta is not None else delta, bounds)
