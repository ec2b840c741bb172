"""The catalog that the proxy owns: pg_catalog and information_schema for PostgreSQL clients.

Drivers and BI tools learn what they can query from PostgreSQL's system catalogs. dpsql answers
those queries from a small in-memory DuckDB that holds catalog tables built from the metadata
only: the declared tables and their declared columns (types, nullability, and the declared
bounds and domains as column comments; the metadata is public by definition). It holds no row
of private data and cannot reach the database: it is a separate DuckDB instance with external
access disabled and its configuration locked. Row counts, sizes and statistics are never shown
(``reltuples = -1``, sizes NULL): they would be exact aggregates.

A catalog query is parsed with sqlglot's PostgreSQL dialect and rewritten for DuckDB:
``pg_catalog.X`` and ``information_schema.X`` name the tables and macros here; casts to
``regclass``/``regtype``/``oid``/``name`` become lookups or plain types; session functions
(``current_user``, ``current_setting('...')``, ``version()``, ...) become literals. If DuckDB
still cannot run it, the answer is an empty result with the query's column names, which is
what clients probing for optional features expect.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dpsql.cache import LRU
from dpsql.engines import locked
from dpsql.metadata import Column, Metadata, Table
from dpsql.parameters import parse_array_literal
from dpsql.server import types as t

log = logging.getLogger(__name__)

PG_SCHEMA = "dpsql_pg"  # where pg_catalog lives in the catalog DuckDB
IS_SCHEMA = "dpsql_is"  # and information_schema
PUBLIC_OID, CATALOG_OID, INFO_OID, TOAST_OID = 2200, 11, 13183, 99
OWNER_OID, ANALYST_OID, DATABASE_OID = 10, 16384, 16385
FIRST_TABLE_OID = 16400
OWNER = "dpsql"

# Well-known OIDs of catalog tables (regclass lookups such as 'pg_class'::regclass).
_KNOWN_OIDS = {"pg_type": 1247, "pg_attribute": 1249, "pg_proc": 1255, "pg_class": 1259,
               "pg_authid": 1260, "pg_database": 1262, "pg_tablespace": 1213,
               "pg_namespace": 2615, "pg_description": 2609, "pg_constraint": 2606,
               "pg_index": 2610, "pg_am": 2601, "pg_attrdef": 2604, "pg_inherits": 2611,
               "pg_trigger": 2620, "pg_rewrite": 2618, "pg_collation": 3456,
               "pg_depend": 2608, "pg_operator": 2617, "pg_language": 2612,
               "pg_extension": 3079, "pg_enum": 3501, "pg_range": 3541,
               "pg_policy": 3256, "pg_sequence": 2224, "pg_shdescription": 2396}

_OIDS = "BIGINT[]"
# name -> column definitions (PostgreSQL 16 names, DuckDB types). Tables marked with * are
# per-session: the rewrite replaces them with a VALUES list built from the session.
TABLES: dict[str, str] = {
    "pg_namespace": "oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR[]",
    "pg_class": (
        "oid BIGINT, relname VARCHAR, relnamespace BIGINT, reltype BIGINT, reloftype BIGINT, "
        "relowner BIGINT, relam BIGINT, relfilenode BIGINT, reltablespace BIGINT, "
        "relpages INTEGER, reltuples REAL, relallvisible INTEGER, reltoastrelid BIGINT, "
        "relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence VARCHAR, relkind VARCHAR, "
        "relnatts SMALLINT, relchecks SMALLINT, relhasrules BOOLEAN, relhastriggers BOOLEAN, "
        "relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN, "
        "relispopulated BOOLEAN, relreplident VARCHAR, relispartition BOOLEAN, "
        "relrewrite BIGINT, relfrozenxid BIGINT, relminmxid BIGINT, relacl VARCHAR[], "
        "reloptions VARCHAR[], relpartbound VARCHAR, relhasoids BOOLEAN"),
    "pg_attribute": (
        "attrelid BIGINT, attname VARCHAR, atttypid BIGINT, attlen SMALLINT, attnum SMALLINT, "
        "attcacheoff INTEGER, atttypmod INTEGER, attndims SMALLINT, attbyval BOOLEAN, "
        "attalign VARCHAR, attstorage VARCHAR, attcompression VARCHAR, attnotnull BOOLEAN, "
        "atthasdef BOOLEAN, atthasmissing BOOLEAN, attidentity VARCHAR, attgenerated VARCHAR, "
        "attisdropped BOOLEAN, attislocal BOOLEAN, attinhcount SMALLINT, "
        "attstattarget SMALLINT, attcollation BIGINT, attacl VARCHAR[], attoptions VARCHAR[], "
        "attfdwoptions VARCHAR[], attmissingval VARCHAR"),
    "pg_type": (
        "oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT, typlen SMALLINT, "
        "typbyval BOOLEAN, typtype VARCHAR, typcategory VARCHAR, typispreferred BOOLEAN, "
        "typisdefined BOOLEAN, typdelim VARCHAR, typrelid BIGINT, typsubscript VARCHAR, "
        "typelem BIGINT, typarray BIGINT, typinput VARCHAR, typoutput VARCHAR, "
        "typreceive VARCHAR, typsend VARCHAR, typmodin VARCHAR, typmodout VARCHAR, "
        "typanalyze VARCHAR, typalign VARCHAR, typstorage VARCHAR, typnotnull BOOLEAN, "
        "typbasetype BIGINT, typtypmod INTEGER, typndims INTEGER, typcollation BIGINT, "
        "typdefaultbin VARCHAR, typdefault VARCHAR, typacl VARCHAR[]"),
    "pg_description": "objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR",
    "pg_attrdef": "oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR",
    "pg_am": "oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR",
    "pg_tablespace": ("oid BIGINT, spcname VARCHAR, spcowner BIGINT, spcacl VARCHAR[], "
                      "spcoptions VARCHAR[]"),
    "pg_collation": (
        "oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT, "
        "collprovider VARCHAR, collisdeterministic BOOLEAN, collencoding INTEGER, "
        "collcollate VARCHAR, collctype VARCHAR, colliculocale VARCHAR, collicurules VARCHAR, "
        "collversion VARCHAR"),
    "pg_index": (
        "indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT, "
        "indisunique BOOLEAN, indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, "
        "indisexclusion BOOLEAN, indimmediate BOOLEAN, indisclustered BOOLEAN, "
        "indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN, indislive BOOLEAN, "
        "indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[], "
        "indclass BIGINT[], indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR"),
    "pg_constraint": (
        "oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR, "
        "condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, "
        "contypid BIGINT, conindid BIGINT, conparentid BIGINT, confrelid BIGINT, "
        "confupdtype VARCHAR, confdeltype VARCHAR, confmatchtype VARCHAR, conislocal BOOLEAN, "
        "coninhcount SMALLINT, connoinherit BOOLEAN, conkey SMALLINT[], confkey SMALLINT[], "
        "conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[], "
        "confdelsetcols SMALLINT[], conexclop BIGINT[], conbin VARCHAR"),
    "pg_inherits": ("inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, "
                    "inhdetachpending BOOLEAN"),
    "pg_trigger": ("oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, "
                   "tgfoid BIGINT, tgtype SMALLINT, tgenabled VARCHAR, tgisinternal BOOLEAN, "
                   "tgconstrrelid BIGINT, tgconstrindid BIGINT, tgconstraint BIGINT, "
                   "tgdeferrable BOOLEAN, tginitdeferred BOOLEAN, tgnargs SMALLINT, "
                   "tgattr SMALLINT[], tgargs VARCHAR, tgqual VARCHAR, tgoldtable VARCHAR, "
                   "tgnewtable VARCHAR"),
    "pg_rewrite": ("oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, "
                   "ev_enabled VARCHAR, is_instead BOOLEAN, ev_qual VARCHAR, ev_action VARCHAR"),
    "pg_policy": ("oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, "
                  "polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, "
                  "polwithcheck VARCHAR"),
    "pg_proc": (
        "oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT, prolang BIGINT, "
        "procost REAL, prorows REAL, provariadic BIGINT, prosupport VARCHAR, prokind VARCHAR, "
        "prosecdef BOOLEAN, proleakproof BOOLEAN, proisstrict BOOLEAN, proretset BOOLEAN, "
        "provolatile VARCHAR, proparallel VARCHAR, pronargs SMALLINT, "
        "pronargdefaults SMALLINT, prorettype BIGINT, proargtypes BIGINT[], "
        "proallargtypes BIGINT[], proargmodes VARCHAR[], proargnames VARCHAR[], "
        "proargdefaults VARCHAR, protrftypes BIGINT[], prosrc VARCHAR, probin VARCHAR, "
        "prosqlbody VARCHAR, proconfig VARCHAR[], proacl VARCHAR[]"),
    "pg_depend": ("classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, "
                  "refobjid BIGINT, refobjsubid INTEGER, deptype VARCHAR"),
    "pg_enum": "oid BIGINT, enumtypid BIGINT, enumsortorder REAL, enumlabel VARCHAR",
    "pg_range": ("rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT, "
                 "rngcollation BIGINT, rngsubopc BIGINT, rngcanonical VARCHAR, "
                 "rngsubdiff VARCHAR"),
    "pg_sequence": ("seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT, seqincrement BIGINT, "
                    "seqmax BIGINT, seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN"),
    "pg_extension": ("oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT, "
                     "extrelocatable BOOLEAN, extversion VARCHAR, extconfig BIGINT[], "
                     "extcondition VARCHAR[]"),
    "pg_language": ("oid BIGINT, lanname VARCHAR, lanowner BIGINT, lanispl BOOLEAN, "
                    "lanpltrusted BOOLEAN, lanplcallfoid BIGINT, laninline BIGINT, "
                    "lanvalidator BIGINT, lanacl VARCHAR[]"),
    "pg_operator": ("oid BIGINT, oprname VARCHAR, oprnamespace BIGINT, oprowner BIGINT, "
                    "oprkind VARCHAR, oprcanmerge BOOLEAN, oprcanhash BOOLEAN, oprleft BIGINT, "
                    "oprright BIGINT, oprresult BIGINT, oprcom BIGINT, oprnegate BIGINT, "
                    "oprcode VARCHAR, oprrest VARCHAR, oprjoin VARCHAR"),
    "pg_cast": ("oid BIGINT, castsource BIGINT, casttarget BIGINT, castfunc BIGINT, "
                "castcontext VARCHAR, castmethod VARCHAR"),
    "pg_statistic_ext": ("oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, "
                         "stxowner BIGINT, stxstattarget INTEGER, stxkeys SMALLINT[], "
                         "stxkind VARCHAR[], stxexprs VARCHAR"),
    "pg_publication": ("oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN, "
                       "pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN, "
                       "pubtruncate BOOLEAN, pubviaroot BOOLEAN"),
    "pg_publication_rel": ("oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, "
                           "prattrs SMALLINT[]"),
    "pg_publication_namespace": "oid BIGINT, pnpubid BIGINT, pnnspid BIGINT",
    "pg_foreign_table": "ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]",
    "pg_foreign_server": ("oid BIGINT, srvname VARCHAR, srvowner BIGINT, srvfdw BIGINT, "
                          "srvtype VARCHAR, srvversion VARCHAR, srvacl VARCHAR[], "
                          "srvoptions VARCHAR[]"),
    "pg_foreign_data_wrapper": ("oid BIGINT, fdwname VARCHAR, fdwowner BIGINT, "
                                "fdwhandler BIGINT, fdwvalidator BIGINT, fdwacl VARCHAR[], "
                                "fdwoptions VARCHAR[]"),
    "pg_partitioned_table": ("partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT, "
                             "partdefid BIGINT, partattrs SMALLINT[], partclass BIGINT[], "
                             "partcollation BIGINT[], partexprs VARCHAR"),
    "pg_event_trigger": ("oid BIGINT, evtname VARCHAR, evtevent VARCHAR, evtowner BIGINT, "
                         "evtfoid BIGINT, evtenabled VARCHAR, evttags VARCHAR[]"),
    "pg_shdescription": "objoid BIGINT, classoid BIGINT, description VARCHAR",
    "pg_seclabel": ("objoid BIGINT, classoid BIGINT, objsubid INTEGER, provider VARCHAR, "
                    "label VARCHAR"),
    "pg_conversion": ("oid BIGINT, conname VARCHAR, connamespace BIGINT, conowner BIGINT, "
                      "conforencoding INTEGER, contoencoding INTEGER, conproc VARCHAR, "
                      "condefault BOOLEAN"),
    "pg_opclass": ("oid BIGINT, opcmethod BIGINT, opcname VARCHAR, opcnamespace BIGINT, "
                   "opcowner BIGINT, opcfamily BIGINT, opcintype BIGINT, opcdefault BOOLEAN, "
                   "opckeytype BIGINT"),
    "pg_aggregate": "aggfnoid BIGINT, aggkind VARCHAR, aggnumdirectargs SMALLINT",
    "pg_tables": ("schemaname VARCHAR, tablename VARCHAR, tableowner VARCHAR, "
                  "tablespace VARCHAR, hasindexes BOOLEAN, hasrules BOOLEAN, "
                  "hastriggers BOOLEAN, rowsecurity BOOLEAN"),
    "pg_views": ("schemaname VARCHAR, viewname VARCHAR, viewowner VARCHAR, "
                 "definition VARCHAR"),
    "pg_matviews": ("schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, "
                    "tablespace VARCHAR, hasindexes BOOLEAN, ispopulated BOOLEAN, "
                    "definition VARCHAR"),
    "pg_indexes": ("schemaname VARCHAR, tablename VARCHAR, indexname VARCHAR, "
                   "tablespace VARCHAR, indexdef VARCHAR"),
    "pg_sequences": ("schemaname VARCHAR, sequencename VARCHAR, sequenceowner VARCHAR, "
                     "data_type VARCHAR, start_value BIGINT, min_value BIGINT, "
                     "max_value BIGINT, increment_by BIGINT, cycle BOOLEAN, "
                     "cache_size BIGINT, last_value BIGINT"),
    "pg_stat_activity": ("datid BIGINT, datname VARCHAR, pid INTEGER, usesysid BIGINT, "
                         "usename VARCHAR, application_name VARCHAR, client_addr VARCHAR, "
                         "backend_start TIMESTAMPTZ, state VARCHAR, query VARCHAR, "
                         "backend_type VARCHAR"),
    "pg_available_extensions": ("name VARCHAR, default_version VARCHAR, "
                                "installed_version VARCHAR, comment VARCHAR"),
    "pg_timezone_names": ("name VARCHAR, abbrev VARCHAR, utc_offset INTERVAL, "
                          "is_dst BOOLEAN"),
    "pg_prepared_statements": ("name VARCHAR, statement VARCHAR, "
                               "prepare_time TIMESTAMPTZ, parameter_types VARCHAR[], "
                               "from_sql BOOLEAN"),
    "pg_locks": ("locktype VARCHAR, database BIGINT, relation BIGINT, pid INTEGER, "
                 "mode VARCHAR, granted BOOLEAN"),
    "pg_stat_user_tables": "relid BIGINT, schemaname VARCHAR, relname VARCHAR",
    # per-session tables
    "pg_database": (
        "oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER, datlocprovider VARCHAR, "
        "datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, "
        "datfrozenxid BIGINT, datminmxid BIGINT, dattablespace BIGINT, datcollate VARCHAR, "
        "datctype VARCHAR, daticulocale VARCHAR, daticurules VARCHAR, datcollversion VARCHAR, "
        "datacl VARCHAR[]"),
    "pg_roles": (
        "oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, "
        "rolcreaterole BOOLEAN, rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, "
        "rolreplication BOOLEAN, rolconnlimit INTEGER, rolpassword VARCHAR, "
        "rolvaliduntil TIMESTAMPTZ, rolbypassrls BOOLEAN, rolconfig VARCHAR[]"),
    "pg_settings": (
        "name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR, "
        "extra_desc VARCHAR, context VARCHAR, vartype VARCHAR, source VARCHAR, "
        "min_val VARCHAR, max_val VARCHAR, enumvals VARCHAR[], boot_val VARCHAR, "
        "reset_val VARCHAR, sourcefile VARCHAR, sourceline INTEGER, pending_restart BOOLEAN"),
}
TABLES["pg_authid"] = TABLES["pg_roles"]
TABLES["pg_user"] = ("usename VARCHAR, usesysid BIGINT, usecreatedb BOOLEAN, "
                     "usesuper BOOLEAN, userepl BOOLEAN, usebypassrls BOOLEAN, "
                     "passwd VARCHAR, valuntil TIMESTAMPTZ, useconfig VARCHAR[]")
SESSION_TABLES = {"pg_database", "pg_roles", "pg_authid", "pg_user", "pg_settings",
                  "pg_stat_activity"}

INFO_TABLES: dict[str, str] = {
    "schemata": ("catalog_name VARCHAR, schema_name VARCHAR, schema_owner VARCHAR, "
                 "default_character_set_catalog VARCHAR, default_character_set_schema VARCHAR, "
                 "default_character_set_name VARCHAR, sql_path VARCHAR"),
    "tables": ("table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, "
               "table_type VARCHAR, self_referencing_column_name VARCHAR, "
               "reference_generation VARCHAR, user_defined_type_catalog VARCHAR, "
               "user_defined_type_schema VARCHAR, user_defined_type_name VARCHAR, "
               "is_insertable_into VARCHAR, is_typed VARCHAR, commit_action VARCHAR"),
    "columns": (
        "table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, column_name VARCHAR, "
        "ordinal_position INTEGER, column_default VARCHAR, is_nullable VARCHAR, "
        "data_type VARCHAR, character_maximum_length INTEGER, character_octet_length INTEGER, "
        "numeric_precision INTEGER, numeric_precision_radix INTEGER, numeric_scale INTEGER, "
        "datetime_precision INTEGER, interval_type VARCHAR, interval_precision INTEGER, "
        "character_set_catalog VARCHAR, character_set_schema VARCHAR, "
        "character_set_name VARCHAR, collation_catalog VARCHAR, collation_schema VARCHAR, "
        "collation_name VARCHAR, domain_catalog VARCHAR, domain_schema VARCHAR, "
        "domain_name VARCHAR, udt_catalog VARCHAR, udt_schema VARCHAR, udt_name VARCHAR, "
        "scope_catalog VARCHAR, scope_schema VARCHAR, scope_name VARCHAR, "
        "maximum_cardinality INTEGER, dtd_identifier VARCHAR, is_self_referencing VARCHAR, "
        "is_identity VARCHAR, identity_generation VARCHAR, identity_start VARCHAR, "
        "identity_increment VARCHAR, identity_maximum VARCHAR, identity_minimum VARCHAR, "
        "identity_cycle VARCHAR, is_generated VARCHAR, generation_expression VARCHAR, "
        "is_updatable VARCHAR"),
    "views": ("table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, "
              "view_definition VARCHAR, check_option VARCHAR, is_updatable VARCHAR, "
              "is_insertable_into VARCHAR"),
    "table_constraints": ("constraint_catalog VARCHAR, constraint_schema VARCHAR, "
                          "constraint_name VARCHAR, table_catalog VARCHAR, "
                          "table_schema VARCHAR, table_name VARCHAR, constraint_type VARCHAR, "
                          "is_deferrable VARCHAR, initially_deferred VARCHAR, "
                          "enforced VARCHAR, nulls_distinct VARCHAR"),
    "key_column_usage": ("constraint_catalog VARCHAR, constraint_schema VARCHAR, "
                         "constraint_name VARCHAR, table_catalog VARCHAR, "
                         "table_schema VARCHAR, table_name VARCHAR, column_name VARCHAR, "
                         "ordinal_position INTEGER, position_in_unique_constraint INTEGER"),
    "referential_constraints": ("constraint_catalog VARCHAR, constraint_schema VARCHAR, "
                                "constraint_name VARCHAR, unique_constraint_catalog VARCHAR, "
                                "unique_constraint_schema VARCHAR, "
                                "unique_constraint_name VARCHAR, match_option VARCHAR, "
                                "update_rule VARCHAR, delete_rule VARCHAR"),
    "constraint_column_usage": ("table_catalog VARCHAR, table_schema VARCHAR, "
                                "table_name VARCHAR, column_name VARCHAR, "
                                "constraint_catalog VARCHAR, constraint_schema VARCHAR, "
                                "constraint_name VARCHAR"),
    "routines": ("specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR, "
                 "routine_catalog VARCHAR, routine_schema VARCHAR, routine_name VARCHAR, "
                 "routine_type VARCHAR, data_type VARCHAR"),
    "parameters": ("specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR, "
                   "ordinal_position INTEGER, parameter_mode VARCHAR, parameter_name VARCHAR, "
                   "data_type VARCHAR"),
    "sequences": ("sequence_catalog VARCHAR, sequence_schema VARCHAR, sequence_name VARCHAR, "
                  "data_type VARCHAR"),
    "table_privileges": ("grantor VARCHAR, grantee VARCHAR, table_catalog VARCHAR, "
                         "table_schema VARCHAR, table_name VARCHAR, privilege_type VARCHAR, "
                         "is_grantable VARCHAR, with_hierarchy VARCHAR"),
    "character_sets": ("character_set_catalog VARCHAR, character_set_schema VARCHAR, "
                       "character_set_name VARCHAR, character_repertoire VARCHAR, "
                       "form_of_use VARCHAR, default_collate_catalog VARCHAR, "
                       "default_collate_schema VARCHAR, default_collate_name VARCHAR"),
    "triggers": ("trigger_catalog VARCHAR, trigger_schema VARCHAR, trigger_name VARCHAR, "
                 "event_manipulation VARCHAR, event_object_catalog VARCHAR, "
                 "event_object_schema VARCHAR, event_object_table VARCHAR"),
}

# Functions answered by macros in PG_SCHEMA (name -> list of (parameters, body)).
_MACROS: dict[str, list[tuple[str, str]]] = {
    "format_type": [("t, m", f"""CASE
        WHEN t IS NULL THEN NULL
        WHEN t = 1043 AND m > 4 THEN 'character varying(' || (m - 4) || ')'
        WHEN t = 1042 AND m > 4 THEN 'character(' || (m - 4) || ')'
        WHEN t = 1700 AND m > 4 THEN 'numeric(' || ((m - 4) >> 16) || ',' || ((m - 4) & 65535)
                                     || ')'
        ELSE coalesce((SELECT n.sql_name FROM {PG_SCHEMA}.__type_names n WHERE n.oid = t),
                      '???') END""")],
    "pg_get_userbyid": [("r", f"CASE WHEN r = {OWNER_OID} THEN '{OWNER}' "
                              "ELSE 'unknown (OID=' || r || ')' END")],
    "pg_table_is_visible": [("o", "true")],
    "pg_type_is_visible": [("o", "true")],
    "pg_function_is_visible": [("o", "true")],
    "pg_get_expr": [("e, r", "CAST(NULL AS VARCHAR)"), ("e, r, p", "CAST(NULL AS VARCHAR)")],
    "obj_description": [
        ("o", f"(SELECT d.description FROM {PG_SCHEMA}.pg_description d "
              "WHERE d.objoid = o AND d.objsubid = 0 LIMIT 1)"),
        ("o, c", f"(SELECT d.description FROM {PG_SCHEMA}.pg_description d "
                 "WHERE d.objoid = o AND d.objsubid = 0 LIMIT 1)")],
    "col_description": [("o, n", f"(SELECT d.description FROM {PG_SCHEMA}.pg_description d "
                                  "WHERE d.objoid = o AND d.objsubid = n LIMIT 1)")],
    "shobj_description": [("o, c", "CAST(NULL AS VARCHAR)")],
    "pg_get_indexdef": [("o", "CAST(NULL AS VARCHAR)"), ("o, c, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_constraintdef": [("o", "CAST(NULL AS VARCHAR)"),
                             ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_viewdef": [("o", "CAST(NULL AS VARCHAR)"), ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_triggerdef": [("o", "CAST(NULL AS VARCHAR)"), ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_ruledef": [("o", "CAST(NULL AS VARCHAR)"), ("o, p", "CAST(NULL AS VARCHAR)")],
    "pg_get_partkeydef": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_statisticsobjdef_columns": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_function_result": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_function_arguments": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_function_identity_arguments": [("o", "CAST(NULL AS VARCHAR)")],
    "pg_get_serial_sequence": [("a, b", "CAST(NULL AS VARCHAR)")],
    "pg_encoding_to_char": [("e", "'UTF8'")],
    "pg_char_to_encoding": [("e", "6")],
    "pg_relation_size": [("o", "CAST(NULL AS BIGINT)"), ("o, f", "CAST(NULL AS BIGINT)")],
    "pg_total_relation_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_table_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_indexes_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_database_size": [("o", "CAST(NULL AS BIGINT)")],
    "pg_size_pretty": [("s", "CAST(s AS VARCHAR) || ' bytes'")],
    "pg_is_in_recovery": [("", "false")],
    "pg_relation_is_publishable": [("o", "false")],
    "txid_current": [("", "1")],
    "pg_current_xact_id": [("", "1")],
    "array_upper": [("a, d", "CASE WHEN a IS NULL OR len(a) = 0 THEN NULL ELSE len(a) END")],
    "array_lower": [("a, d", "CASE WHEN a IS NULL OR len(a) = 0 THEN NULL ELSE 1 END")],
    "quote_ident": [("s", "CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') THEN s "
                          "ELSE '\"' || replace(s, '\"', '\"\"') || '\"' END")],
    "to_regclass": [("s", f"(SELECT c.oid FROM {PG_SCHEMA}.pg_class c "
                          "WHERE c.relname = s LIMIT 1)")],
    "to_regtype": [("s", f"(SELECT ty.oid FROM {PG_SCHEMA}.pg_type ty "
                         "WHERE ty.typname = s LIMIT 1)")],
    "pg_has_role": [("a, b", "true"), ("a, b, c", "true")],
    **{name: [("a, b", "true"), ("a, b, c", "true")]
       for name in ("has_table_privilege", "has_schema_privilege", "has_database_privilege",
                    "has_function_privilege", "has_sequence_privilege",
                    "has_any_column_privilege", "has_language_privilege",
                    "has_tablespace_privilege", "has_type_privilege")},
    "has_column_privilege": [("a, b, c", "true"), ("a, b, c, d", "true")],
}
_REG_NAMESPACE_TYPES = {"regclass", "regtype", "regproc", "regprocedure", "regnamespace",
                        "regoper", "regoperator", "regrole", "regconfig", "regdictionary",
                        "regcollation"}
_PLAIN_TYPES = {
    "oid": "BIGINT", "xid": "BIGINT", "cid": "BIGINT", "tid": "VARCHAR", "name": "VARCHAR",
    '"char"': "VARCHAR", "char": "VARCHAR", "text": "VARCHAR", "bpchar": "VARCHAR",
    "varchar": "VARCHAR", "character varying": "VARCHAR", "int2": "SMALLINT",
    "int4": "INTEGER", "int8": "BIGINT", "float4": "FLOAT", "float8": "DOUBLE",
    "bool": "BOOLEAN", "int2vector": "SMALLINT[]", "oidvector": "BIGINT[]", "_text": "VARCHAR[]",
    "text[]": "VARCHAR[]", "name[]": "VARCHAR[]", "oid[]": "BIGINT[]", "_oid": "BIGINT[]",
    "aclitem[]": "VARCHAR[]", "aclitem": "VARCHAR", "pg_node_tree": "VARCHAR",
    "anyarray": "VARCHAR", "regclass[]": "BIGINT[]", "xid8": "BIGINT",
}


@dataclass
class SessionInfo:
    """What catalog answers may depend on: the session, never the data."""

    user: str
    database: str
    pid: int
    settings: Mapping[str, str]
    start_time: dt.datetime
    version: str  # the version() text

    def key(self) -> tuple[object, ...]:
        return (self.user, self.database, self.pid, tuple(sorted(self.settings.items())))


@dataclass
class CatalogQuery:
    sql: str  # DuckDB SQL over the catalog
    names: list[str] | None  # PostgreSQL's column names, when they can be computed


@dataclass
class CatalogResult:
    names: list[str]
    types: list[str]  # DuckDB type names
    rows: list[tuple[object, ...]] = field(default_factory=list)


class CatalogError(Exception):
    """A catalog query that cannot be answered at all (SQLSTATE in ``sqlstate``)."""

    def __init__(self, message: str, sqlstate: str = "0A000") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


# -- building the catalog --------------------------------------------------------------------


def _table_oids(metadata: Metadata) -> dict[str, int]:
    return {name: FIRST_TABLE_OID + i for i, name in enumerate(metadata.tables)}


def _column_comment(column: Column) -> str:
    parts = []
    if column.description and column.description.strip():
        parts.append(column.description.strip())
    if column.lower is not None and column.upper is not None:
        parts.append(f"declared bounds {column.lower} .. {column.upper} (values are clamped)")
    if column.values is not None:
        shown = ", ".join(map(str, column.values[:20]))
        more = ", ..." if len(column.values) > 20 else ""
        parts.append(f"public GROUP BY keys: {shown}{more}")
    elif column.public_range:
        parts.append("public GROUP BY keys: every integer in the bounds")
    return "; ".join(parts)


def _table_comment(table: Table) -> str:
    parts = []
    if table.description and table.description.strip():
        parts.append(table.description.strip())
    if table.public:  # dpsql.public: read exactly by any SELECT that reads nothing private
        parts.append("public: read exactly, no noise and no privacy cost")
        return "; ".join(parts)
    parts.append("differentially private: aggregate queries only")
    if table.privacy_unit:
        parts.append(f"privacy unit {table.privacy_unit}, at most {table.max_rows_per_unit} "
                     f"row(s) and {table.max_groups_per_unit} group(s) per unit")
    return "; ".join(parts)


class Catalog:
    """The in-memory catalog DuckDB, shared by all sessions (read by many threads)."""

    def __init__(self, metadata: Metadata, memory_limit: str = "256MB") -> None:
        self.metadata = metadata
        self.table_oids = _table_oids(metadata)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._cache: LRU[tuple[object, ...], CatalogQuery] = LRU(1024)
        def build(con: duckdb.DuckDBPyConnection) -> None:
            self._build(con)
            con.execute(f"SET memory_limit = '{memory_limit}'")
            con.execute("SET threads = 2")

        self._con = locked.in_memory(build)
        self.catalog_tables = set(TABLES)
        self.info_tables = set(INFO_TABLES)

    # --- building

    def _build(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute(f"CREATE SCHEMA {PG_SCHEMA}")
        con.execute(f"CREATE SCHEMA {IS_SCHEMA}")
        for name, columns in TABLES.items():
            con.execute(f"CREATE TABLE {PG_SCHEMA}.{name} ({columns})")
        for name, columns in INFO_TABLES.items():
            con.execute(f"CREATE TABLE {IS_SCHEMA}.{name} ({columns})")
        con.execute(f"CREATE TABLE {PG_SCHEMA}.__type_names (oid BIGINT, sql_name VARCHAR)")
        type_names = [(ty.oid, ty.sql_name) for ty in t.TYPES.values()]
        type_names += [(ty.array_oid, ty.sql_name + "[]") for ty in t.TYPES.values()
                       if ty.array_oid]
        self._insert(con, f"{PG_SCHEMA}.__type_names", type_names)
        for name, overloads in _MACROS.items():
            bodies = ", ".join(f"({params}) AS {body}" for params, body in overloads)
            con.execute(f"CREATE MACRO {PG_SCHEMA}.{name} {bodies}")
        self._fill(con)

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[object]],
                columns: Sequence[str] | None = None) -> None:
        if not rows:
            return
        names = f" ({', '.join(columns)})" if columns else ""
        marks = ", ".join("?" for _ in rows[0])
        con.executemany(f"INSERT INTO {table}{names} VALUES ({marks})", [list(r) for r in rows])

    def _fill(self, con: duckdb.DuckDBPyConnection) -> None:
        pg, md = PG_SCHEMA, self.metadata
        self._insert(con, f"{pg}.pg_namespace", [
            (CATALOG_OID, "pg_catalog", OWNER_OID, None), (PUBLIC_OID, "public", OWNER_OID, None),
            (INFO_OID, "information_schema", OWNER_OID, None),
            (TOAST_OID, "pg_toast", OWNER_OID, None)])
        self._insert(con, f"{pg}.pg_am", [(2, "heap", "heap_tableam_handler", "t"),
                                          (403, "btree", "bthandler", "i")])
        self._insert(con, f"{pg}.pg_tablespace", [(1663, "pg_default", OWNER_OID, None, None),
                                                  (1664, "pg_global", OWNER_OID, None, None)])
        self._insert(con, f"{pg}.pg_collation", [
            (100, "default", CATALOG_OID, OWNER_OID, "d", True, -1, None, None, None, None, None),
            (950, "C", CATALOG_OID, OWNER_OID, "c", True, -1, "C", "C", None, None, None),
            (951, "POSIX", CATALOG_OID, OWNER_OID, "c", True, -1, "POSIX", "POSIX", None, None,
             None)])
        self._insert(con, f"{pg}.pg_language", [
            (12, "internal", OWNER_OID, False, False, 0, 0, 0, None),
            (13, "c", OWNER_OID, False, False, 0, 0, 0, None),
            (14, "sql", OWNER_OID, False, True, 0, 0, 0, None)])
        types = []
        for ty in t.TYPES.values():
            types.append(_type_row(ty.oid, ty.name, ty.length, "b", ty.category, 0,
                                   ty.array_oid, f"{ty.name}in", ty.oid in (t.TEXT, t.VARCHAR,
                                                                            t.BPCHAR, t.NAME)))
            if ty.array_oid:
                types.append(_type_row(ty.array_oid, "_" + ty.name, -1, "b", "A", ty.oid, 0,
                                       "array_in", False))
        self._insert(con, f"{pg}.pg_type", types)
        classes, attributes, descriptions, tables, info_tables, info_columns = \
            [], [], [], [], [], []
        catalog_names = list(TABLES)
        next_oid = 13500
        for name in catalog_names:
            oid = _KNOWN_OIDS.get(name)
            if oid is None:
                oid, next_oid = next_oid, next_oid + 1
            classes.append(_class_row(oid, name, CATALOG_OID, "r", TABLES[name].count(",") + 1))
        for tname, table in md.tables.items():
            oid = self.table_oids[tname]
            classes.append(_class_row(oid, tname, PUBLIC_OID, "r", len(table.columns)))
            descriptions.append((oid, 1259, 0, _table_comment(table)))
            tables.append(("public", tname, OWNER, None, False, False, False, False))
            info_tables.append((None, "public", tname, "BASE TABLE", None, None, None, None,
                                None, "NO", "NO", None))
            for num, (cname, column) in enumerate(table.columns.items(), start=1):
                oid_type = t.DECLARED[column.type]
                ty = t.TYPES[oid_type]
                collation = 100 if oid_type == t.TEXT else 0
                attributes.append(
                    (oid, cname, oid_type, ty.length, num, -1, -1, 0, ty.length > 0,
                     "d" if ty.length == 8 else "i", "x" if ty.length < 0 else "p", "",
                     not column.nullable, False, False, "", "", False, True, 0, -1, collation,
                     None, None, None, None))
                comment = _column_comment(column)
                if comment:
                    descriptions.append((oid, 1259, num, comment))
                info_columns.append(_info_column(tname, cname, num, column, ty))
        self._insert(con, f"{pg}.pg_class", classes)
        self._insert(con, f"{pg}.pg_attribute", attributes)
        self._insert(con, f"{pg}.pg_description", descriptions)
        self._insert(con, f"{pg}.pg_tables", tables)
        self._insert(con, f"{IS_SCHEMA}.tables", info_tables)
        self._insert(con, f"{IS_SCHEMA}.columns", info_columns)
        self._insert(con, f"{IS_SCHEMA}.schemata", [
            (None, "public", OWNER, None, None, "UTF8", None),
            (None, "pg_catalog", OWNER, None, None, "UTF8", None),
            (None, "information_schema", OWNER, None, None, "UTF8", None)])
        self._insert(con, f"{IS_SCHEMA}.table_privileges", [
            (OWNER, "PUBLIC", None, "public", tname, "SELECT", "NO", "YES")
            for tname in md.tables])
        self._insert(con, f"{IS_SCHEMA}.character_sets", [
            (None, None, "UTF8", "UCS", "UTF8", None, None, None)])

    # --- running

    def cursor(self) -> duckdb.DuckDBPyConnection:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            with self._lock:
                cur = self._con.cursor()
            self._local.cursor = cur
        return cur

    def prepare(self, sql: str, tree: exp.Expression, info: SessionInfo) -> CatalogQuery:
        return self._cache.get_or_compute((sql, info.key()), lambda: self._prepare(tree, info))

    def _prepare(self, tree: exp.Expression, info: SessionInfo) -> CatalogQuery:
        names = pg_column_names(tree)
        rewritten = self._rewrite(tree.copy(), info)
        try:
            text = rewritten.sql(dialect="duckdb")
        except SqlglotError as e:
            raise CatalogError(f"cannot answer this catalog query: {e}") from None
        return CatalogQuery(text, names)

    def run(self, query: CatalogQuery, cursor: duckdb.DuckDBPyConnection,
            describe_only: bool = False) -> CatalogResult:
        """Run (or only describe) a prepared catalog query on ``cursor`` (a :meth:`cursor`)."""
        try:
            for _ in range(8):
                try:
                    rel = cursor.sql(query.sql)
                    break
                except duckdb.CatalogException as e:
                    # A function PostgreSQL has and the catalog does not: NULL (a catalog
                    # query asks about features dpsql does not have).
                    m = _MISSING_FUNCTION.search(str(e))
                    if m is None:
                        raise
                    query.sql = _null_function(query.sql, m.group(1))
            else:
                raise CatalogError("too many unknown functions in the catalog query")
            if rel is None:
                raise CatalogError("not a query")
            names = list(rel.columns)
            types = [str(ty) for ty in rel.types]
            rows = [] if describe_only else _fetch(cursor, query.sql, types, rel)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as e:
            log.info("catalog query answered empty (%s): %s", _first_line(e), query.sql)
            if query.names is None:
                raise CatalogError(f"cannot answer this catalog query: {_first_line(e)}",
                                   "0A000") from None
            return CatalogResult(list(query.names), ["VARCHAR"] * len(query.names), [])
        if query.names is not None and len(query.names) == len(names):
            names = list(query.names)
        return CatalogResult(names, types, rows)

    def close(self) -> None:
        self._con.close()

    # --- the rewrite

    def _rewrite(self, tree: exp.Expr, info: SessionInfo) -> exp.Expr:
        """Rewrite bottom-up (children before their parents)."""
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for node in reversed(list(tree.dfs())):
            new = self._rewrite_node(node, ctes, info)
            if new is not node:
                if node is tree:
                    tree = new
                else:
                    node.replace(new)
        return tree

    def _rewrite_node(self, node: exp.Expr, ctes: set[str],
                      info: SessionInfo) -> exp.Expr:
        if isinstance(node, exp.Table):
            return self._table(node, ctes, info)
        if isinstance(node, exp.Cast):  # (a Cast is a Func too)
            return _array_cast(node) or _cast(node)
        if _is_quantified(node):
            return _quantified(node)
        if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and \
                node.this.name.lower() == "pg_catalog" and isinstance(node.expression, exp.Func):
            return _function(node.expression, info)
        if isinstance(node, exp.Func) and not isinstance(node.parent, exp.Dot):
            return _function(node, info)
        if isinstance(node, exp.Collate):
            collated: exp.Expr = node.this
            return collated
        if isinstance(node, exp.Column):
            return _column(node, info)
        return node

    def _table(self, node: exp.Table, ctes: set[str], info: SessionInfo) -> exp.Expression:
        schema, name = node.db.lower(), node.name.lower()
        if not name and schema == "pg_catalog":  # a table function: generate_series, unnest
            node.set("db", None)
            node.set("catalog", None)
            return node
        if not name or (not schema and name in ctes):
            return node
        if schema in ("", "pg_catalog") and name in TABLES:
            if name in SESSION_TABLES:
                return _session_table(name, node, info)
            node.set("db", exp.to_identifier(PG_SCHEMA))
            node.set("catalog", None)
        elif schema == "information_schema" and name in INFO_TABLES:
            return _info_table(name, node, info)
        elif schema == "information_schema":
            node.set("db", exp.to_identifier(IS_SCHEMA))
            node.set("catalog", None)
        return node


_MISSING_FUNCTION = re.compile(r"Scalar Function with name \"?([A-Za-z_][\w]*)\"? does not exist",
                               re.I)


def _null_function(sql: str, name: str) -> str:
    tree = sqlglot.parse_one(sql, read="duckdb")
    name = name.lower()
    for node in list(tree.find_all(exp.Func)):
        if isinstance(node, exp.Func) and function_name(node) == name:
            target = node.parent if isinstance(node.parent, exp.Dot) else node
            target.replace(exp.Null())
    return tree.sql(dialect="duckdb")


def _type_row(oid: int, name: str, length: int, kind: str, category: str, elem: int,
              array: int, typinput: str, preferred: bool) -> tuple[object, ...]:
    return (oid, name, CATALOG_OID, OWNER_OID, length, 0 < length <= 8, kind, category,
            preferred, True, ",", 0, None, elem, array, typinput, typinput[:-2] + "out"
            if typinput.endswith("in") else "array_out", None, None, None, None, None,
            "d" if length == 8 else "i", "x" if length < 0 else "p", False, 0, -1, 0,
            100 if category == "S" else 0, None, None, None)


def _class_row(oid: int, name: str, namespace: int, kind: str, natts: int) -> tuple[object, ...]:
    return (oid, name, namespace, 0, 0, OWNER_OID, 2, 0, 0, 0, -1.0, 0, 0, False, False, "p",
            kind, natts, 0, False, False, False, False, False, True, "d", False, 0, 0, 0, None,
            None, None, False)


def _info_column(table: str, name: str, num: int, column: Column,
                 ty: t.PgType) -> tuple[object, ...]:
    precision = {t.INT8: 64, t.FLOAT8: 53}.get(ty.oid)
    radix = 2 if precision else None
    scale = 0 if ty.oid == t.INT8 else None
    return (None, "public", table, name, num, None, "YES" if column.nullable else "NO",
            ty.sql_name, None, 1073741824 if ty.oid == t.TEXT else None, precision, radix, scale,
            0 if ty.oid == t.DATE else None, None, None, None, None, None, None, None, None,
            None, None, None, None, "pg_catalog", ty.name, None, None, None, None, str(num),
            "NO", "NO", None, None, None, None, None, "NO", "NEVER", None, "NO")


# -- rewriting pieces ------------------------------------------------------------------------

_BARE_FUNCTIONS = {"current_user", "session_user", "user", "current_role", "current_catalog",
                   "current_schema"}


def _column(node: exp.Column, info: SessionInfo) -> exp.Expression:
    if not node.table and isinstance(node.this, exp.Identifier) and not node.this.quoted and \
            node.name.lower() in _BARE_FUNCTIONS:
        return _session_value(node.name.lower(), info) or node
    schema = node.db.lower()
    if schema in ("pg_catalog", "information_schema"):
        if node.table.lower() in (SESSION_TABLES if schema == "pg_catalog" else INFO_TABLES):
            node.set("db", None)
        else:
            node.set("db", exp.to_identifier(PG_SCHEMA if schema == "pg_catalog" else IS_SCHEMA))
        node.set("catalog", None)
    return node


def _session_value(name: str, info: SessionInfo) -> exp.Expression | None:
    if name in ("current_user", "session_user", "user", "current_role"):
        return exp.Literal.string(info.user)
    if name in ("current_catalog", "current_database"):
        return exp.Literal.string(info.database)
    if name == "current_schema":
        return exp.Literal.string("public")
    if name == "version":
        return exp.Literal.string(info.version)
    if name == "pg_backend_pid":
        return exp.Literal.number(info.pid)
    if name in ("inet_server_addr", "inet_client_addr"):
        return exp.Literal.string("127.0.0.1")
    if name in ("inet_server_port", "inet_client_port"):
        return exp.Null()
    if name == "pg_postmaster_start_time":
        return exp.cast(exp.Literal.string(info.start_time.isoformat(sep=" ")), "TIMESTAMPTZ")
    return None


def _function(node: exp.Func, info: SessionInfo) -> exp.Expr:
    name = function_name(node)
    value = _session_value(name, info)
    if value is not None:
        return value
    args = node.expressions if isinstance(node, exp.Anonymous) else \
        [a for a in node.args.values() if isinstance(a, exp.Expression)]
    if name == "current_setting":  # the session's settings, never the catalog engine's
        if not args or not isinstance(args[0], exp.Literal):
            return exp.Null()
        setting = info.settings.get(args[0].name.lower())
        return exp.Literal.string(setting) if setting is not None else exp.Null()
    if name == "current_schemas":
        implicit = bool(args) and isinstance(args[0], exp.Boolean) and args[0].this
        schemas = ["pg_catalog", "public"] if implicit else ["public"]
        return exp.Array(expressions=[exp.Literal.string(s) for s in schemas])
    if name in _MACROS:
        call = node.copy() if isinstance(node, exp.Anonymous) else exp.Anonymous(
            this=name, expressions=[a.copy() for a in args])
        return exp.Dot(this=exp.to_identifier(PG_SCHEMA), expression=call)
    return node


_FUNCTION_NAMES: dict[type, str] = {
    exp.CurrentUser: "current_user", exp.CurrentSchema: "current_schema",
    exp.SessionUser: "session_user", exp.CurrentDatabase: "current_database",
    exp.CurrentCatalog: "current_catalog", exp.CurrentVersion: "version",
    exp.GroupConcat: "string_agg",
}


def function_name(node: exp.Func) -> str:
    """The PostgreSQL name of a function call as sqlglot parsed it."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    for cls, name in _FUNCTION_NAMES.items():
        if isinstance(node, cls):
            return name
    return node.sql_name().lower()


