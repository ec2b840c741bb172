"""The audit's scenarios: a query, a database D and the one unit that a neighbour D' adds.

:data:`SCENARIOS` are the built-in ones that ``dpsql audit`` and the test suite run; each puts
the neighbour where a broken mechanism would show (values far outside the bounds, a unit with
many rows in many groups, a group of its own). :mod:`dpsql.audit.audit` runs and judges them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TableRows:
    """Another table of a scenario (joins): its rows in D and the neighbour's rows in it."""

    table: str
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    neighbour: tuple[tuple[object, ...], ...] = ()  # none for a public table


@dataclass(frozen=True)
class Scenario:
    """A query, a database D (one table, and ``more`` for joins), and the rows of the one unit
    that D' adds."""

    name: str
    title: str  # one line for the audit table
    sql: str
    metadata: str  # TOML text
    table: str
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]  # D
    neighbour: tuple[tuple[object, ...], ...]  # the rows of the extra unit in D'
    epsilon: float = 1.0
    delta: float = 0.0
    mechanism: str = "laplace"
    keys: tuple[str, ...] = ()  # result columns that are group keys
    more: tuple[TableRows, ...] = ()  # the other tables of a join
    #: The release audited is the query's retention estimate at ``epsilon``
    #: (:mod:`dpsql.execution.retention`), not its answer.
    retention: bool = False



PEOPLE = """
[tables.people]
privacy_unit = "pid"
one_row_per_unit = true

[tables.people.columns]
pid = { type = "int" }
age = { type = "int", lower = 0, upper = 100 }
income = { type = "float", lower = 0, upper = 100000, nullable = true }
city = { type = "text" }
sex = { type = "text", values = ["F", "M"] }
"""

VISITS = """
[tables.visits]
privacy_unit = "pid"
max_rows_per_unit = 3
max_groups_per_unit = 2

[tables.visits.columns]
pid = { type = "int" }
grp = { type = "text", values = ["a", "b", "c", "d", "e", "f"] }
amount = { type = "float", lower = 0, upper = 100 }
qty = { type = "int", lower = 0, upper = 10 }
"""

#: The same, with caps above the defaults: a query may ask for up to k = 8 and g = 4.
VISITS_CAPPED = VISITS.replace("max_groups_per_unit = 2\n", "max_groups_per_unit = 2\n"
                               "max_rows_per_unit_cap = 8\nmax_groups_per_unit_cap = 4\n")
PEOPLE_COLUMNS = ("pid", "age", "income", "city", "sex")
VISITS_COLUMNS = ("pid", "grp", "amount", "qty")
GROUPS = ("a", "b", "c", "d", "e", "f")
#: Values far outside every declared bound: clamping must hold them to the bounds.
HUGE = 10**12


EVENTS = """
[tables.events]
privacy_unit = "pid"
one_row_per_unit = true

[tables.events.columns]
pid = { type = "int" }
ts = { type = "timestamp", lower = 2025-01-01T00:00:00, upper = 2025-12-31T23:59:59 }
"""


def _events(name: str, title: str, sql: str, **kw: object) -> Scenario:
    """60 people with one timestamp each, spread over the spring of 2025; the neighbour's
    timestamp is far past the declared upper bound (read as the bound)."""
    rows = tuple((i, dt.datetime(2025, 3, 1) + dt.timedelta(hours=17 * i)) for i in range(60))
    return Scenario(name, title, sql, EVENTS, "events", ("pid", "ts"), rows,
                    ((10_000, dt.datetime(9999, 12, 31, 23, 59)),), **kw)  # type: ignore[arg-type]


def people_rows(n: int = 60) -> tuple[tuple[object, ...], ...]:
    """n people in 3 cities (n/3 each), ages 20..80, incomes 10k..89k, a few NULL incomes."""
    rows = []
    for i in range(1, n + 1):
        income = None if i % 15 == 0 else 1000.0 * (10 + (i * 13) % 80)
        rows.append((i, 20 + (i * 7) % 61, income, ("Ames", "Bend", "Cody")[i % 3],
                     "FM"[i % 2]))
    return tuple(rows)


