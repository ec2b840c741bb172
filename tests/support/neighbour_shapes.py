"""More query shapes for the neighbour test: what :mod:`tests.support.neighbour_queries` does not
write, on the same :data:`~tests.support.neighbour_queries.METADATA` and worlds.

:func:`tests.support.neighbour_queries.generate` draws one plain key at most, aggregates of a column
or a little arithmetic, filters of ``column op constant``, and equi-joins. The checker accepts
more, and each is a place where a row's fate or a value could depend on data in a way the
sensitivity does not cover, so each is drawn here:

* GROUP BY on two keys (public and thresholded mixed) and on expressions (a CASE bucket, an
  integer division, a cast to text, a concatenation, a public table's column reached by a
  join);
* aggregates with ``FILTER (WHERE ...)``, ``COUNT_IF``, ``COUNT(DISTINCT x)`` of a column that is
  not the unit, ``QUANTILE_CONT``, ``PERCENTILE_CONT ... WITHIN GROUP``, ``VAR_POP``, ``MIN`` and
  ``MAX`` of a date;
* joins the other generator leaves out: FULL joins, a self-join on the unit, a three-way LEFT
  join down a ``unit_path``, a public table joined by CROSS JOIN, a comma, ``USING``, a
  non-equality or ``ON TRUE`` (each of a unit's rows matched many times);
* row-level functions in WHERE and inside aggregates, each a place where the engine could
  raise on some rows only (division and modulo by a column, casts to narrow or other types,
  ``LN``, ``SQRT``, ``EXP``, ``ROUND``, ``LEAST``, ``COALESCE``, ``NULLIF``, ``LIKE``,
  ``LENGTH``, ``substring``, ``strptime``, ``EXTRACT``, ``DATE_TRUNC``, ``DATEDIFF``,
  ``IS DISTINCT FROM``);
* the post-processing part on top of a measurement: HAVING on an aggregate that is not in the
  SELECT list, ORDER BY an aggregate with LIMIT, a window over aggregates;
* the free and exact paths: DISTINCT and GROUP BY without an aggregate (a public domain's free
  answer, or thresholded keys), ``LIMIT 0`` and constant-false probes;
* series limits (two releases): ``IN (SELECT key ... ORDER BY agg DESC LIMIT n)`` and the join
  form, with filters on either side.
"""

from __future__ import annotations

import random

from tests.support.neighbour_queries import _FROMS, _PUBLIC_KEYS, _Alias, _Gen

Query = tuple[str, float, float, str]

#: Extra FROM clauses: (text, aliases). Joins that multiply a unit's rows or NULL-fill both sides.
_MORE_FROMS: list[tuple[str, list[_Alias]]] = [
    ("people p FULL JOIN visits v ON v.pid = p.pid", [_Alias("p", "people"),
                                                     _Alias("v", "visits")]),
    ("visits v JOIN visits w ON v.pid = w.pid", [_Alias("v", "visits"), _Alias("w", "visits")]),
    ("people p JOIN people q ON p.pid = q.pid", [_Alias("p", "people"), _Alias("q", "people")]),
    ("people p LEFT JOIN visits v ON v.pid = p.pid LEFT JOIN rx r ON r.vid = v.vid",
     [_Alias("p", "people"), _Alias("v", "visits"), _Alias("r", "rx")]),
    ("visits v FULL JOIN rx r ON r.vid = v.vid", [_Alias("v", "visits"), _Alias("r", "rx")]),
    ("people p CROSS JOIN cities c", [_Alias("p", "people"), _Alias("c", "cities")]),
    ("people p, cities c", [_Alias("p", "people"), _Alias("c", "cities")]),
    ("people p JOIN cities c USING (city)", [_Alias("p", "people"), _Alias("c", "cities")]),
    ("people p JOIN cities c ON p.city <> c.city", [_Alias("p", "people"),
                                                    _Alias("c", "cities")]),
    ("visits v JOIN cities c ON c.city = v.grp", [_Alias("v", "visits"), _Alias("c", "cities")]),
    ("visits v JOIN people p USING (pid) JOIN cities c ON TRUE",
     [_Alias("v", "visits"), _Alias("p", "people"), _Alias("c", "cities")]),
]