def _type_name(to: exp.Expression) -> str:
    text = to.sql(dialect="postgres").lower()
    text = re.sub(r"\bpg_catalog\.", "", text)
    return text.strip()


def _cast(node: exp.Cast) -> exp.Expr:
    """Casts to PostgreSQL's catalog types. Runs bottom-up: a cast to regclass (or regtype,
    regnamespace) becomes an oid and remembers it in ``meta``, so that an enclosing cast to text
    can turn the oid back into the name."""
    to = node.args.get("to")
    if to is None:
        return node
    target = _type_name(to)
    inner = node.this
    reg = inner.meta.get("reg") if isinstance(inner, exp.Expression) else None
    if target in ("text", "varchar", "name", "character varying") and reg:
        if "reg_literal" in inner.meta:
            return exp.Literal.string(inner.meta["reg_literal"])
        original = inner.meta["reg_source"]
        if reg == "regclass":
            return _lookup_name(original, "pg_class", "relname")
        if reg == "regtype":
            return _format_type(original)
        if reg == "regnamespace":
            return _lookup_name(original, "pg_namespace", "nspname")
        return exp.cast(original, "VARCHAR")
    new: exp.Expr
    if target in ("regclass", "regnamespace", "regtype"):
        if isinstance(inner, exp.Literal) and inner.is_string:
            table, column = {"regclass": ("pg_class", "relname"),
                             "regnamespace": ("pg_namespace", "nspname"),
                             "regtype": ("pg_type", "typname")}[target]
            name = _unqualify(inner.name)
            new = _lookup_oid(name, table, column)
            new.meta["reg_literal"] = name
        else:
            new = exp.cast(inner.copy(), "BIGINT")
            new.meta["reg_source"] = inner.copy()
        new.meta["reg"] = target
        return new
    if target in ("regproc", "regprocedure"):
        if isinstance(inner, exp.Literal) and inner.is_string:
            return exp.Literal.string(_unqualify(inner.name))
        return exp.cast(inner, "VARCHAR")
    if target in _REG_NAMESPACE_TYPES:
        return exp.cast(inner, "BIGINT")
    duck = _duck_type(target)
    if duck is not None:
        return exp.cast(inner, duck)
    return node


