"""Local against central at the same epsilon: the error of a count of the sample's people.

    PYTHONPATH=. python benchmarks/bench_local.py            # 30 runs per cell
    PYTHONPATH=. python benchmarks/bench_local.py --runs 100

For each epsilon, the number of women (``sex = 'F'``, 20,000 people) and of people with a
doctorate (one of six degrees) is estimated ``--runs`` times:

* *central*: ``SELECT COUNT(*) FROM people WHERE ...`` answered by dpsql at that epsilon
  (discrete Laplace on the exact count);
* *local*: the column alone released by randomized response at that epsilon (the whole row's
  epsilon spent on it: the local model's best case), debiased with
  :func:`dpsql.privacy.local_estimates.debiased_count`.

Printed: the truth, each model's root mean squared error over the runs, and the local
estimator's own standard error (from its variance formula), so the formula can be checked
against the measured error. Owner-side (it reads the true counts), unmetered.
"""

from __future__ import annotations

import argparse
import math
import tomllib
from pathlib import Path
from tempfile import TemporaryDirectory

import duckdb
import tomli_w

import dpsql
from dpsql.database import sample_paths
from dpsql.metadata.metadata import parse_metadata
from dpsql.privacy.local import row_mechanism
from dpsql.privacy.local_estimates import debiased_count
from dpsql.privacy.randomness import Randomness

CASES = (("sex", "F"), ("education", "doctorate"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    folder, metadata = sample_paths()
    declared = tomllib.loads(metadata.read_text(encoding="utf-8"))
    for section in ("budget", "analysts"):
        declared.pop(section, None)  # unmetered: the benchmark repeats queries
    values = {c: [r[0] for r in duckdb.sql(
        f"SELECT {c} FROM '{folder / 'people.parquet'}'").fetchall()] for c, _ in CASES}
    print(f"{'column = value':<24} {'epsilon':>7} {'truth':>6} {'central RMSE':>13} "
          f"{'local RMSE':>11} {'local s.e.':>11} {'ratio':>7}")
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "metadata.toml"
        path.write_text(tomli_w.dumps(declared), encoding="utf-8")
        with dpsql.Database(folder, path, randomness=Randomness.seeded(1)) as db:
            for epsilon in (0.5, 1.0, 2.0, 4.0):
                for column, value in CASES:
                    truth = sum(1 for v in values[column] if v == value)
                    central = _rmse([db.query(f"SELECT COUNT(*) FROM people WHERE {column} = "
                                              f"'{value}'", epsilon=epsilon).rows[0][0]
                                     for _ in range(args.runs)], truth)
                    local, se = _local(declared, column, value, values[column], epsilon,
                                       args.runs)
                    print(f"{column + ' = ' + value:<24} {epsilon:>7g} {truth:>6} "
                          f"{central:>13.1f} {_rmse(local, truth):>11.1f} {se:>11.1f} "
                          f"{_rmse(local, truth) / central:>7.0f}")


def _local(declared: dict, column: str, value: str, true: list, epsilon: float, runs: int
           ) -> tuple[list[float], float]:
    """``runs`` debiased counts of ``value`` from the column released alone at ``epsilon``."""
    table = dict(declared["tables"]["people"])
    table["local"] = {"epsilon": epsilon, "row_count": "public", "columns": {column: "rr"}}
    mechanism = row_mechanism(parse_metadata({"tables": {"people": table}}).tables["people"])
    rng = Randomness.seeded(2)
    estimates, variances = [], []
    spec = mechanism.columns[column]
    assert spec is not None
    p, q = spec.params()["p"], spec.params()["q"]
    for _ in range(runs):
        released = spec.randomize(true, rng)
        estimate, variance = debiased_count(float((released == value).sum()), len(true), p, q)
        estimates.append(estimate)
        variances.append(variance)
    return estimates, math.sqrt(sum(variances) / len(variances))


def _rmse(estimates: list, truth: float) -> float:
    return math.sqrt(sum((float(e) - truth) ** 2 for e in estimates) / len(estimates))


if __name__ == "__main__":
    main()
