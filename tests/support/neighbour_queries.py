"""A seeded generator of random queries for the neighbour test (:mod:`dpsql.audit.neighbours`).

The queries cover what the privacy arguments have to survive: joins on the unit (inner, LEFT,
RIGHT, along a ``unit_path``), joins to a public table whose keys match many rows, semi- and
anti-joins (IN, NOT IN, EXISTS, NOT EXISTS, over the unit of a table a LEFT JOIN may
NULL-fill), CASE and arithmetic inside aggregates and filters, GROUP BY on public-domain and
thresholded keys, constant filters that narrow a key's public domain (IN-lists, ranges) and
filters relative to the clock (``CURRENT_DATE - INTERVAL``, Grafana's time filter on a date),
CTEs and subqueries in FROM, and the Laplace and Gaussian mechanisms. They
run on :data:`METADATA`, whose synthetic worlds :func:`dpsql.audit.neighbours.synthesize` builds.
Most are accepted; the checker refuses the rest, and the harness counts those apart.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from dpsql.metadata.metadata import Metadata, parse_metadata

#: The generator's tables: one row per person, a bounded table with k = 3 and g = 2, a table
#: reaching its person along a unit_path, and a public table with repeated keys.
METADATA_TOML = """
[tables.people]
privacy_unit = "pid"
one_row_per_unit = true

[tables.people.columns]
pid = { type = "int" }
age = { type = "int", lower = 0, upper = 100, public_range = true }
income = { type = "float", lower = 0, upper = 1000, nullable = true }
city = { type = "text", nullable = true }
sex = { type = "text", values = ["F", "M"] }

[tables.visits]
privacy_unit = "pid"
max_rows_per_unit = 3
max_groups_per_unit = 2
max_rows_per_unit_cap = 6
max_groups_per_unit_cap = 4

[tables.visits.columns]
vid = { type = "int", unique = true }
pid = { type = "int" }
grp = { type = "text", values = ["a", "b", "c", "d"] }
amount = { type = "float", lower = 0, upper = 100, nullable = true }
qty = { type = "int", lower = 0, upper = 10 }
day = { type = "date", lower = 2025-01-01, upper = 2025-12-31 }

[tables.rx]
unit_path = "vid -> visits.vid"
max_rows_per_unit = 4
max_groups_per_unit = 2

[tables.rx.columns]
vid = { type = "int" }
drug = { type = "text", values = ["x", "y", "z"] }
dose = { type = "int", lower = 1, upper = 50 }

[tables.cities]
public = true