def _array_cast(node: exp.Cast) -> exp.Expr | None:
    """``'{r,p}'::char[]``: a PostgreSQL array literal, as a DuckDB list of that type."""
    to = node.args.get("to")
    if to is None or not _is_string(node.this):
        return None
    target = _type_name(to)
    if not target.endswith("[]") and not (isinstance(to, exp.DataType) and
                                          to.is_type(exp.DataType.Type.ARRAY)):
        return None
    return exp.cast(_array(node.this.name), _duck_type(target) or "VARCHAR[]")


def _is_quantified(node: exp.Expr) -> bool:
    return isinstance(node, exp.Any | exp.All) or (
        isinstance(node, exp.Anonymous) and node.name.upper() in ("ANY", "ALL", "SOME"))


def _quantified(node: exp.Expr) -> exp.Expr:
    """``= ANY('{r,p}')`` (a literal, or a parameter bound as one): the text is an array
    literal, as in PostgreSQL, not a string to unnest (DuckDB refuses that, and the refusal used
    to turn into an empty answer)."""
    args = node.expressions if isinstance(node, exp.Anonymous) else [node.this]
    for arg in args:
        inner = arg.this if isinstance(arg, exp.Paren) else arg
        if _is_string(inner):
            inner.replace(_array(inner.name))
    return node


