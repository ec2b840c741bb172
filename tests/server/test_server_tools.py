"""BI tools' own catalog SQL through the wire: Metabase's sync, pgjdbc's DatabaseMetaData,
DBeaver's connect-time queries. Each is answered as PostgreSQL answers it for the declared
schema (keys from ``unique`` and ``unit_path``), or refused with an error the tool shows; and the
catalog reveals metadata only (no row count).

The SQL texts are the tools' own: Metabase's are its postgres driver's HoneySQL forms
(src/metabase/driver/postgres.clj: get-tables-sql, describe-fields-sql, describe-fks-sql,
describe-indexes-sql, current-user-table-privileges, enum-types) rendered as HoneySQL renders
them for schema "public" (quoted identifiers, values as parameters); DBeaver's are the PostgreSQL
plugin's (PostgreDataSource, PostgreExecutionContext, PostgreDatabase, PostgreSchema); pgjdbc's
are sent by the Debian jar itself (/usr/share/java/postgresql.jar).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import errors as pg_errors

from dpsql.ledger.spending import VIEWS as LEDGER_VIEWS
from tests.support.helpers import PGJDBC, compile_java

PASSWORD = "pw"  # alice's, for conftest's served
PRIVATE = ["people", "prescriptions", "visits"]
TABLES = sorted([*PRIVATE, "categories", "states"])


def connect(served: SimpleNamespace) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=served.port, user="alice", password="pw",
                           dbname="dpsql", autocommit=True, connect_timeout=10)


def query(served: SimpleNamespace, sql: str, params: tuple[object, ...] = ()
          ) -> list[dict[str, object]]:
    with connect(served) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# -- Metabase --------------------------------------------------------------------------------

METABASE_TABLES = (
    'SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", CASE "c"."relkind" WHEN \'r\' '
    "THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN "
    "'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS \"type\", "
    '"d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count" '
    'FROM "pg_catalog"."pg_class" AS "c" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON '
    '"c"."relnamespace" = "n"."oid" LEFT JOIN "pg_catalog"."pg_description" AS "d" ON '
    '("c"."oid" = "d"."objoid") AND ("d"."objsubid" = %s) AND ("d"."classoid" = '
    "'pg_class'::regclass) LEFT JOIN \"pg_stat_user_tables\" AS \"stat\" ON "
    '("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname") '
    'WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ %s) AND '
    '("n"."nspname" <> %s) AND c.relkind in (\'r\', \'p\', \'v\', \'f\', \'m\') AND '
    '("n"."nspname" IN (%s)) ORDER BY "type" ASC, "schema" ASC, "name" ASC')
METABASE_TABLES_PARAMS = (0, "^pg_", "information_schema", "public")

METABASE_FIELDS = (
    'SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN (\'public\', '
    "'pg_catalog') THEN FORMAT('%%s', \"c\".\"udt_name\") ELSE FORMAT('\"%%s\".\"%%s\"', "
    '"c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 '
    'AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS '
    '"table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST('
    "FORMAT('%%I.%%I', CAST(\"c\".\"table_schema\" AS TEXT), CAST(\"c\".\"table_name\" AS TEXT))"
    ' AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" '
    "IS NULL) OR (LOWER(\"column_default\") = 'null')) AND (\"is_nullable\" = 'NO') AND NOT "
    "(((\"column_default\" IS NOT NULL) AND (\"column_default\" LIKE '%%nextval(%%')) OR "
    "(\"is_identity\" <> 'NO')) AS \"database-required\", ((\"column_default\" IS NOT NULL) "
    "AND (\"column_default\" LIKE '%%nextval(%%')) OR (\"is_identity\" <> 'NO') AS "
    '"database-is-auto-increment" FROM "information_schema"."columns" AS "c" LEFT JOIN '
    '(SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM '
    '"information_schema"."table_constraints" AS "tc" INNER JOIN '
    '"information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = '
    '"kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND '
    '("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = \'PRIMARY KEY\') '
    'AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = '
    '"pk"."table_name") AND ("c"."column_name" = "pk"."column_name") WHERE c.table_schema !~ '
    "'^information_schema|catalog_history|pg_' AND (\"c\".\"table_schema\" IN (%s)) "
    'UNION ALL SELECT "pa"."attname" AS "name", CASE WHEN "ptn"."nspname" IN (\'public\', '
    "'pg_catalog') THEN FORMAT('%%s', \"pt\".\"typname\") ELSE FORMAT('\"%%s\".\"%%s\"', "
    '"ptn"."nspname", "pt"."typname") END AS "database-type", "pa"."attnum" - 1 AS '
    '"database-position", "pn"."nspname" AS "table-schema", "pc"."relname" AS "table-name", '
    'FALSE AS "pk?", NULL AS "field-comment", FALSE AS "database-required", FALSE AS '
    '"database-is-auto-increment" FROM "pg_catalog"."pg_class" AS "pc" INNER JOIN '
    '"pg_catalog"."pg_namespace" AS "pn" ON "pn"."oid" = "pc"."relnamespace" INNER JOIN '
    '"pg_catalog"."pg_attribute" AS "pa" ON "pa"."attrelid" = "pc"."oid" INNER JOIN '
    '"pg_catalog"."pg_type" AS "pt" ON "pt"."oid" = "pa"."atttypid" INNER JOIN '
    '"pg_catalog"."pg_namespace" AS "ptn" ON "ptn"."oid" = "pt"."typnamespace" WHERE '
    '("pc"."relkind" = \'m\') AND ("pa"."attnum" >= 1) AND ("pn"."nspname" IN (%s)) '
    'ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC')

METABASE_FKS = (
    'SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name", '
    '"fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema", '
    '"pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name" '
    'FROM "pg_constraint" AS "c" INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = '
    '"fk_table"."oid" INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = '
    '"fk_ns"."oid" INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = '
    '"fk_column"."attrelid" INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = '
    '"pk_table"."oid" INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = '
    '"pk_ns"."oid" INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = '
    '"pk_column"."attrelid" WHERE fk_ns.nspname !~ \'^information_schema|catalog_history|pg_\''
    ' AND ("c"."contype" = \'f\'::char) AND ("fk_column"."attnum" = ANY(c.conkey)) AND '
    '("pk_column"."attnum" = ANY(c.confkey)) AND ("fk_ns"."nspname" IN (%s)) '
    'ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC')

METABASE_INDEXES = (
    'SELECT "tmp"."table-schema", "tmp"."table-name", TRIM(BOTH \'"\' FROM '
    'PG_CATALOG.PG_GET_INDEXDEF("tmp"."ci_oid", "tmp"."pos", FALSE)) AS "field-name" FROM '
    '(SELECT "n"."nspname" AS "table-schema", "ct"."relname" AS "table-name", "ci"."oid" AS '
    '"ci_oid", (INFORMATION_SCHEMA._PG_EXPANDARRAY("i"."indkey")).n AS "pos" FROM '
    '"pg_catalog"."pg_class" AS "ct" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON '
    '"ct"."relnamespace" = "n"."oid" INNER JOIN "pg_catalog"."pg_index" AS "i" ON '
    '"ct"."oid" = "i"."indrelid" INNER JOIN "pg_catalog"."pg_class" AS "ci" ON "ci"."oid" = '
    '"i"."indexrelid" WHERE (PG_CATALOG.PG_GET_EXPR("i"."indpred", "i"."indrelid") IS NULL) '
    "AND n.nspname !~ '^information_schema|catalog_history|pg_' AND (\"n\".\"nspname\" IN "
    '(%s))) AS "tmp" WHERE "tmp"."pos" = 1')

_QUOTED = ("'\"' || replace(t.schemaname, '\"', '\"\"') || '\"' || '.' || '\"' || "
           "replace(t.objectname, '\"', '\"\"') || '\"'")
METABASE_PRIVILEGES = "\n".join([
    "with table_privileges as (",
    " select",
    "   NULL as role,",
    "   t.schemaname as schema,",
    "   t.objectname as table,",
    f"   pg_catalog.has_any_column_privilege(current_user, {_QUOTED},  'update') as update,",
    f"   pg_catalog.has_any_column_privilege(current_user, {_QUOTED},  'select') as select,",
    f"   pg_catalog.has_any_column_privilege(current_user, {_QUOTED},  'insert') as insert,",
    f"   pg_catalog.has_table_privilege(     current_user, {_QUOTED},  'delete') as delete",
    " from (",
    "   select schemaname, tablename as objectname from pg_catalog.pg_tables",
    "   union",
    "   select schemaname, viewname as objectname from pg_catalog.pg_views",
    "   union",
    "   select schemaname, matviewname as objectname from pg_catalog.pg_matviews",
    " ) t",
    " where t.schemaname !~ '^pg_'",
    "   and t.schemaname <> 'information_schema'",
    "   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')",
    ")",
    "select t.*",
    "from table_privileges t"])

METABASE_ENUMS = ("SELECT nspname, typname FROM pg_type t JOIN pg_namespace n ON "
                  "n.oid = t.typnamespace WHERE t.oid IN (SELECT DISTINCT enumtypid FROM "
                  "pg_enum e)")


def test_metabase_table_sync_lists_every_table_without_a_row_count(served) -> None:
    rows = query(served, METABASE_TABLES, METABASE_TABLES_PARAMS)
    assert [r["name"] for r in rows] == TABLES
    assert {r["type"] for r in rows} == {"TABLE"}
    # a never-analyzed table's count, as PostgreSQL shows it: never the private row count
    assert {r["estimated_row_count"] for r in rows} == {0}
    assert "privacy unit person_id" in next(r["description"] for r in rows
                                            if r["name"] == "people")


def test_metabase_field_sync_names_types_keys_and_comments(served) -> None:
    rows = query(served, METABASE_FIELDS, ("public", "public"))
    visits = [r for r in rows if r["table-name"] == "visits"]
    assert [r["name"] for r in visits] == ["visit_id", "person_id", "day", "category",
                                           "amount", "duration_min"]
    assert [r["database-type"] for r in visits] == ["int8", "int8", "date", "text", "float8",
                                                    "int8"]
    assert [r["name"] for r in rows if r["pk?"]] == ["visit_id"]
    assert all(r["database-required"] for r in visits)
    assert not any(r["database-is-auto-increment"] for r in rows)
    amount = next(r for r in visits if r["name"] == "amount")
    assert "declared bounds 0.0 .. 5000.0" in amount["field-comment"]


def test_metabase_fk_index_privilege_and_enum_sync(served) -> None:
    fks = query(served, METABASE_FKS, ("public",))
    assert [(r["fk-table-name"], r["fk-column-name"], r["pk-table-name"], r["pk-column-name"])
            for r in fks] == [("prescriptions", "visit_id", "visits", "visit_id")]
    indexes = query(served, METABASE_INDEXES, ("public",))
    assert [(r["table-name"], r["field-name"]) for r in indexes] == [("visits", "visit_id")]
    privileges = query(served, METABASE_PRIVILEGES)
    assert sorted(r["table"] for r in privileges) == sorted([*TABLES, *LEDGER_VIEWS])
    # an analyst reads and never writes: Metabase offers no editing
    assert {(r["select"], r["update"], r["insert"], r["delete"]) for r in privileges} == \
        {(True, False, False, False)}
    assert query(served, METABASE_ENUMS) == []


# -- DBeaver ---------------------------------------------------------------------------------

DBEAVER_CONNECT = [
    ("SELECT current_database()", ()),
    ("SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE 1 = 1 AND datallowconn AND NOT "
     "datistemplate OR db.datname =%s\nORDER BY db.datname", ("dpsql",)),
    ("SELECT version()", ()),
    ("select * from pg_catalog.pg_settings where name=%s", ("standard_conforming_strings",)),
    ("SELECT current_schema(),session_user", ()),
    ("SHOW search_path", ()),
    ("SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname=%s", ("dpsql",)),
    ("select description from pg_shdescription join pg_database on objoid = pg_database.oid "
     "where datname = %s", ("dpsql",)),
    ("SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n\nLEFT OUTER JOIN "
     "pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND "
     "d.classoid='pg_namespace'::regclass\n ORDER BY nspname", ()),
    ("SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as "
     "base_type_name, d.description\nFROM pg_catalog.pg_type t\nLEFT OUTER JOIN "
     "pg_catalog.pg_type et ON et.oid=t.typelem \nLEFT OUTER JOIN pg_catalog.pg_class c ON "
     "c.oid=t.typrelid\nLEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid\nWHERE "
     "t.typname IS NOT NULL\nAND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory "
     "IS NULL OR et.typcategory <> 'C')", ()),
    ("SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as "
     "partition_expr,  pg_catalog.pg_get_partkeydef(c.oid) as partition_key \nFROM "
     "pg_catalog.pg_class c\nLEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid "
     "AND d.objsubid=0 AND d.classoid='pg_class'::regclass\nWHERE c.relnamespace=%s AND "
     "c.relkind not in ('i','I','c')", (2200,)),
    ("SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,"
     "dsc.description,dep.objid\nFROM pg_catalog.pg_attribute a\nINNER JOIN "
     "pg_catalog.pg_class c ON (a.attrelid=c.oid)\nLEFT OUTER JOIN pg_catalog.pg_attrdef ad ON "
     "(a.attrelid=ad.adrelid AND a.attnum = ad.adnum)\nLEFT OUTER JOIN "
     "pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)\n"
     "LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and "
     "dep.refobjsubid = a.attnum and dep.classid = dep.refclassid\nWHERE NOT a.attisdropped "
     "AND c.relkind not in ('i','I','c') AND c.relnamespace=%s\nORDER BY a.attnum", (2200,)),
    ("SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, "
     "case when c.contype='c' then \"substring\"(pg_get_constraintdef(c.oid), 7) else null end "
     "consrc_copy\nFROM pg_catalog.pg_constraint c\nINNER JOIN pg_catalog.pg_class t ON "
     "t.oid=c.conrelid\nLEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid\n"
     "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND "
     "d.classoid='pg_constraint'::regclass\nWHERE t.relnamespace=%s\nORDER BY c.oid", (2200,)),
]


def test_dbeaver_connect_and_navigator_queries_answer(served) -> None:
    with connect(served) as conn:
        results = [conn.execute(sql, params).fetchall() for sql, params in DBEAVER_CONNECT]
    assert results[0] == [("dpsql",)]
    assert [r[2] for r in results[1]] == ["dpsql"]
    assert results[2][0][0].startswith("PostgreSQL 16")
    assert results[4] == [("public", "alice")]
    assert {r[2] for r in results[8]} >= {"public", "pg_catalog", "information_schema"}
    assert {"int8", "text", "float8", "date", "bool"} <= {r[2] for r in results[9]}
    assert sorted(r[2] for r in results[10]) == TABLES  # no index: relkind 'i' is excluded
    assert ("visits", "visit_id") in {(r[0], r[2]) for r in results[11]}
    constraints = {(r[2], r[4], r[-4]) for r in results[12]}  # conname, contype, tabrelname
    assert constraints == {("visits_pkey", "p", "visits"),
                           ("prescriptions_visit_id_fkey", "f", "prescriptions")}


# -- failing loudly --------------------------------------------------------------------------


def test_an_unsupported_catalog_query_is_an_error_with_a_short_log_line(
        served, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="dpsql.server.catalog"), connect(served) as conn:
        with pytest.raises(pg_errors.FeatureNotSupported, match="pg_ls_dir"):
            conn.execute("SELECT pg_catalog.pg_ls_dir('.') FROM pg_catalog.pg_class")
        with pytest.raises(pg_errors.FeatureNotSupported, match="catalog"):
            conn.execute("SELECT relname FROM pg_catalog.pg_class WHERE nosuchcolumn = 1")
        # statistics views hold data (most common values, histograms): not in the catalog
        with pytest.raises(pg_errors.FeatureNotSupported, match=r"pg_catalog\.pg_stats"):
            conn.execute("SELECT most_common_vals FROM pg_catalog.pg_stats")
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("dpsql.server")]
    assert len(lines) == 3 and all("\n" not in m and len(m) < 300 for m in lines), lines


# -- pgjdbc ----------------------------------------------------------------------------------

JAVA = r"""
import java.sql.*;

