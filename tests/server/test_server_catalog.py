"""Catalog queries as real clients shape them: array literals and array parameters in ANY/ALL,
information_schema's catalog columns, and type introspection recognised as a catalog query.

The inputs are the clients' own texts: pgspecial's ``\\dt``/``\\d`` (what pgcli runs), asyncpg's
type introspection query (asyncpg.introspection), and psycopg 3 list parameters. Private
queries with ``col = ANY($1)`` are answered as ``col IN (...)``.
"""

from __future__ import annotations

from types import SimpleNamespace

import asyncpg.introspection
import duckdb
import psycopg
import pytest
from pgspecial.main import PGSpecial
from psycopg import errors as pg_errors

from dpsql.server.machine.classify import Classifier
from tests.support.helpers import SAMPLE_TABLES

PASSWORD = "catalog pw"


def connect(served: SimpleNamespace, dbname: str = "dpsql") -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password=PASSWORD,
                           dbname=dbname, connect_timeout=10, autocommit=True)


def names(rows: list[tuple[object, ...]]) -> list[object]:
    return sorted(r[0] for r in rows)


# -- array literals and array parameters in catalog queries ----------------------------------


# the sample database, by name
TABLES = sorted(SAMPLE_TABLES)


def test_any_of_an_array_literal_or_parameter_finds_the_tables(served) -> None:
    base = "SELECT relname FROM pg_catalog.pg_class WHERE relnamespace = 2200 AND relkind "
    with connect(served) as conn:
        assert names(conn.execute(base + "= ANY('{r,p}')").fetchall()) == TABLES
        assert names(conn.execute(base + "= ANY(%s)", (["r", "p"],)).fetchall()) == \
            TABLES
        assert names(conn.execute(base + "= ANY('{\"r\", v}'::\"char\"[])").fetchall()) == \
            TABLES
        assert conn.execute(base + "= ANY('{v,m}')").fetchall() == []
        assert conn.execute(base + "<> ALL('{r,p,i}')").fetchall() == []  # i: visits_pkey
        assert names(conn.execute(base + "<> ALL(%s)", (["v", "i"],)).fetchall()) == \
            TABLES
        oids = conn.execute("SELECT typname FROM pg_catalog.pg_type WHERE oid = ANY(%s::oid[]) "
                            "ORDER BY typname", ([25, 20],)).fetchall()
        assert oids == [("int8",), ("text",)]
        quoted = conn.execute(r"""SELECT 'a,b' = ANY('{"a,b",c}'), 'x"y' = ANY('{"x\"y"}'),"""
                              r"""'NULL' = ANY('{"NULL"}'), 'z' = ANY('{NULL}')""").fetchone()
        assert quoted == (True, True, True, None)
        with pytest.raises(pg_errors.InvalidTextRepresentation, match="array literal"):
            conn.execute(base + "= ANY('{r,p')")


def test_pgspecial_lists_and_describes_tables(served) -> None:
    special = PGSpecial()
    with connect(served) as conn:
        for command, expected in ((r"\dt", TABLES), (r"\d", TABLES),
                                  (r"\dt peo*", ["people"])):
            [(_, cursor, headers, status)] = list(special.execute(conn.cursor(), command))
            assert headers == ["Schema", "Name", "Type", "Owner"], command
            rows = list(cursor)
            assert sorted(r[1] for r in rows) == expected, command
            assert status == f"SELECT {len(expected)}"
        described = list(special.execute(conn.cursor(), r"\d people"))
        columns = [row[0] for row in described[0][1]]
        assert columns[:3] == ["person_id", "age", "sex"]


# -- information_schema's catalog columns ----------------------------------------------------