def _is_string(node: object) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _array(text: str) -> exp.Expression:
    try:
        items = parse_array_literal(text)
    except ValueError as e:
        raise CatalogError(f"malformed array literal: {e}", "22P02") from None
    return _array_of(items)


def _array_of(items: list[Any]) -> exp.Expression:
    return exp.Array(expressions=[
        exp.Null() if item is None else _array_of(item) if isinstance(item, list)
        else exp.Literal.string(item) for item in items])


_DUCK_NAMES = {
    "int2": "SMALLINT", "smallint": "SMALLINT", "int4": "INTEGER", "int": "INTEGER",
    "integer": "INTEGER", "int8": "BIGINT", "bigint": "BIGINT", "float4": "FLOAT",
    "real": "FLOAT", "float8": "DOUBLE", "double precision": "DOUBLE", "numeric": "DOUBLE",
    "bool": "BOOLEAN", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ", "timestamp with time zone": "TIMESTAMPTZ",
    "timestamp without time zone": "TIMESTAMP", "bytea": "BLOB", "json": "VARCHAR",
    "jsonb": "VARCHAR", "uuid": "UUID", "interval": "INTERVAL",
}


def _duck_type(name: str) -> str | None:
    """The DuckDB type for a PostgreSQL type name of a catalog query (None: leave it)."""
    name = name.strip().strip('"')
    if name.endswith("[]"):
        element = _duck_type(name[:-2])
        return f"{element or 'VARCHAR'}[]"
    if name.startswith("_") and name[1:] in _DUCK_NAMES:
        return f"{_DUCK_NAMES[name[1:]]}[]"
    if name in _PLAIN_TYPES:
        return _PLAIN_TYPES[name]
    if name in _REG_NAMESPACE_TYPES:
        return "BIGINT"
    return _DUCK_NAMES.get(name)


