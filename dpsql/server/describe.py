"""The columns of a private query's answer, from its plan alone: no data read, nothing charged.

The extended protocol's Describe must say what an Execute will return before anything runs.
The plan knows it: post-processing (:func:`dpsql.postprocess.postprocess`) reads only the
released group keys and the noisy cells, whose types the plan fixes. So the answer's columns are
those of post-processing run on one *made-up* group (keys and cells set to 1, or the first value
of a key's public domain) -- the library's own code path, fed with nothing that came from data.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from dpsql.perturb import NoisyCells
from dpsql.plan import Plan
from dpsql.postprocess import postprocess

_DUMMY_KEYS: dict[str, object] = {"int": 1, "float": 1.0, "bool": True,
                                  "date": dt.date(2000, 1, 1), "text": "a"}


def _dummy_key(key: object) -> object:
    domain = getattr(key, "domain", None)
    if domain:
        for value in domain:
            if value is not None:
                return value
    kind = getattr(getattr(key, "bound", None), "kind", "text")
    return _DUMMY_KEYS.get(kind, "a")


def describe(plan: Plan) -> list[tuple[str, str]]:
    """(name, DuckDB type) of each column of the answer to ``plan``."""
    keys = [tuple(_dummy_key(k) for k in plan.keys)]
    values = {}
    for cell in plan.cells:
        if cell.type == "BIGINT":
            values[cell.call.placeholder] = np.ones(1, dtype=np.int64)
        else:
            values[cell.call.placeholder] = np.ones(1, dtype=np.float64)
    result = postprocess(plan, NoisyCells(keys=keys, values=values, accuracy={}))
    return [(c.name, c.type) for c in result.columns]