[tables.cities.columns]
city = { type = "text" }
region = { type = "text" }
"""


def metadata() -> Metadata:
    import tomllib

    return parse_metadata(tomllib.loads(METADATA_TOML), source="neighbour_queries.METADATA")


@dataclass(frozen=True)
class _Alias:
    name: str
    table: str


#: Per table: numeric columns with bounds, their bounds, public-domain keys, other keys.
_NUMERIC = {"people": {"age": (0, 100), "income": (0, 1000)},
            "visits": {"amount": (0, 100), "qty": (0, 10)}, "rx": {"dose": (1, 50)},
            "cities": {}}
_PUBLIC_KEYS = {"people": ["sex", "age"], "visits": ["grp"], "rx": ["drug"],
                "cities": ["region"]}
#: Keys without a public domain (thresholding): NULL texts, NaN and infinite floats reach them.
_PRIVATE_KEYS = {"people": ["city", "income"], "visits": ["day", "amount"], "rx": [],
                 "cities": []}
_UNIT = {"people": "pid", "visits": "pid"}
#: The declared values of the text keys (the filters that narrow their domains pick from them).
_DOMAINS = {"sex": ["F", "M"], "grp": ["a", "b", "c", "d"], "drug": ["x", "y", "z"]}

#: FROM clauses: the text and its aliases. ``{x}`` is an optional extra ON condition.
_FROMS: list[tuple[str, list[_Alias]]] = [
    ("people p", [_Alias("p", "people")]),
    ("visits v", [_Alias("v", "visits")]),
    ("rx r", [_Alias("r", "rx")]),
    ("visits v JOIN people p ON v.pid = p.pid{x}", [_Alias("v", "visits"),
                                                  _Alias("p", "people")]),
    ("people p LEFT JOIN visits v ON v.pid = p.pid{x}", [_Alias("p", "people"),
                                                        _Alias("v", "visits")]),
    ("visits v LEFT JOIN people p ON p.pid = v.pid{x}", [_Alias("v", "visits"),
                                                        _Alias("p", "people")]),
    ("people p RIGHT JOIN visits v ON v.pid = p.pid", [_Alias("p", "people"),
                                                      _Alias("v", "visits")]),
    ("rx r JOIN visits v ON r.vid = v.vid", [_Alias("r", "rx"), _Alias("v", "visits")]),
    ("people p JOIN cities c ON p.city = c.city", [_Alias("p", "people"),
                                                  _Alias("c", "cities")]),
    ("people p LEFT JOIN cities c ON p.city = c.city", [_Alias("p", "people"),
                                                       _Alias("c", "cities")]),
    ("visits v JOIN people p ON v.pid = p.pid JOIN cities c ON p.city = c.city",
     [_Alias("v", "visits"), _Alias("p", "people"), _Alias("c", "cities")]),
]


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def pick(self, items: list[str] | tuple[str, ...]) -> str:
        return items[self.rng.randrange(len(items))]

    def numeric(self, aliases: list[_Alias]) -> tuple[str, tuple[int, int]]:
        choices = [(f"{a.name}.{c}", b) for a in aliases for c, b in _NUMERIC[a.table].items()]
        return choices[self.rng.randrange(len(choices))]

    def constant(self, bounds: tuple[int, int]) -> str:
        lo, hi = bounds
        # Near and beyond the bounds too: only the adversary's values reach there.
        return str(self.rng.choice([lo, hi, (lo + hi) // 2, hi - 1, hi + 1, lo - 1,
                                    self.rng.randint(lo, hi)]))

    def expression(self, aliases: list[_Alias]) -> tuple[str, tuple[int, int]]:
        """A bounded numeric expression: a column, arithmetic, or a CASE."""
        column, bounds = self.numeric(aliases)
        kind = self.rng.randrange(5)
        if kind == 0:
            return f"{column} * 2 + 1", bounds
        if kind == 1:
            other, _ = self.numeric(aliases)
            return f"{column} - {other}", bounds
        if kind == 2:
            return (f"CASE WHEN {self.predicate(aliases, simple=True)} THEN {column} ELSE 0 "
                    "END", bounds)
        return column, bounds

    def predicate(self, aliases: list[_Alias], simple: bool = False) -> str:
        kind = self.rng.randrange(4 if simple else 9)
        a = self.rng.choice(aliases)
        if kind <= 1:
            column, bounds = self.numeric(aliases)
            return f"{column} {self.pick(['>', '<', '>=', '=', '<>'])} {self.constant(bounds)}"
        if kind == 2:
            column, _ = self.numeric(aliases)
            return f"{column} IS {self.pick(['', 'NOT '])}NULL"
        if kind == 3 and _PUBLIC_KEYS[a.table]:
            key = self.pick(_PUBLIC_KEYS[a.table])
            return f"{a.name}.{key} IN ('a', 'F', 'x', 'region1')" if key != "age" else \
                f"{a.name}.age BETWEEN 20 AND 60"
        if kind == 3:
            return "1 = 1"
        units = [x for x in aliases if x.table in _UNIT]
        if kind in (4, 5) and units:
            return self.semi(self.rng.choice(units))
        if kind == 6 and units:
            u = self.rng.choice(units)
            return f"{u.name}.pid {self.pick(['=', '<>', '<'])} {self.rng.randint(1, 4)}"
        if kind == 7:
            return f"({self.predicate(aliases, True)} OR {self.predicate(aliases, True)})"
        return f"NOT ({self.predicate(aliases, True)})"

    def key_filter(self, key: str) -> str:
        """A constant filter on a public-domain key (``p.age BETWEEN 20 AND 30``, ``v.grp IN
        ('a', 'c')``), which narrows the released domain (:mod:`dpsql.privacy.key_filters`)."""
        column = key.split(".")[-1]
        if column == "age":
            lo = self.rng.randint(-5, 100)
            hi = lo + self.rng.randint(0, 30)
            return self.pick([f"{key} BETWEEN {lo} AND {hi}", f"{key} >= {lo}",
                              f"{key} < {hi}", f"{key} IN ({lo}, {hi}, 50)",
                              f"{key} // 10 <> {lo // 10}"])
        values = _DOMAINS.get(column, ["region1", "region2"])
        chosen = self.rng.sample(values, self.rng.randint(1, len(values)))
        listed = ", ".join(f"'{v}'" for v in chosen)
        return self.pick([f"{key} IN ({listed})", f"{key} NOT IN ({listed})",
                          f"{key} <> '{chosen[0]}'", f"{key} = '{chosen[0]}'"])

    def clock_filter(self, alias: str) -> str:
        """A filter relative to the clock, or Grafana's ``$__timeFilter`` on a date column:
        constants folded when the query is planned (:func:`dpsql.query.dates.fold_clock`)."""
        days = self.rng.choice([1, 30, 400, 700])
        return self.pick([f"{alias}.day >= CURRENT_DATE - INTERVAL '{days} days'",
                          f"{alias}.day < NOW()",
                          f"{alias}.day <= CURRENT_TIMESTAMP - INTERVAL '{days} days'",
                          f"{alias}.day BETWEEN '2025-03-04T00:00:00Z' AND "
                          "'2025-03-07T23:59:59.999Z'"])

    def semi(self, outer: _Alias) -> str:
        """A semi- or anti-join on the unit: IN, NOT IN, EXISTS, NOT EXISTS."""
        inner = self.pick(["visits", "people"])
        alias = "w" if inner == "visits" else "q"
        inner_pred = self.predicate([_Alias(alias, inner)], simple=True)
        if self.rng.random() < 0.3:
            inner_pred += f" AND {alias}.pid = {self.rng.randint(1, 4)}"
        if self.rng.random() < 0.5:
            word = self.pick(["IN", "NOT IN"])
            return (f"{outer.name}.pid {word} (SELECT {alias}.pid FROM {inner} {alias} WHERE "
                    f"{inner_pred})")
        word = self.pick(["EXISTS", "NOT EXISTS"])
        return (f"{word} (SELECT 1 FROM {inner} {alias} WHERE {alias}.pid = {outer.name}.pid "
                f"AND {inner_pred})")

    def aggregate(self, aliases: list[_Alias]) -> str:
        kind = self.rng.randrange(10)
        if kind <= 2:
            return "COUNT(*)"
        expression, _ = self.expression(aliases)
        if kind == 3:
            column, _ = self.numeric(aliases)
            return f"COUNT({column})"
        if kind == 4:
            units = [x for x in aliases if x.table in _UNIT]
            return f"COUNT(DISTINCT {units[0].name}.pid)" if units else "COUNT(*)"
        if kind in (5, 6):
            return f"SUM({expression})"
        if kind == 7:
            return f"AVG({expression})"
        column, _ = self.numeric(aliases)
        return f"{self.pick(['MEDIAN', 'MAX', 'STDDEV', 'VARIANCE'])}({column})"


def generate(n: int, seed: int = 0) -> list[tuple[str, float, float, str]]:
    """``n`` random queries (SQL, epsilon, delta, mechanism), the same for the same seed."""
    rng = random.Random(seed)
    gen = _Gen(rng)
    return [_query(gen) for _ in range(n)]


def _query(gen: _Gen) -> tuple[str, float, float, str]:
    rng = gen.rng
    source, aliases = _FROMS[rng.randrange(len(_FROMS))]
    extra = f" AND {gen.predicate(aliases, simple=True)}" if rng.random() < 0.3 else ""
    source = source.replace("{x}", extra)
    where = [gen.predicate(aliases) for _ in range(rng.randrange(3))]
    keys: list[str] = []
    delta, mechanism = 0.0, "laplace"
    if rng.random() < 0.5:
        a = rng.choice(aliases)
        private = _PRIVATE_KEYS[a.table]
        if private and rng.random() < 0.4:
            keys.append(f"{a.name}.{gen.pick(private)}")
            delta = 1e-6
        elif _PUBLIC_KEYS[a.table]:
            keys.append(f"{a.name}.{gen.pick(_PUBLIC_KEYS[a.table])}")
    if keys and delta == 0 and rng.random() < 0.4:  # narrow the public domain (key_filters)
        where.append(gen.key_filter(keys[0]))
    if any(a.table == "visits" for a in aliases) and rng.random() < 0.15:
        v = next(a for a in aliases if a.table == "visits")
        where.append(gen.clock_filter(v.name))
    if rng.random() < 0.15:
        mechanism, delta = "gaussian", 1e-5
    cells = [gen.aggregate(aliases) for _ in range(1 + rng.randrange(2))]
    select = ", ".join([*keys, *cells])
    sql = f"SELECT {select} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if keys:
        sql += " GROUP BY " + ", ".join(keys)
    shape = rng.random()
    if shape < 0.1 and len(aliases) == 1:  # the same through a CTE
        a = aliases[0]
        body = sql.replace(f"FROM {source}", f"FROM t {a.name}")
        sql = f"WITH t AS (SELECT * FROM {a.table}) {body}"
    elif shape < 0.2 and len(aliases) == 1:  # and through a subquery in FROM
        a = aliases[0]
        sql = sql.replace(f"FROM {source}", f"FROM (SELECT * FROM {a.table}) AS {a.name}")
    return _with_bounds(sql, aliases, 1.0, delta), 1.0, delta, mechanism


def _with_bounds(sql: str, aliases: Sequence[_Alias], epsilon: float, delta: float) -> str:
    """One query in five asks for its own contribution bounds, BigQuery's way: up to the caps
    on visits alone, lower than the defaults otherwise (a join's caps are its defaults). Drawn
    from the text, so that the generator's own sequence is the same as without."""
    rng = random.Random(sql)
    if rng.random() >= 0.2:
        return sql
    alone = len(aliases) == 1 and aliases[0].table == "visits"
    rows, groups = rng.choice([1, 2, 6] if alone else [1, 2]), rng.choice([1, 4] if alone else [1])
    # epsilon and delta written out, as the clause requires (the query's own, unchanged)
    clause = (f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = {epsilon!r}, delta = "
              f"{delta!r}, max_rows_contributed = {rows}, max_groups_contributed = {groups}) ")
    if sql.startswith("WITH "):  # the outermost SELECT, after the CTE
        return sql.replace(") SELECT ", ") " + clause, 1)
    return clause + sql.removeprefix("SELECT ")


#: Queries of :data:`METADATA` that exhibit the leak classes of issue 17 (the tests assert
#: that the harness finds each one when the class's bug is present, and that each passes
#: once it is fixed). Class 1: three-valued logic of a rewritten anti-join whose outer unit is
#: NULL (a NULL-filled LEFT JOIN side; rows of a NULL unit are read by no query, issue 35): the
#: row's fate depends on whether *anyone* matches. Class 2: a unit's identity differs between
#: bounding (the stored text) and filters (the typed value): needs ``text_units``. Class 3:
#: a ``unit_path`` table read through a CTE or a subquery in FROM is planned with k = 1.
LEAK_CLASSES: dict[int, tuple[str, ...]] = {
    1: ("SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
        "WHERE v.pid NOT IN (SELECT pid FROM visits WHERE pid = 2 AND qty >= 0)",
        "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
        "WHERE v.pid NOT IN (SELECT pid FROM visits WHERE pid = 2)",
        "SELECT COUNT(*) FROM people p LEFT JOIN visits v ON v.pid = p.pid AND v.vid < 0 "
        "WHERE NOT EXISTS (SELECT 1 FROM visits w WHERE w.pid = v.pid AND w.qty > 10)"),
    2: ("SELECT COUNT(*) FROM visits WHERE pid = 99",
        "SELECT SUM(qty) FROM visits",
        "SELECT COUNT(*) FROM visits v JOIN people p ON v.pid = p.pid"),
    3: ("WITH t AS (SELECT * FROM rx) SELECT COUNT(*) FROM t",
        "SELECT SUM(dose) FROM (SELECT * FROM rx) AS r"),
}


def leak_class(sql: str) -> int | None:
    """The known leak class a generated query's shape may hit (None: no known class), so that
    a test can tell known violations from new ones."""
    if "NOT IN" in sql or "NOT EXISTS" in sql:
        return 1
    if "(SELECT * FROM rx)" in sql:
        return 3
    return None