def _unqualify(name: str) -> str:
    last = name.split(".")[-1].strip()
    if last.startswith('"') and last.endswith('"'):
        return last[1:-1].replace('""', '"')
    return last.lower()


def _lookup_oid(name: str, table: str, column: str) -> exp.Expr:
    return sqlglot.parse_one(
        f"(SELECT x.oid FROM {PG_SCHEMA}.{table} x WHERE x.{column} = "
        f"{exp.Literal.string(name).sql('duckdb')} LIMIT 1)", read="duckdb")


def _lookup_name(oid: exp.Expression, table: str, column: str) -> exp.Expr:
    if isinstance(oid, exp.Literal) and oid.is_string:
        return exp.Literal.string(_unqualify(oid.name))
    query = sqlglot.parse_one(
        f"(SELECT coalesce(max(x.{column}), CAST(__o AS VARCHAR)) FROM {PG_SCHEMA}.{table} x "
        f"WHERE x.oid = __o)", read="duckdb")
    for col in list(query.find_all(exp.Column)):
        if col.name == "__o":
            col.replace(oid.copy())
    return query


def _format_type(oid: exp.Expression) -> exp.Expression:
    if isinstance(oid, exp.Literal) and oid.is_string:
        return exp.Literal.string(_unqualify(oid.name))
    return exp.Dot(this=exp.to_identifier(PG_SCHEMA), expression=exp.Anonymous(
        this="format_type", expressions=[oid.copy(), exp.Null()]))