def visits_rows(units: int = 30) -> tuple[tuple[object, ...], ...]:
    """units people with 1..4 visits each, spread over the groups."""
    rows = []
    for i in range(1, units + 1):
        for j in range(1 + i % 4):
            rows.append((i, GROUPS[(i + j) % len(GROUPS)], float((i * 17 + j * 5) % 100) + 0.5,
                         (i + j) % 11))
    return tuple(rows)


def _outsider(**overrides: object) -> tuple[tuple[object, ...], ...]:
    """The extra person of D': one row with values far outside the bounds."""
    row = {"pid": 10_000, "age": HUGE, "income": float(HUGE), "city": "Zzyzx", "sex": "M"}
    row.update(overrides)
    return (tuple(row[c] for c in PEOPLE_COLUMNS),)


def _frequent(rows: int, groups: Sequence[str] = ("a",), **overrides: object
              ) -> tuple[tuple[object, ...], ...]:
    """The extra person of D': ``rows`` visits (far more than k = 3) over ``groups``."""
    out = []
    for j in range(rows):
        row = {"pid": 10_000, "grp": groups[j % len(groups)], "amount": float(HUGE),
               "qty": HUGE}
        row.update(overrides)
        out.append(tuple(row[c] for c in VISITS_COLUMNS))
    return tuple(out)


#: Public reference tables of the join scenarios: the same rows in D and D'.
CITIES = """
[tables.cities]
public = true

[tables.cities.columns]
city = { type = "text" }
region = { type = "text" }
tag = { type = "text" }
"""
CITIES_COLUMNS = ("city", "region", "tag")
REGIONS = """
[tables.regions]
public = true

[tables.regions.columns]
city = { type = "text" }
region = { type = "text" }
"""
#: One row per city: the region "Empty" has no member, "Far" only the neighbour.
REGIONS_ROWS = (("Ames", "North"), ("Bend", "West"), ("Cody", "West"), ("Dunn", "Empty"),
                ("Zzyzx", "Far"))
#: One row per city, except the neighbour's city, which matches 8 public rows (8 tags); the
#: region "Empty" has no member: a public key with an empty group.
CITIES_ROWS = (("Ames", "North", "t0"), ("Bend", "West", "t0"), ("Cody", "West", "t0"),
               ("Dunn", "Empty", "t0"), *(("Zzyzx", "Far", f"t{i}") for i in range(8)))


def _joined(name: str, title: str, sql: str, neighbour_people: bool, neighbour_visits: int,
            **kw: object) -> Scenario:
    """A join scenario over people, visits and the public cities: the neighbour is one person
    (values far outside the bounds, city Zzyzx) in people and/or with visits."""
    more = (TableRows("cities", CITIES_COLUMNS, CITIES_ROWS),
            TableRows("regions", ("city", "region"), REGIONS_ROWS),
            TableRows("visits", VISITS_COLUMNS, visits_rows(), _frequent(neighbour_visits,
                                                                           GROUPS)))
    neighbour = _outsider(age=90, city="Zzyzx") if neighbour_people else ()
    return Scenario(name, title, sql, PEOPLE + VISITS + CITIES + REGIONS,
                    "people", PEOPLE_COLUMNS, people_rows(), neighbour,
                    more=more, **kw)  # type: ignore[arg-type]


def _people(name: str, title: str, sql: str, **kw: object) -> Scenario:
    neighbour = kw.pop("neighbour", _outsider())
    return Scenario(name, title, sql, PEOPLE, "people", PEOPLE_COLUMNS, people_rows(),
                    neighbour, **kw)  # type: ignore[arg-type]


def _visits(name: str, title: str, sql: str, **kw: object) -> Scenario:
    neighbour = kw.pop("neighbour", _frequent(10))
    return Scenario(name, title, sql, VISITS, "visits", VISITS_COLUMNS, visits_rows(),
                    neighbour, **kw)  # type: ignore[arg-type]