#: Group-key expressions per table: (SQL with ``{a}`` for the alias, needs thresholding).
_KEY_EXPRESSIONS: dict[str, list[tuple[str, bool]]] = {
    "people": [("CASE WHEN {a}.age > 50 THEN 'old' ELSE 'young' END", False),
               ("{a}.age // 10", False), ("CAST({a}.age AS VARCHAR)", False),
               ("{a}.sex || '-'", False), ("LOWER({a}.city)", True),
               ("CAST({a}.income AS INT)", True), ("{a}.city", True)],
    "visits": [("CASE WHEN {a}.qty >= 5 THEN {a}.grp ELSE 'z' END", True),
               ("{a}.qty % 3", True), ("{a}.day", True), ("YEAR({a}.day)", True),
               ("ROUND({a}.amount, -1)", True)],
    "rx": [("{a}.dose // 10", False), ("UPPER({a}.drug)", False)],
    "cities": [("{a}.region", False), ("{a}.city", False)],
}

#: Row-level predicates per table that could raise on some rows (``{a}``: the alias).
_RISKY: dict[str, list[str]] = {
    "people": ["100 / {a}.age > 2", "{a}.income % {a}.age > 1", "CAST({a}.income AS SMALLINT) > 3",
               "CAST({a}.city AS INT) > 1", "CAST({a}.city AS DATE) > DATE '2020-01-01'",
               "TRY_CAST({a}.city AS DOUBLE) IS NULL", "LN({a}.income) > 2",
               "SQRT({a}.income - 10) > 2", "EXP({a}.age) > 10", "ROUND({a}.income, 1) > 3",
               "LEAST({a}.age, {a}.income) > 3", "COALESCE({a}.income, 1 / 0) > 3",
               "NULLIF({a}.age, 50) > 3", "{a}.city LIKE 'city1%'", "LENGTH({a}.city) > 4",
               "substring({a}.city, {a}.age, 2) = 'ty'", "{a}.age IS DISTINCT FROM {a}.income",
               "strptime({a}.city, '%Y') > TIMESTAMP '2020-01-01'", "{a}.income",
               "POWER({a}.income, 2) > 9", "CAST({a}.age AS VARCHAR) = '50'",
               "{a}.age BETWEEN {a}.income AND 90"],
    "visits": ["{a}.amount / {a}.qty > 2", "100 // {a}.qty = 3",
               "CAST({a}.amount AS TINYINT) > 3", "EXTRACT(month FROM {a}.day) > 6",
               "DATE_TRUNC('month', {a}.day) > DATE '2025-06-01'",
               "DATEDIFF('day', {a}.day, DATE '2025-07-01') > 3",
               "{a}.day + INTERVAL 3 DAY > DATE '2025-07-01'",
               "CAST({a}.day AS VARCHAR) > '2025-06'",
               "{a}.qty * {a}.qty * {a}.qty > 100", "ABS({a}.amount - 50) < 20",
               "EXTRACT(epoch FROM {a}.day) > 1750000000", "CAST({a}.grp AS INT) IS NULL"],
    "rx": ["{a}.dose / ({a}.dose - 25) > 1", "CAST({a}.dose AS TINYINT) > 3"],
    "cities": ["LENGTH({a}.region) > 3"],
}