def _session_table(name: str, node: exp.Table, info: SessionInfo) -> exp.Expression:
    columns = [c.split()[0] for c in _split_columns(TABLES[name])]
    types = [" ".join(c.split()[1:]) for c in _split_columns(TABLES[name])]
    rows = _session_rows(name, info)
    selects = []
    for row in rows or [tuple(None for _ in columns)]:
        values = ", ".join(f"CAST({_sql_value(v)} AS {ty}) AS {c}"
                           for v, c, ty in zip(row, columns, types, strict=True))
        selects.append(f"SELECT {values}")
    body = " UNION ALL ".join(selects)
    if not rows:
        body += " LIMIT 0"
    alias = node.alias or name
    subquery = sqlglot.parse_one(f"({body})", read="duckdb")
    return exp.Subquery(this=subquery.this if isinstance(subquery, exp.Subquery) else subquery,
                        alias=exp.TableAlias(this=exp.to_identifier(alias)))


# information_schema columns naming the database ("catalog" in SQL's words) of an object.
_CATALOG_COLUMNS = {"catalog_name", "table_catalog", "constraint_catalog", "udt_catalog",
                    "unique_constraint_catalog", "specific_catalog", "routine_catalog",
                    "sequence_catalog", "trigger_catalog", "event_object_catalog"}


