"""Generate the bundled sample dataset: the private ``people``, ``visits`` and ``prescriptions``
tables and the public reference tables ``states`` and ``categories``, one Parquet file each.

Run from the repository root::

    python sample_data/generate.py            # writes next to this file
    python sample_data/generate.py --out DIR  # writes somewhere else

The data is entirely synthetic. It is drawn from a fixed seed with numpy's ``default_rng``,
which is fine here: this randomness only *builds* a fake dataset, it never protects anything
(dpsql's noise comes from the operating system's CSPRNG). Re-running the script with the same
numpy and duckdb versions produces the same rows in the same order (rows are written ordered by
their id, with a single DuckDB thread, ZSTD-compressed, one table per file).

The columns are deliberately correlated so that aggregates look plausible: income depends on
age, education and sex; marriage and children depend on age; visit counts depend on age and
are heavy-tailed (a few dozen "frequent visitors" have 200+ visits each, which is what makes
``max_rows_per_unit`` matter); amounts and durations depend on the category; a handful of
amounts lie above the declared upper bound of 5000 so that clamping is visible; and the state
distribution is very skewed so that a few states have fewer than 15 people and are dropped by
thresholding.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import duckdb
import numpy as np

SEED = 20261121
N_PEOPLE = 20_000
N_FREQUENT_VISITORS = 40

EPOCH = dt.date(1970, 1, 1)
SIGNUP_FIRST = dt.date(2015, 1, 1)
SIGNUP_LAST = dt.date(2025, 12, 31)
VISITS_FIRST = dt.date(2025, 1, 1)
VISITS_LAST = dt.date(2025, 12, 31)

EDUCATION = ("none", "primary", "secondary", "bachelor", "master", "doctorate")
CATEGORIES = (
    "checkup",
    "dental",
    "emergency",
    "lab",
    "pharmacy",
    "specialist",
    "therapy",
    "vaccination",
)

# Approximate 2020 census populations, in thousands (public figures), incl. DC.
STATE_POPULATION: dict[str, int] = {
    "CA": 39538, "TX": 29146, "FL": 21538, "NY": 20201, "PA": 13003, "IL": 12813,
    "OH": 11799, "GA": 10712, "NC": 10439, "MI": 10077, "NJ": 9289, "VA": 8631,
    "WA": 7705, "AZ": 7152, "MA": 7030, "TN": 6911, "IN": 6786, "MD": 6177,
    "MO": 6155, "WI": 5894, "CO": 5774, "MN": 5706, "SC": 5119, "AL": 5024,
    "LA": 4658, "KY": 4506, "OR": 4237, "OK": 3959, "CT": 3606, "UT": 3272,
    "IA": 3190, "NV": 3105, "AR": 3012, "MS": 2961, "KS": 2938, "NM": 2118,
    "NE": 1962, "ID": 1839, "WV": 1794, "HI": 1455, "NH": 1378, "ME": 1362,
    "RI": 1097, "MT": 1084, "DE": 990, "SD": 887, "ND": 779, "AK": 733,
    "DC": 690, "VT": 643, "WY": 577,
}  # fmt: skip
# The (fictional) service started on the West Coast: its user base is far more skewed than
# the population, so the smallest states end up with only a handful of members.
HOME_STATE_BOOST: dict[str, float] = {"CA": 2.0, "OR": 2.0, "WA": 2.0, "NV": 1.5, "AZ": 1.3}
STATE_SKEW_EXPONENT = 1.6

FIRST_NAMES_F = (
    "mary", "patricia", "jennifer", "linda", "elizabeth", "barbara", "susan", "jessica",
    "sarah", "karen", "lisa", "nancy", "betty", "sandra", "margaret", "ashley", "kimberly",
    "emily", "donna", "michelle", "carol", "amanda", "melissa", "deborah", "stephanie",
    "rebecca", "sharon", "laura", "cynthia", "amy", "kathleen", "angela", "anna", "maria",
    "sofia", "olivia", "emma", "ava", "isabella", "mia",
)  # fmt: skip
FIRST_NAMES_M = (
    "james", "robert", "john", "michael", "david", "william", "richard", "joseph", "thomas",
    "charles", "christopher", "daniel", "matthew", "anthony", "mark", "donald", "steven",
    "paul", "andrew", "joshua", "kenneth", "kevin", "brian", "george", "timothy", "ronald",
    "jason", "edward", "jeffrey", "ryan", "jacob", "gary", "nicholas", "eric", "jose",
    "luis", "carlos", "noah", "liam", "ethan",
)  # fmt: skip
LAST_NAMES = (
    "smith", "johnson", "williams", "brown", "jones", "garcia", "miller", "davis",
    "rodriguez", "martinez", "hernandez", "lopez", "gonzalez", "wilson", "anderson",
    "thomas", "taylor", "moore", "jackson", "martin", "lee", "perez", "thompson", "white",
    "harris", "sanchez", "clark", "ramirez", "lewis", "robinson", "walker", "young", "allen",
    "king", "wright", "scott", "torres", "nguyen", "hill", "flores", "green", "adams",
    "nelson", "baker", "hall", "rivera", "campbell", "mitchell", "carter", "roberts", "kim",
    "chen", "patel", "singh", "wang", "cohen", "murphy", "kelly", "price", "bennett",
)  # fmt: skip
# Reserved example domains (RFC 2606 / RFC 6761): no real mailbox can be hit.
EMAIL_DOMAINS = ("example.com", "example.org", "example.net", "mail.example")


def _day_number(day: dt.date) -> int:
    return (day - EPOCH).days


def _draw_age(rng: np.random.Generator, n: int) -> np.ndarray:
    """Adult ages 18..95: roughly flat to 60, then thinning out like a survival curve."""
    ages = np.arange(18, 96)
    weight = np.where(ages <= 60, 1.0, np.exp(-(((ages - 60) / 17.0) ** 2)))
    weight *= np.where(ages < 25, 0.85, 1.0)  # young adults sign up a little less
    return rng.choice(ages, size=n, p=weight / weight.sum()).astype(np.int32)


def _draw_education(rng: np.random.Generator, age: np.ndarray) -> np.ndarray:
    """Education level index into EDUCATION, conditioned on age (no 19-year-old doctors)."""
    base = np.array([0.02, 0.07, 0.44, 0.29, 0.14, 0.04])
    n = age.size
    probs = np.tile(base, (n, 1))
    # Older cohorts: fewer degrees, more primary-only.
    old = age >= 65
    probs[old] = np.array([0.04, 0.14, 0.50, 0.20, 0.09, 0.03])
    # Degrees take time to earn.
    probs[age < 22, 3:] = 0.0
    probs[(age < 22) & (age >= 21), 3] = 0.05
    probs[age < 24, 4] = 0.0
    probs[age < 27, 5] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    cum = probs.cumsum(axis=1)
    u = rng.random(n)[:, None]
    return np.minimum((u > cum).sum(axis=1), len(EDUCATION) - 1)


def _draw_income(
    rng: np.random.Generator, age: np.ndarray, edu: np.ndarray, female: np.ndarray
) -> np.ndarray:
    """Yearly income in dollars: lognormal around an education median, shaped by age.

    Top-coded at 250,000 (as public-use survey files are), a few percent report zero.
    """
    median_by_edu = np.array([17_000, 24_000, 38_000, 62_000, 78_000, 96_000], dtype=float)
    age_factor = np.exp(-0.5 * ((age - 50) / 22.0) ** 2)
    # Retirement: pensions replace part of earnings, with a floor.
    age_factor = np.where(age >= 67, 0.7 * np.maximum(age_factor, 0.4), age_factor)
    sex_factor = np.where(female, 0.88, 1.0)
    log_mu = np.log(median_by_edu[edu] * age_factor * sex_factor * 1.25)
    income = np.exp(rng.normal(log_mu, 0.55))
    zero = rng.random(age.size) < np.where(age < 23, 0.15, 0.03)
    income = np.where(zero, 0.0, income)
    return np.minimum(np.round(income), 250_000.0)


def _email_addresses(rng: np.random.Generator, female: np.ndarray) -> np.ndarray:
    """Unique fake addresses ``first.last[N]@<reserved example domain>``."""
    n = female.size
    first_f = rng.integers(0, len(FIRST_NAMES_F), n)
    first_m = rng.integers(0, len(FIRST_NAMES_M), n)
    last = rng.integers(0, len(LAST_NAMES), n)
    domain = rng.integers(0, len(EMAIL_DOMAINS), n)
    seen: dict[str, int] = {}
    out = np.empty(n, dtype=object)
    for i in range(n):
        first = FIRST_NAMES_F[first_f[i]] if female[i] else FIRST_NAMES_M[first_m[i]]
        local = f"{first}.{LAST_NAMES[last[i]]}"
        count = seen.get(local, 0) + 1
        seen[local] = count
        suffix = "" if count == 1 else str(count)
        out[i] = f"{local}{suffix}@{EMAIL_DOMAINS[domain[i]]}"
    return out


def make_people(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One row per person; person_id 1..N in order of signup (ids are handed out at signup)."""
    n = N_PEOPLE
    age = _draw_age(rng, n)
    female = rng.random(n) < 0.51
    edu = _draw_education(rng, age)

    codes = list(STATE_POPULATION)
    pop = np.array([STATE_POPULATION[c] for c in codes], dtype=float)
    boost = np.array([HOME_STATE_BOOST.get(c, 1.0) for c in codes])
    w = pop**STATE_SKEW_EXPONENT * boost
    state = np.array(codes, dtype=object)[rng.choice(len(codes), size=n, p=w / w.sum())]

    income = _draw_income(rng, age, edu, female)
    income_null = rng.random(n) < 0.05  # declined to answer

    p_married = np.interp(
        age, [18, 22, 30, 40, 55, 70, 80, 95], [0.02, 0.1, 0.45, 0.62, 0.64, 0.56, 0.42, 0.25]
    )
    married = rng.random(n) < p_married
    mean_children = np.interp(age, [18, 22, 30, 40, 95], [0.05, 0.2, 1.1, 2.0, 2.3])
    mean_children = mean_children * np.where(married, 1.0, 0.45)
    # The sign-up form offers 0..7 and "8 or more": top-coded at 8.
    children = np.minimum(rng.poisson(mean_children), 8).astype(np.int32)

    email = _email_addresses(rng, female)

    # Sign-ups grow year over year; uniform within a year.
    first, last = _day_number(SIGNUP_FIRST), _day_number(SIGNUP_LAST)
    days = np.arange(first, last + 1)
    years = np.array([(EPOCH + dt.timedelta(days=int(d))).year for d in days])
    day_w = 1.18 ** (years - 2015)
    signup = rng.choice(days, size=n, p=day_w / day_w.sum())

    order = np.lexsort((rng.random(n), signup))  # ids follow signup order, ties at random
    cols: dict[str, np.ndarray] = {
        "age": age,
        "female": female,
        "education": np.array(EDUCATION, dtype=object)[edu],
        "state": state,
        "income": income,
        "income_null": income_null,
        "married": married,
        "children": children,
        "email": email,
        "signup_day": signup.astype(np.int32),
    }
    people = {k: v[order] for k, v in cols.items()}
    people["person_id"] = np.arange(1, n + 1, dtype=np.int64)
    return people