@pytest.mark.parametrize("dbname", ["dpsql", "Analytics Db"])
def test_information_schema_names_the_connected_database(served, dbname: str) -> None:
    with connect(served, dbname) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (dbname,)
        schemata = conn.execute("SELECT DISTINCT catalog_name FROM information_schema.schemata"
                                ).fetchall()
        tables = conn.execute("SELECT t.table_catalog, t.table_name FROM "
                              "information_schema.tables t WHERE t.table_schema = 'public' "
                              "ORDER BY 2").fetchall()
        columns = conn.execute(
            "SELECT DISTINCT information_schema.columns.table_catalog, udt_catalog FROM "
            "information_schema.columns WHERE table_schema = 'public'").fetchall()
        joined = conn.execute(
            "SELECT count(*) FROM information_schema.tables t JOIN information_schema.columns c"
            " ON c.table_catalog = t.table_catalog AND c.table_name = t.table_name "
            "WHERE t.table_catalog = current_database()").fetchone()
    assert schemata == [(dbname,)]
    assert tables == [(dbname, t) for t in TABLES]
    assert columns == [(dbname, dbname)]
    assert joined is not None and joined[0] > 5


# -- type introspection is a catalog query ----------------------------------------------------


@pytest.mark.parametrize("query", [asyncpg.introspection.INTRO_LOOKUP_TYPES,
                                   asyncpg.introspection.INTRO_LOOKUP_TYPES_13],
                         ids=["INTRO_LOOKUP_TYPES", "INTRO_LOOKUP_TYPES_13"])
def test_asyncpg_type_introspection_is_answered(served, query: str) -> None:
    with connect(served) as conn:
        # libpq's own parameters ($1, an oid[] in text), as asyncpg sends them
        result = conn.pgconn.exec_params(query.encode(), [b"{25,1009}"], [1028])
        assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
        rows = {(result.get_value(i, 0), result.get_value(i, 2))
                for i in range(result.ntuples)}
    assert rows == {(b"25", b"text"), (b"1009", b"_text")}


def test_catalog_queries_are_recognised_whatever_their_shape(served) -> None:
    classifier = Classifier(set(served.db.metadata.tables), served.server.catalog.catalog_tables)
    catalog = [
        asyncpg.introspection.INTRO_LOOKUP_TYPES,
        "WITH RECURSIVE t(oid, depth) AS (SELECT oid, 0 FROM pg_type WHERE oid = 25 UNION ALL "
        "SELECT ty.typelem, t.depth + 1 FROM pg_type ty JOIN t ON ty.oid = t.oid "
        "WHERE ty.typelem <> 0) SELECT * FROM t",
        "SELECT c.relname FROM pg_class c LEFT JOIN pg_depend d ON d.objid = c.oid "
        "WHERE c.reltype = ANY('{25,1009}'::regtype[])",
        "SELECT $1::regclass[]",
    ]
    for text in catalog:
        assert classifier.classify(text).kind == "catalog", text
    private = [
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) "
        "SELECT count(*) FROM people, t",
        "SELECT c.relname FROM pg_class c LEFT JOIN people p ON p.age = c.oid",
        "SELECT relname FROM pg_class WHERE oid IN (SELECT age FROM public.people)",
    ]
    for text in private:
        assert classifier.classify(text).kind == "query", text


# -- = ANY($1) over private tables ------------------------------------------------------------


def test_any_of_an_array_parameter_filters_private_rows(served) -> None:
    """Answered as IN: the count is the exact count of the IN filter plus Laplace noise of
    scale 1 (epsilon 1, sensitivity 1): |noise| > 40 has probability e^-40 < 1e-17."""
    people = served.setup.database / "people.parquet"
    [(exact,)] = duckdb.sql(f"SELECT count(*) FROM '{people}' WHERE education IN "
                            "('master', 'doctorate')").fetchall()
    with connect(served) as conn:
        conn.execute("SET dpsql.epsilon = 1")
        [(by_list,)] = conn.execute("SELECT COUNT(*) FROM people WHERE education = ANY(%s)",
                                    (["master", "doctorate"],)).fetchall()
        [(by_literal,)] = conn.execute("SELECT COUNT(*) FROM people WHERE education = "
                                       "ANY('{master,doctorate}')").fetchall()
        [(none,)] = conn.execute("SELECT COUNT(*) FROM people WHERE age <> ALL(%s)",
                                 ([],)).fetchall()
        with pytest.raises(pg_errors.FeatureNotSupported, match="array literal"):
            conn.execute("SELECT COUNT(*) FROM people WHERE sex = ANY('{F,M')")
    assert abs(by_list - exact) < 40 and abs(by_literal - exact) < 40
    assert none > 1000