def _info_table(name: str, node: exp.Table, info: SessionInfo) -> exp.Expression:
    """An information_schema view with its catalog columns (``table_catalog``, ...) set to the
    session's database, as PostgreSQL does: the catalog is shared by sessions that connected to
    databases of different names, and tools (harlequin) build their tree from these columns
    and compare them with ``current_database()``."""
    columns = [c.split()[0] for c in _split_columns(INFO_TABLES[name])]
    database = t.string_literal(info.database)
    replaced = ", ".join(f"{database} AS {c}" for c in columns if c in _CATALOG_COLUMNS)
    star = f"* REPLACE ({replaced})" if replaced else "*"
    subquery = sqlglot.parse_one(f"(SELECT {star} FROM {IS_SCHEMA}.{name})", read="duckdb")
    return exp.Subquery(this=subquery.this if isinstance(subquery, exp.Subquery) else subquery,
                        alias=exp.TableAlias(this=exp.to_identifier(node.alias or name)))


def _split_columns(spec: str) -> list[str]:
    return [c.strip() for c in spec.split(",")]


def _sql_value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return t.string_literal(str(value))


def _session_rows(name: str, info: SessionInfo) -> list[tuple[object, ...]]:
    if name == "pg_database":
        return [(DATABASE_OID, info.database, OWNER_OID, 6, "c", False, True, -1, 0, 0, 1663,
                 "C", "C", None, None, None, None)]
    if name in ("pg_roles", "pg_authid"):
        return [(ANALYST_OID, info.user, False, True, False, False, True, False, -1,
                 "********", None, False, None)]
    if name == "pg_user":
        return [(info.user, ANALYST_OID, False, False, False, False, "********", None, None)]
    if name == "pg_settings":
        return [(k, v, None, "dpsql", "", None, "user", "string", "session", None, None, None,
                 v, v, None, None, False) for k, v in sorted(info.settings.items())]
    if name == "pg_stat_activity":
        return [(DATABASE_OID, info.database, info.pid, ANALYST_OID, info.user,
                 info.settings.get("application_name", ""), None, None, "active", "",
                 "client backend")]
    return []