#: Forty public groups, k = 40 rows and g = 1 group per unit: a unit in every group moves one
#: count of units by one, where a missing groups cap would move all forty (the sum over the
#: released groups, one of the audit's features, then moves by 40 against noise of about 9).
WIDE_GROUPS = GROUPS + tuple(f"w{i:02}" for i in range(34))
VISITS_WIDE = VISITS.replace("max_rows_per_unit = 3\nmax_groups_per_unit = 2\n",
                             "max_rows_per_unit = 40\nmax_groups_per_unit = 1\n").replace(
    'grp = { type = "text", values = ["a", "b", "c", "d", "e", "f"] }',
    "grp = { type = \"text\", values = [" + ", ".join(f'"{g}"' for g in WIDE_GROUPS) + "] }")


#: An automatic k (dpsql.privacy.auto_bounds) in [1, 10] for half the epsilon: at epsilon 2
#: the choice aims where about 11 units have more rows (the plan's ``AutoRows.above``).
VISITS_AUTO = VISITS.replace("max_rows_per_unit = 3\n", "max_rows_per_unit = { auto = true, "
                             "max = 10, share = 0.5 }\n")
AUTO_ABOVE = 11


def _auto_rows() -> Scenario:
    """D: 5 units with 1 row and 10 with 3, so the exact k at rank n - 11 is 1 on D and 3 on
    D' (the neighbour has 12 rows, read as 10): a choice that is not private tells them apart
    on every run; the exponential mechanism moves each utility by at most 1."""
    rows = tuple((unit, GROUPS[unit % 6], 10.0, 1) for unit in range(15)
                 for _ in range(1 if unit < 5 else 3))
    return Scenario("auto_rows", "automatic k (half the epsilon): the neighbour moves the "
                    "exact target from k = 1 to 3", "SELECT COUNT(*) AS n FROM visits",
                    VISITS_AUTO, "visits", VISITS_COLUMNS, rows, _frequent(12), epsilon=2.0)


#: An automatic upper bound of amount (dpsql.privacy.auto_values) in [0, 100] for half the
#: epsilon: at epsilon 2 (k = 3, one sum at epsilon 1) the choice aims where about 22 units
#: have a larger value (the plan's ``AutoValue.above``, 512 buckets).
VISITS_AUTO_VALUES = VISITS.replace("amount = { type = \"float\", lower = 0, upper = 100 }",
                                    "amount = { type = \"float\", lower = 0, upper = { auto = "
                                    "true, max = 100, share = 0.5 } }")
AUTO_VALUE_ABOVE = 22


def _auto_values() -> Scenario:
    """D: 5 units whose largest amount is 1 and 21 whose largest is 100, so the exact bound at
    rank n - 22 is 1 on D and 100 on D' (the neighbour's amounts are read as 100): a choice
    that is not private tells them apart on every run; the exponential mechanism moves each
    utility by at most 1, whatever the neighbour's 12 rows."""
    rows = tuple((unit, GROUPS[unit % 6], 1.0 if unit < 5 else 100.0, 1)
                 for unit in range(5 + AUTO_VALUE_ABOVE - 1))
    return Scenario("auto_values", "automatic upper bound of amount (half the epsilon): the "
                    "neighbour moves the exact target from 1 to 100", "SELECT SUM(amount) AS s "
                    "FROM visits", VISITS_AUTO_VALUES, "visits", VISITS_COLUMNS, rows,
                    _frequent(12), epsilon=2.0)


JOIN_SCENARIOS = [
    _joined("join_private", "visits JOIN people on the unit; neighbour in both (10 visits)",
            "SELECT SUM(v.qty) FROM visits v JOIN people p ON v.pid = p.pid", True,
            10),
    _joined("join_public_many", "people JOIN a public table: the neighbour's row matches 8 "
            "public rows", "SELECT COUNT(*) FROM people p JOIN cities c ON p.city = c.city",
            True, 0),
    _joined("semi_join", "EXISTS over visits on the unit; neighbour in both tables",
            "SELECT COUNT(*) FROM people p WHERE EXISTS (SELECT 1 FROM visits v "
            "WHERE v.pid = p.pid AND v.qty > 5)", True, 10),
    _joined("join_public_domain", "GROUP BY a public table's column: every region, empty ones "
            "included", "SELECT r.region, COUNT(*) AS n FROM people p JOIN regions r ON "
            "p.city = r.city GROUP BY r.region", True, 0,
            keys=("region",)),
]

SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    _people("count", "COUNT(*), one row per person",
            "SELECT COUNT(*) FROM people"),
    _visits("count_where", "COUNT(*) with WHERE, k = 3 rows per person (neighbour: 10 rows)",
            "SELECT COUNT(*) FROM visits WHERE amount > 50"),
    _people("sum_clamped", "SUM of a clamped real (neighbour's income 1e12, bound 1e5)",
            "SELECT SUM(income) FROM people"),
    _people("avg", "AVG (noisy sum / noisy count), neighbour outside the bounds",
            "SELECT AVG(income) FROM people"),
    _people("stddev", "STDDEV from noisy moments, neighbour outside the bounds",
            "SELECT STDDEV(age) FROM people", epsilon=2.0),
    _visits("group_public", "GROUP BY a public domain, neighbour adds 10 rows in one group",
            "SELECT grp, COUNT(*) AS n FROM visits GROUP BY grp", keys=("grp",)),
    _people("group_threshold", "GROUP BY with thresholding: the neighbour is a group of its own",
            "SELECT city, COUNT(*) AS n FROM people GROUP BY city", delta=1e-5,
            keys=("city",)),
    _visits("user_bounds", "k = 3, g = 2: neighbour has 60 rows in 6 groups, values 1e12",
            "SELECT grp, SUM(amount) AS s FROM visits GROUP BY grp",
            neighbour=_frequent(60, GROUPS), keys=("grp",)),
    Scenario("bounds_raised", "COUNT(*) with WHERE, per-query k = 8 within the cap (BigQuery's "
             "OPTIONS; default 3): neighbour has 60 rows",
             "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, "
             "max_rows_contributed = 8) COUNT(*) AS n "
             "FROM visits WHERE amount > 50", VISITS_CAPPED, "visits", VISITS_COLUMNS,
             visits_rows(), _frequent(60, GROUPS)),
    Scenario("retention", "retention estimate (units, sum of shares kept), k = 8: "
             "neighbour has 60 rows in 6 groups",
             "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0, "
             "max_rows_contributed = 8) grp, COUNT(*) "
             "FROM visits GROUP BY grp", VISITS_CAPPED, "visits", VISITS_COLUMNS,
             visits_rows(), _frequent(60, GROUPS), retention=True),
    _people("median", "MEDIAN by the exponential mechanism, neighbour's age 1e12",
            "SELECT MEDIAN(age) FROM people", epsilon=2.0),
    # The fine histogram (2**16 buckets, issue 21.5) at user level: the neighbour's 10 rows at
    # 1e12 are sampled to k = 3 rows at the bound 100, shifting every rank by up to 3.
    _visits("median_user", "MEDIAN over 2**16 buckets, k = 3: neighbour's 10 rows at 1e12",
            "SELECT MEDIAN(amount) FROM visits"),
    _visits("gaussian", "Gaussian mechanism: SUM with delta",
            "SELECT SUM(qty) FROM visits", mechanism="gaussian", epsilon=2.0,
            delta=1e-5),
    _visits("postprocess", "HAVING / ORDER BY / LIMIT over noisy cells",
            "SELECT grp, COUNT(*) AS n FROM visits GROUP BY grp HAVING COUNT(*) >= 11 "
            "ORDER BY n DESC LIMIT 3", neighbour=_frequent(10, ("b",)), keys=("grp",)),
    _people("sum_case", "SUM(CASE WHEN age > 60 THEN income ELSE 0 END)",
            "SELECT SUM(CASE WHEN age > 60 THEN income ELSE 0 END) FROM people"),
    _visits("sum_product", "SUM(amount * qty), both factors far out of bounds",
            "SELECT SUM(amount * qty) FROM visits"),
    _events("max_timestamp", "MAX of a timestamp (exponential mechanism), neighbour in 9999",
            "SELECT MAX(ts) FROM events", epsilon=2.0),
    # Two releases (dpsql.routes.series): the neighbour's rows can change which groups the inner
    # releases as its top 2, and then the outer counts of those groups.
    _visits("series_limit", "series limit: top-2 groups (release 1) then their counts "
            "(release 2)", "SELECT v.grp, COUNT(*) AS n FROM visits v JOIN (SELECT grp AS g, "
            "COUNT(*) AS c FROM visits GROUP BY grp ORDER BY c DESC LIMIT 2) AS s "
            "ON v.grp = s.g GROUP BY v.grp", neighbour=_frequent(10, ("b",)), keys=("grp",)),
    *JOIN_SCENARIOS,
    _auto_rows(),
    _auto_values(),
    # Bounding on per-unit aggregates (dpsql.execution.rewrite): the neighbour's sum is scaled to k
    # rows.
    _visits("sum_scaled", "SUM over per-person sums: neighbour's 10 rows (k = 3) scaled to k",
            "SELECT SUM(amount) FROM visits"),
    _visits("avg_grouped", "GROUP BY public, COUNT and AVG per (person, group): neighbour has "
            "60 rows in 6 groups, values 1e12", "SELECT grp, COUNT(*) AS n, AVG(amount) AS a "
            "FROM visits GROUP BY grp", neighbour=_frequent(60, GROUPS), keys=("grp",)),
    # No groups cap over public keys (dpsql.privacy.aggregates.groups_cap): the neighbour's
    # k rows spread over k of its groups, L1 still k (Laplace) and L2 still k (Gaussian).
    _visits("uncapped_groups", "GROUP BY public, no groups cap: neighbour's 60 rows in 6 "
            "groups keep k = 3 rows across them", "SELECT grp, COUNT(*) AS n FROM visits "
            "GROUP BY grp", neighbour=_frequent(60, GROUPS), keys=("grp",), epsilon=2.0),
    _visits("uncapped_gaussian", "GROUP BY public, Gaussian, no groups cap: neighbour's 60 "
            "rows in 6 groups", "SELECT grp, COUNT(*) AS n FROM visits GROUP BY grp",
            neighbour=_frequent(60, GROUPS), keys=("grp",), mechanism="gaussian",
            epsilon=2.0, delta=1e-5),
    _visits("units_grouped", "COUNT(DISTINCT person) per public group: neighbour in 6 groups, "
            "g = 2", "SELECT grp, COUNT(DISTINCT pid) AS units FROM visits GROUP BY grp",
            neighbour=_frequent(60, GROUPS), keys=("grp",), epsilon=2.0),
    Scenario("units_wide", "COUNT(DISTINCT person) per public group: neighbour in 40 groups, "
             "g = 1", "SELECT grp, COUNT(DISTINCT pid) AS units FROM visits GROUP BY grp",
             VISITS_WIDE, "visits", VISITS_COLUMNS, visits_rows(),
             _frequent(40, WIDE_GROUPS), keys=("grp",)),
    # BigQuery's per-group SUM bounds (dpsql.privacy.aggregates._per_group_sum): each unit's
    # total per group clamped, in at most g = 1 group; without the cap the neighbour's clamped
    # totals would move all forty.
    Scenario("per_group_sum", "SUM with contribution_bounds_per_group => (0, 100) per public "
             "group: neighbour's totals in 40 groups, g = 1",
             "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 0) grp, SUM(amount, "
             "contribution_bounds_per_group "
             "=> (0, 100)) AS s FROM visits GROUP BY grp", VISITS_WIDE, "visits",
             VISITS_COLUMNS, visits_rows(), _frequent(40, WIDE_GROUPS), keys=("grp",)),
]}
