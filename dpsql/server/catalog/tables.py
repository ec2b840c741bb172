"""The catalog's tables: PostgreSQL 16's pg_catalog and information_schema, their columns
(PostgreSQL's names, DuckDB's types), and the fixed OIDs the catalog hands out."""

from __future__ import annotations

PG_SCHEMA = "dpsql_pg"  # where pg_catalog lives in the catalog DuckDB
IS_SCHEMA = "dpsql_is"  # and information_schema
PUBLIC_OID, CATALOG_OID, INFO_OID, TOAST_OID = 2200, 11, 13183, 99
OWNER_OID, ANALYST_OID, DATABASE_OID = 10, 16384, 16385
FIRST_TABLE_OID = 16400
#: The ledger views' schema (dpsql.ledger.spending) and its first view: not on the search path.
LEDGER_OID, FIRST_VIEW_OID = 16390, 19900
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
    "pg_stat_user_tables": (
        "relid BIGINT, schemaname VARCHAR, relname VARCHAR, seq_scan BIGINT, "
        "seq_tup_read BIGINT, idx_scan BIGINT, idx_tup_fetch BIGINT, n_tup_ins BIGINT, "
        "n_tup_upd BIGINT, n_tup_del BIGINT, n_tup_hot_upd BIGINT, n_live_tup BIGINT, "
        "n_dead_tup BIGINT, n_mod_since_analyze BIGINT, n_ins_since_vacuum BIGINT, "
        "last_vacuum TIMESTAMPTZ, last_autovacuum TIMESTAMPTZ, last_analyze TIMESTAMPTZ, "
        "last_autoanalyze TIMESTAMPTZ, vacuum_count BIGINT, autovacuum_count BIGINT, "
        "analyze_count BIGINT, autoanalyze_count BIGINT"),
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