# -- names -----------------------------------------------------------------------------------


def pg_column_names(tree: exp.Expression) -> list[str] | None:
    """PostgreSQL's output column names of a SELECT (None when a * is involved)."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return None
    names = []
    for projection in select.expressions:
        name = pg_name(projection)
        if name is None:
            return None
        names.append(name)
    return names


def pg_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and
                                      isinstance(node.this, exp.Star)):
        return None
    if isinstance(node, exp.Alias):
        return _identifier(node.args["alias"])
    if isinstance(node, exp.Column):
        return _identifier(node.this)
    if isinstance(node, exp.Dot):
        return pg_name(node.expression)
    if isinstance(node, exp.Cast):
        inner = pg_name(node.this)
        if inner and inner != "?column?":
            return inner
        to = node.args.get("to")
        return _PG_TYPE_COLUMN.get(_type_name(to), "?column?") if to is not None else "?column?"
    if isinstance(node, exp.Paren):
        return pg_name(node.this)
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Func):
        return function_name(node)
    return "?column?"


_PG_TYPE_COLUMN = {"int": "int4", "integer": "int4", "bigint": "int8", "smallint": "int2",
                   "text": "text", "varchar": "varchar", "boolean": "bool", "date": "date",
                   "double precision": "float8", "real": "float4", "numeric": "numeric"}


def _identifier(node: exp.Expression) -> str:
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    return node.name.lower()


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _fetch(cursor: duckdb.DuckDBPyConnection, sql: str, types: list[str],
           rel: duckdb.DuckDBPyRelation) -> list[tuple[Any, ...]]:
    """The rows; ``timestamptz`` values read as UTC instants (DuckDB converts them to Python
    with pytz, which dpsql does not depend on: without it, ``SELECT $1::timestamptz`` or
    ``now()`` answered empty)."""
    aware = {i for i, ty in enumerate(types) if ty == "TIMESTAMP WITH TIME ZONE"}
    if not aware:
        return rel.fetchall()
    columns = ", ".join(f"timezone('UTC', #{i + 1})" if i in aware else f"#{i + 1}"
                        for i in range(len(types)))
    rows = cursor.sql(f"SELECT {columns} FROM ({sql})").fetchall()
    return [tuple(v.replace(tzinfo=dt.UTC) if i in aware and v is not None else v
                  for i, v in enumerate(row)) for row in rows]