/** Calls DatabaseMetaData methods; prints each row as method|NAME=value|..., or an error. */
public class DpsqlMetaData {
    interface Call { ResultSet run() throws SQLException; }

    static void call(String method, Call call) {
        try (ResultSet rs = call.run()) {
            ResultSetMetaData m = rs.getMetaData();
            while (rs.next()) {
                StringBuilder b = new StringBuilder(method);
                for (int i = 1; i <= m.getColumnCount(); i++) {
                    b.append('|').append(m.getColumnLabel(i).toUpperCase()).append('=')
                        .append(rs.getString(i));
                }
                System.out.println(b);
            }
            System.out.println(method + "|done");
        } catch (SQLException e) {
            System.out.println(method + "|error " + e.getSQLState() + " " + e.getMessage());
        }
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
            DatabaseMetaData md = c.getMetaData();
            try {
                System.out.println("getSQLKeywords|" + md.getSQLKeywords());
            } catch (SQLException e) {
                System.out.println("getSQLKeywords|error " + e.getSQLState());
            }
            call("getSchemas", () -> md.getSchemas());
            call("getCatalogs", () -> md.getCatalogs());
            call("getTableTypes", () -> md.getTableTypes());
            call("getTables", () -> md.getTables(null, "public", "%", null));
            call("getTables:dpsql", () -> md.getTables(null, "dpsql", "%",
                new String[]{"VIEW"}));
            call("getColumns:dpsql", () -> md.getColumns(null, "dpsql", "budgets", "%"));
            call("getColumns", () -> md.getColumns(null, "public", "visits", "%"));
            call("getPrimaryKeys", () -> md.getPrimaryKeys(null, "public", "visits"));
            call("getImportedKeys", () -> md.getImportedKeys(null, "public", "prescriptions"));
            call("getExportedKeys", () -> md.getExportedKeys(null, "public", "visits"));
            call("getCrossReference", () -> md.getCrossReference(null, "public", "visits", null,
                "public", "prescriptions"));
            call("getIndexInfo", () -> md.getIndexInfo(null, "public", "visits", false, true));
            call("getBestRowIdentifier", () -> md.getBestRowIdentifier(null, "public", "visits",
                DatabaseMetaData.bestRowSession, true));
            call("getTablePrivileges", () -> md.getTablePrivileges(null, "public", "people"));
            call("getColumnPrivileges", () -> md.getColumnPrivileges(null, "public", "people",
                "age"));
            call("getFunctions", () -> md.getFunctions(null, "pg_catalog", "format_type"));
            call("getProcedures", () -> md.getProcedures(null, "public", "%"));
            call("getTypeInfo", () -> md.getTypeInfo());
            call("getUDTs", () -> md.getUDTs(null, "public", "%", null));
        }
    }
}
"""


@pytest.fixture(scope="session")
def metadata_program() -> Path:
    """DpsqlMetaData compiled once (javac takes seconds)."""
    return compile_java("DpsqlMetaData", JAVA)


def _rows(lines: list[str], method: str) -> list[dict[str, str]]:
    rows = []
    for line in lines:
        name, _, rest = line.partition("|")
        if name == method and "=" in rest:
            rows.append(dict(part.split("=", 1) for part in rest.split("|")))
    return rows


def test_pgjdbc_database_metadata(served, metadata_program: Path) -> None:
    java = shutil.which("java")
    assert java
    out = subprocess.run(
        [java, "-cp", f"{PGJDBC}:{metadata_program}", "DpsqlMetaData",
         f"jdbc:postgresql://127.0.0.1:{served.port}/dpsql", "alice", "pw"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert not [line for line in lines if "|error" in line]
    keywords = next(line for line in lines if line.startswith("getSQLKeywords|")).split("|")[1]
    # PostgreSQL's keywords minus SQL:2003's (pgjdbc removes those): "select" is not listed
    assert {"abort", "analyze", "vacuum"} <= set(keywords.split(",")) and \
        "select" not in keywords.split(",")
    assert {r["TABLE_SCHEM"] for r in _rows(lines, "getSchemas")} == \
        {"dpsql", "information_schema", "pg_catalog", "public"}
    # the ledger views (dpsql.ledger.spending), as DBeaver's and Metabase's JDBC lists them
    assert {(r["TABLE_SCHEM"], r["TABLE_NAME"], r["TABLE_TYPE"])
            for r in _rows(lines, "getTables:dpsql")} == {
        ("dpsql", v, "VIEW") for v in LEDGER_VIEWS}
    assert [(r["COLUMN_NAME"], r["TYPE_NAME"]) for r in _rows(lines, "getColumns:dpsql")][:3] \
        == [("analyst", "text"), ("epsilon_total", "float8"), ("epsilon_spent", "float8")]
    assert [r["TABLE_CAT"] for r in _rows(lines, "getCatalogs")] == ["dpsql"]
    tables = {(r["TABLE_NAME"], r["TABLE_TYPE"]) for r in _rows(lines, "getTables")}
    assert tables == {*((t, "TABLE") for t in TABLES), ("visits_pkey", "INDEX")}
    assert [(r["COLUMN_NAME"], r["TYPE_NAME"], r["IS_NULLABLE"])
            for r in _rows(lines, "getColumns")][:3] == [
        ("visit_id", "int8", "NO"), ("person_id", "int8", "NO"), ("day", "date", "NO")]
    assert [(r["COLUMN_NAME"], r["KEY_SEQ"], r["PK_NAME"])
            for r in _rows(lines, "getPrimaryKeys")] == [("visit_id", "1", "visits_pkey")]
    fk = {"PKTABLE_NAME": "visits", "PKCOLUMN_NAME": "visit_id",
          "FKTABLE_NAME": "prescriptions", "FKCOLUMN_NAME": "visit_id", "KEY_SEQ": "1",
          "FK_NAME": "prescriptions_visit_id_fkey", "PK_NAME": "visits_pkey"}
    for method in ("getImportedKeys", "getExportedKeys", "getCrossReference"):
        rows = _rows(lines, method)
        assert len(rows) == 1 and fk.items() <= rows[0].items(), (method, rows)
    assert [(r["INDEX_NAME"], r["NON_UNIQUE"], r["COLUMN_NAME"], r["ORDINAL_POSITION"])
            for r in _rows(lines, "getIndexInfo")] == [("visits_pkey", "f", "visit_id", "1")]
    assert [r["COLUMN_NAME"] for r in _rows(lines, "getBestRowIdentifier")] == ["visit_id"]
    for method in ("getTablePrivileges", "getColumnPrivileges"):
        assert {r["PRIVILEGE"] for r in _rows(lines, method)} == {"SELECT"}
    assert [r["FUNCTION_NAME"] for r in _rows(lines, "getFunctions")] == ["format_type"]
    assert {"int8", "float8", "text", "date", "bool"} <= \
        {r["TYPE_NAME"] for r in _rows(lines, "getTypeInfo")}
    assert f"{'getProcedures'}|done" in lines and "getUDTs|done" in lines
