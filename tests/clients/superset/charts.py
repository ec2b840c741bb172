"""Run inside a Python environment with Apache Superset and dpsql installed (run by
tests/doors/test_superset.py): a real Superset application (its metadata in a fresh SQLite file)
registers a ``dpsql://`` database, finds dpsql's engine spec through its entry point, reflects a
dataset, and runs two charts' queries through Superset's own query builder: a time series with a
time grain and a time-range filter, and an aggregated table chart. Prints one JSON object.

    python charts.py 'dpsql://alice:pw@127.0.0.1:5433/dpsql' /tmp/folder
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any


def configure(folder: Path) -> None:
    config = folder / "superset_config.py"
    config.write_text(
        f"SQLALCHEMY_DATABASE_URI = 'sqlite:///{folder / 'superset.db'}'\n"
        "SECRET_KEY = 'dpsql-test-only-' + 'x' * 32\n"
        "FEATURE_FLAGS = {}\n"
        "CACHE_CONFIG = {'CACHE_TYPE': 'NullCache'}\n"
        "DATA_CACHE_CONFIG = {'CACHE_TYPE': 'NullCache'}\n"
        "THUMBNAIL_CACHE_CONFIG = {'CACHE_TYPE': 'NullCache'}\n"

        "RATELIMIT_ENABLED = False\n", encoding="utf-8")
    os.environ["SUPERSET_CONFIG_PATH"] = str(config)


COUNT = {"expressionType": "SQL", "sqlExpression": "COUNT(*)", "label": "count"}


def dataset(database: Any, name: str) -> Any:
    """A physical dataset, its columns reflected as Superset does when one is added."""
    from superset import db
    from superset.connectors.sqla.models import SqlaTable

    table = SqlaTable(table_name=name, schema="public", database=database)
    db.session.add(table)
    table.fetch_metadata()
    db.session.commit()
    return table


def outcome(result: Any) -> dict[str, object]:
    """The SQL Superset generated, its error, and the rows (dicts)."""
    rows = None if result.error_message else result.df.to_dict("records")
    return {"sql": result.query, "error": result.error_message, "rows": rows}


def main(uri: str, folder: Path) -> dict[str, object]:
    configure(folder)
    from superset.app import create_app

    app = create_app()
    with app.app_context():
        from flask_appbuilder import Model
        from superset import db
        from superset.models import dashboard, slice, sql_lab  # noqa: F401  (their tables)
        from superset.models.core import Database

        Model.metadata.create_all(db.engine)  # Superset's tables (what `db upgrade` makes)
        database = Database(database_name="dpsql", sqlalchemy_uri=uri)
        db.session.add(database)
        db.session.commit()
        out: dict[str, object] = {"engine_spec": type(database.db_engine_spec).__name__
                                  if not isinstance(database.db_engine_spec, type)
                                  else database.db_engine_spec.__name__,
                                  "backend": database.backend}
        out["tables"] = sorted(t[0] for t in database.get_all_table_names_in_schema(
            catalog=None, schema="public"))
        people, visits = dataset(database, "people"), dataset(database, "visits")
        out["columns"] = sorted(c.column_name for c in people.columns)
        out["temporal"] = sorted(c.column_name for c in visits.columns if c.is_dttm)
        # A time-series chart: months of a date column with public_range, a time-range filter.
        series = visits.query({
            "granularity": "day", "is_timeseries": True,
            "from_dttm": datetime(2025, 3, 1), "to_dttm": datetime(2025, 6, 1),
            "extras": {"time_grain_sqla": "P1M"}, "metrics": [COUNT], "columns": [],
            "row_limit": 10000, "filter": [], "orderby": [],
        })
        out["series"] = outcome(series)
        out["series_months"] = sorted(str(v)[:10] for v in series.df["__timestamp"]) \
            if not series.error_message else []
        # The same chart on a date column without public_range: refused, as an error.
        out["refused"] = outcome(people.query({
            "granularity": "signup_date", "is_timeseries": True,
            "from_dttm": datetime(2024, 1, 1), "to_dttm": datetime(2024, 7, 1),
            "extras": {"time_grain_sqla": "P1M"}, "metrics": [COUNT], "columns": [],
            "row_limit": 10000, "filter": [], "orderby": [],
        }))
        # A table chart (aggregate mode): a metric by a column with a public domain.
        out["table"] = outcome(people.query({
            "granularity": None, "is_timeseries": False, "groupby": ["sex"],
            "columns": ["sex"], "metrics": [COUNT], "row_limit": 1000, "filter": [],
            "orderby": [(COUNT, False)], "extras": {},
        }))
        return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2])), default=str))