def _category_probs(age: np.ndarray) -> np.ndarray:
    """Per-person visit mix over CATEGORIES, by age band."""
    young = np.array([0.22, 0.24, 0.05, 0.10, 0.12, 0.07, 0.10, 0.10])
    middle = np.array([0.18, 0.16, 0.04, 0.16, 0.18, 0.13, 0.08, 0.07])
    old = np.array([0.14, 0.08, 0.06, 0.20, 0.24, 0.19, 0.04, 0.05])
    t_mid = np.clip((age - 25) / 20.0, 0.0, 1.0)[:, None]
    t_old = np.clip((age - 55) / 20.0, 0.0, 1.0)[:, None]
    p = (1 - t_mid) * young + t_mid * ((1 - t_old) * middle + t_old * old)
    return p / p.sum(axis=1, keepdims=True)


def make_visits(rng: np.random.Generator, people: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Visits in 2025: heavy-tailed per person, seasonal, fewer on weekends."""
    n = N_PEOPLE
    age = people["age"].astype(float)
    person_id = people["person_id"]

    # Ordinary members: gamma-Poisson (negative binomial), more visits with age.
    rate = 5.9 * np.exp(0.022 * (age - 45)) * rng.gamma(1.2, 1 / 1.2, n)
    count = rng.poisson(rate)
    # Frequent visitors (chronic care): 200+ visits each, Pareto tail; mostly older people.
    w = np.exp(0.04 * (age - 45))
    frequent = rng.choice(n, size=N_FREQUENT_VISITORS, replace=False, p=w / w.sum())
    count[frequent] = 200 + np.floor(120 * rng.pareto(2.2, N_FREQUENT_VISITORS)).astype(int)
    count = np.minimum(count, 1500)

    owner = np.repeat(np.arange(n), count)
    m = owner.size
    is_frequent = np.zeros(n, dtype=bool)
    is_frequent[frequent] = True

    # Category: age-dependent mix; frequent visitors mostly pharmacy / therapy / lab.
    probs = _category_probs(age)
    chronic = np.array([0.03, 0.01, 0.02, 0.15, 0.42, 0.08, 0.29, 0.0])
    probs[is_frequent] = chronic
    cum = probs.cumsum(axis=1)[owner]
    cat = np.minimum((rng.random(m)[:, None] > cum).sum(axis=1), len(CATEGORIES) - 1)

    # Day of 2025: winter peak, flu-shot season for vaccinations, quiet weekends
    # (emergencies excepted).
    first, last = _day_number(VISITS_FIRST), _day_number(VISITS_LAST)
    days = np.arange(first, last + 1)
    doy = np.arange(days.size)
    weekday = (days + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    season = 1.0 + 0.25 * np.cos(2 * np.pi * (doy - 15) / 365.0)
    weekend = np.select([weekday == 5, weekday == 6], [0.3, 0.1], 1.0)
    flu = 0.3 + 3.0 * np.exp(-0.5 * ((doy - 290) / 25.0) ** 2)
    day = np.empty(m, dtype=np.int64)
    for c, name in enumerate(CATEGORIES):
        sel = np.flatnonzero(cat == c)
        if name == "emergency":
            w_day = season
        elif name == "vaccination":
            w_day = flu * weekend
        else:
            w_day = season * weekend
        day[sel] = rng.choice(days, size=sel.size, p=w_day / w_day.sum())

    # Amount billed (dollars): lognormal by category; some vaccinations are free.
    median = np.array([120, 180, 900, 70, 35, 280, 110, 40], dtype=float)
    sigma = np.array([0.35, 0.6, 0.7, 0.6, 0.9, 0.5, 0.3, 0.25])
    amount = np.exp(rng.normal(np.log(median[cat]), sigma[cat]))
    amount = np.where((CATEGORIES.index("vaccination") == cat) & (rng.random(m) < 0.3), 0.0, amount)
    # A handful of extreme bills (ICU stays, data-entry errors): far above the declared 5000.
    er = np.flatnonzero(cat == CATEGORIES.index("emergency"))
    extreme = rng.choice(er, size=8, replace=False)
    amount[extreme] *= rng.uniform(15, 60, extreme.size)
    amount = np.round(amount, 2)

    # Duration in minutes: lognormal by category; the system records at most 240.
    dur_median = np.array([25, 45, 150, 15, 8, 40, 55, 10], dtype=float)
    duration = np.exp(rng.normal(np.log(dur_median[cat]), 0.35))
    duration = np.clip(np.round(duration), 5, 240).astype(np.int32)

    # visit_id follows time: sort by day, then person, then at random.
    order = np.lexsort((rng.random(m), person_id[owner], day))
    return {
        "visit_id": np.arange(1, m + 1, dtype=np.int64),
        "person_id": person_id[owner][order],
        "day": day[order].astype(np.int32),
        "category": np.array(CATEGORIES, dtype=object)[cat][order],
        "amount": amount[order],
        "duration_min": duration[order],
    }


PEOPLE_SQL = """
SELECT
    person_id::BIGINT                                   AS person_id,
    age::INTEGER                                        AS age,
    CASE WHEN female THEN 'F' ELSE 'M' END::VARCHAR     AS sex,
    education::VARCHAR                                  AS education,
    state::VARCHAR                                      AS state,
    CASE WHEN income_null THEN NULL ELSE income END::DOUBLE AS income,
    married::BOOLEAN                                    AS married,
    children::INTEGER                                   AS children,
    email::VARCHAR                                      AS email,
    (DATE '1970-01-01' + signup_day)::DATE              AS signup_date
FROM people_src
ORDER BY person_id
"""

VISITS_SQL = """
SELECT
    visit_id::BIGINT                        AS visit_id,
    person_id::BIGINT                       AS person_id,
    (DATE '1970-01-01' + day)::DATE         AS day,
    category::VARCHAR                       AS category,
    amount::DOUBLE                          AS amount,
    duration_min::INTEGER                   AS duration_min
FROM visits_src
ORDER BY visit_id
"""


# Public reference tables (no randomness): the US Census Bureau's four regions, and the billing
# system's visit categories with the department that handles each and its published base fee.
CENSUS_REGIONS = {
    "Northeast": "CT ME MA NH RI VT NJ NY PA",
    "Midwest": "IL IN MI OH WI IA KS MN MO NE ND SD",
    "South": "DE DC FL GA MD NC SC VA WV AL KY MS TN AR LA OK TX",
    "West": "AZ CO ID MT NV NM UT WY AK CA HI OR WA",
}
CATEGORY_TABLE = (  # category, department, covered by the basic plan, base fee in USD
    ("checkup", "primary care", True, 120.0),
    ("dental", "dental", False, 180.0),
    ("emergency", "hospital", True, 950.0),
    ("lab", "diagnostics", True, 85.0),
    ("pharmacy", "pharmacy", True, 40.0),
    ("specialist", "specialty care", True, 260.0),
    ("therapy", "specialty care", False, 150.0),
    ("vaccination", "primary care", True, 30.0),
)


DRUGS = ("amoxicillin", "atorvastatin", "ibuprofen", "insulin", "lisinopril", "metformin",
         "omeprazole", "salbutamol")
# Prescriptions per visit, by category: most come from pharmacy and specialist visits.
PRESCRIPTION_RATE = {"checkup": 0.3, "dental": 0.2, "emergency": 0.8, "lab": 0.0,
                     "pharmacy": 1.5, "specialist": 1.0, "therapy": 0.2, "vaccination": 0.0}


def make_prescriptions(visits: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Prescriptions written at visits (a private table whose unit is reached through
    ``visit_id -> visits.visit_id``). Drawn from a generator of its own, so that adding it left
    the other tables' draws, and files, unchanged."""
    rng = np.random.default_rng(SEED + 1)
    rate = np.array([PRESCRIPTION_RATE[c] for c in visits["category"]])
    count = rng.poisson(rate)
    visit_id = np.repeat(visits["visit_id"], count)
    n = len(visit_id)
    return {
        "prescription_id": np.arange(1, n + 1),
        "visit_id": visit_id,
        "drug": np.array(DRUGS, dtype=object)[rng.integers(0, len(DRUGS), n)],
        "quantity": rng.choice([7, 14, 28, 30, 60, 90], n),
        "cost": np.round(rng.gamma(2.0, 25.0, n), 2),
    }


PRESCRIPTIONS_SQL = """
SELECT
    prescription_id::BIGINT                 AS prescription_id,
    visit_id::BIGINT                        AS visit_id,
    drug::VARCHAR                           AS drug,
    quantity::INTEGER                       AS quantity,
    cost::DOUBLE                            AS cost
FROM prescriptions_src
ORDER BY prescription_id
"""


def public_tables() -> dict[str, str]:
    """The public tables' SQL, by name: ``states`` (state, region) and ``categories``."""
    states = ", ".join(f"('{code}', '{region}')" for region, codes in CENSUS_REGIONS.items()
                       for code in sorted(codes.split()))
    categories = ", ".join(f"('{c}', '{d}', {str(k).lower()}, CAST({fee} AS DOUBLE))"
                           for c, d, k, fee in CATEGORY_TABLE)
    return {
        "states": f"SELECT * FROM (VALUES {states}) AS t(state, region) ORDER BY state",
        "categories": f"SELECT * FROM (VALUES {categories}) AS t(category, department, covered, "
                      "base_fee) ORDER BY category",
    }


def write_parquet(out_dir: Path) -> None:
    """Generate the tables and write ``people.parquet``, ``visits.parquet`` and the public
    ``states.parquet`` and ``categories.parquet`` to out_dir."""
    rng = np.random.default_rng(SEED)
    people = make_people(rng)
    visits = make_visits(rng, people)

    out_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")  # deterministic row groups and row order
        con.execute("SET preserve_insertion_order = true")
        con.register("people_src", people)
        con.register("visits_src", visits)
        con.register("prescriptions_src", make_prescriptions(visits))
        for name, sql in (("people", PEOPLE_SQL), ("visits", VISITS_SQL),
                          ("prescriptions", PRESCRIPTIONS_SQL),
                          *public_tables().items()):
            target = (out_dir / f"{name}.parquet").as_posix().replace("'", "''")
            options = "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100000"
            con.execute(f"COPY ({sql}) TO '{target}' ({options})")
    finally:
        con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the dpsql sample dataset.")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="output directory (default: the sample_data directory)",
    )
    args = parser.parse_args(argv)
    write_parquet(args.out)
    print(f"wrote people, visits, prescriptions, states and categories (.parquet) to "
          f"{args.out}")


if __name__ == "__main__":
    main()