class _Shapes(_Gen):
    def risky(self, aliases: list[_Alias]) -> str:
        choices = [p.replace("{a}", a.name) for a in aliases for p in _RISKY[a.table]]
        return self.pick(choices)

    def key(self, aliases: list[_Alias]) -> tuple[str, bool]:
        a = self.rng.choice(aliases)
        text, private = self.rng.choice(_KEY_EXPRESSIONS[a.table])
        return text.replace("{a}", a.name), private

    def aggregate2(self, aliases: list[_Alias]) -> str:
        """An aggregate of the kinds :meth:`_Gen.aggregate` does not write (or one it does)."""
        column, _ = self.numeric(aliases) if any(a.table != "cities" for a in aliases) else \
            ("1", (0, 1))
        kind = self.rng.randrange(9)
        if kind == 0:
            return f"COUNT(*) FILTER (WHERE {self.predicate(aliases, simple=True)})"
        if kind == 1:
            return f"SUM({column}) FILTER (WHERE {self.risky(aliases)})"
        if kind == 2:
            return f"COUNT_IF({self.risky(aliases)})"
        if kind == 3:
            a = self.rng.choice(aliases)
            other = {"people": "sex", "visits": "grp", "rx": "drug", "cities": "region"}[a.table]
            return f"COUNT(DISTINCT {a.name}.{other})"
        if kind == 4:
            return f"QUANTILE_CONT({column}, {self.pick(['0.1', '0.5', '0.9'])})"
        if kind == 5:
            return f"PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY {column})"
        if kind == 6:
            visits = [a for a in aliases if a.table == "visits"]
            return f"{self.pick(['MIN', 'MAX'])}({visits[0].name}.day)" if visits else \
                f"VAR_POP({column})"
        if kind == 7:
            return f"SUM(CASE WHEN {self.risky(aliases)} THEN {column} ELSE 0 END)"
        return self.aggregate(aliases)


def generate_shapes(n: int, seed: int = 0) -> list[Query]:
    """``n`` random queries of the shapes of the module docstring, the same for the same seed."""
    gen = _Shapes(random.Random(f"shapes-{seed}"))
    makers = [_grouped, _grouped, _joined, _risky_filter, _outer_part, _free, _series]
    return [makers[gen.rng.randrange(len(makers))](gen) for _ in range(n)]


def _source(gen: _Shapes, more: float = 0.5) -> tuple[str, list[_Alias]]:
    froms = _MORE_FROMS if gen.rng.random() < more else _FROMS
    text, aliases = froms[gen.rng.randrange(len(froms))]
    return text.replace("{x}", ""), aliases


def _private(aliases: list[_Alias]) -> list[_Alias]:
    return [a for a in aliases if a.table != "cities"] or aliases


def _grouped(gen: _Shapes) -> Query:
    """One or two keys (expressions too), public or thresholded, with new aggregates."""
    source, aliases = _source(gen, more=0.3)
    keys, delta = [], 0.0
    for _ in range(1 + gen.rng.randrange(2)):
        key, private = gen.key(aliases) if gen.rng.random() < 0.6 else (
            _plain_key(gen, aliases), False)
        if key and key not in keys:
            keys.append(key)
            delta = 1e-6 if private or delta else 0.0
    if not keys:
        keys, delta = ["1"], 0.0
    cells = [gen.aggregate2(_private(aliases)) for _ in range(1 + gen.rng.randrange(2))]
    where = f" WHERE {gen.predicate(_private(aliases))}" if gen.rng.random() < 0.4 else ""
    listed = ", ".join(keys)
    sql = f"SELECT {listed}, {', '.join(cells)} FROM {source}{where} GROUP BY {listed}"
    if gen.rng.random() < 0.1:
        return sql, 1.0, 1e-5, "gaussian"
    return sql, 1.0, delta, "laplace"


def _plain_key(gen: _Shapes, aliases: list[_Alias]) -> str:
    a = gen.rng.choice(aliases)
    return f"{a.name}.{gen.pick(_PUBLIC_KEYS[a.table])}" if _PUBLIC_KEYS[a.table] else ""


def _joined(gen: _Shapes) -> Query:
    """A global aggregate over a join the other generator does not write."""
    text, aliases = _MORE_FROMS[gen.rng.randrange(len(_MORE_FROMS))]
    where = f" WHERE {gen.predicate(_private(aliases))}" if gen.rng.random() < 0.5 else ""
    return f"SELECT {gen.aggregate2(_private(aliases))} FROM {text}{where}", 1.0, 0.0, "laplace"


