"""harlequin's PostgreSQL adapter (harlequin-postgres) against a real ``dpsql serve``: its
own code, not copies of its SQL. The catalog tree (databases, schemas, relations, columns, the
search path it loads up front), catalog search, completions, a query, a refusal and read-only
mode, as harlequin's sidebar and editor ask for them.

harlequin-postgres is in the test extra; without it this module fails to import (no skip).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from harlequin.catalog import Catalog, CatalogItem
from harlequin.exception import HarlequinQueryError
from harlequin_postgres.adapter import HarlequinPostgresAdapter, HarlequinPostgresConnection

from tests.support.helpers import SAMPLE_TABLES

PASSWORD = "harlequin pw"
TABLES = set(SAMPLE_TABLES)


def connect(served: SimpleNamespace, read_only: bool = False) -> HarlequinPostgresConnection:
    adapter = HarlequinPostgresAdapter(
        conn_str=[f"host=127.0.0.1 port={served.port} dbname=dpsql user=alice "
                  f"password='{PASSWORD}' sslmode=disable"], read_only=read_only,
        connect_timeout=10)
    return adapter.connect()


def child(items: list[CatalogItem], label: str) -> CatalogItem:
    return next(i for i in items if i.label == label)


def test_catalog_tree_search_and_completions(served: SimpleNamespace) -> None:
    conn = connect(served)
    try:
        catalog: Catalog = conn.get_catalog()
        database = child(catalog.items, "dpsql")
        # the search path's schema is loaded up front (completion needs it)
        # (and the ledger views' schema, dpsql)
        assert database.loaded and [s.label for s in database.children] == ["dpsql", "public"]
        public = child(database.children, "public")
        assert public.loaded and {r.label for r in public.children} >= TABLES
        people = child(public.children, "people")
        columns = {c.label: c.type_name for c in people.fetch_children()}
        assert columns["age"] == "bigint" and columns["income"] == "double precision"
        assert columns["signup_date"] == "date" and columns["married"] == "boolean"
        found = {(r.parents, r.item.label) for r in conn.search_catalog("sign")}
        assert (("dpsql", "public", "people"), "signup_date") in found, found
        labels = {c.label for c in conn.get_completions()}
        assert "select" in labels and "count" in labels
    finally:
        conn.close()


def test_query_refusal_and_read_only(served: SimpleNamespace) -> None:
    conn = connect(served, read_only=True)  # harlequin checks the server enforces it
    try:
        cursor = conn.execute("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex")
        assert cursor is not None
        assert [name for name, _ in cursor.columns()] == ["sex", "n"]
        assert [r[0] for r in cursor.fetchall()] == ["F", "M"]
        with pytest.raises(HarlequinQueryError, match="email"):
            conn.execute("SELECT email FROM people")
        cursor = conn.execute("SELECT COUNT(*) FROM visits")  # the connection still works
        assert cursor is not None and len(cursor.fetchall()) == 1
    finally:
        conn.close()