def _risky_filter(gen: _Shapes) -> Query:
    """Row-level functions that could raise on some rows, in WHERE and inside a SUM."""
    source, aliases = _source(gen, more=0.2)
    private = _private(aliases)
    where = " AND ".join(gen.risky(private) for _ in range(1 + gen.rng.randrange(2)))
    key = _plain_key(gen, private)
    cell = gen.pick(["COUNT(*)", gen.aggregate2(private)])
    if key and gen.rng.random() < 0.5:
        return (f"SELECT {key}, {cell} FROM {source} WHERE {where} GROUP BY {key}", 1.0, 0.0,
                "laplace")
    return f"SELECT {cell} FROM {source} WHERE {where}", 1.0, 0.0, "laplace"


def _outer_part(gen: _Shapes) -> Query:
    """Post-processing over measurements: HAVING, ORDER BY an aggregate with LIMIT, a window."""
    source, aliases = _source(gen, more=0.2)
    private = _private(aliases)
    key = _plain_key(gen, private) or "1"
    cell = gen.aggregate(private)
    tail = gen.pick([f" HAVING {gen.aggregate(private)} > 2",
                     f" ORDER BY {gen.aggregate(private)} DESC LIMIT 2",
                     f" ORDER BY {key} LIMIT 1 OFFSET 1"])
    window = ", RANK() OVER (ORDER BY COUNT(*))" if gen.rng.random() < 0.3 else ""
    return (f"SELECT {key}, {cell}{window} FROM {source} GROUP BY {key}{tail}", 1.0, 0.0,
            "laplace")


def _free(gen: _Shapes) -> Query:
    """DISTINCT or GROUP BY without an aggregate (public domain or thresholded), and probes."""
    source, aliases = _source(gen, more=0.3)
    private = _private(aliases)
    key, needs_delta = gen.key(aliases) if gen.rng.random() < 0.5 else (
        _plain_key(gen, aliases), False)
    key = key or "1"
    where = f" WHERE {gen.predicate(private)}" if gen.rng.random() < 0.5 else ""
    delta = 1e-6 if needs_delta else 0.0
    kind = gen.rng.randrange(4)
    if kind == 0:
        return f"SELECT DISTINCT {key} FROM {source}{where}", 1.0, delta, "laplace"
    if kind == 1:
        return f"SELECT {key} FROM {source}{where} GROUP BY {key}", 1.0, delta, "laplace"
    if kind == 2:
        return (f"SELECT {key}, COUNT(*) FROM {source}{where} GROUP BY {key} LIMIT 0", 1.0,
                delta, "laplace")
    return (f"SELECT {key}, {gen.aggregate(private)} FROM {source} WHERE 1 = 0 GROUP BY {key}",
            1.0, delta, "laplace")


def _series(gen: _Shapes) -> Query:
    """A series limit: the outer query filtered by an inner aggregate's top keys."""
    inner_where = f" WHERE {gen.predicate([_Alias('visits', 'visits')], simple=True)}" \
        if gen.rng.random() < 0.4 else ""
    inner = (f"SELECT grp FROM visits{inner_where} GROUP BY grp ORDER BY "
             f"{gen.aggregate([_Alias('visits', 'visits')])} DESC LIMIT {gen.rng.randint(1, 3)}")
    outer_where = f" AND {gen.predicate([_Alias('v', 'visits')], simple=True)}" \
        if gen.rng.random() < 0.4 else ""
    cell = gen.aggregate([_Alias("v", "visits")])
    if gen.rng.random() < 0.5:
        return (f"SELECT v.grp, {cell} FROM visits v WHERE v.grp IN ({inner}){outer_where} "
                "GROUP BY v.grp", 1.0, 0.0, "laplace")
    inner = inner.replace("SELECT grp", "SELECT grp AS g", 1)
    return (f"SELECT {cell} FROM visits v JOIN ({inner}) AS s ON v.grp = s.g"
            f"{outer_where.replace(' AND ', ' WHERE ', 1)}", 1.0, 0.0, "laplace")
