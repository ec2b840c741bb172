"""A Parquet file's Spark schema read from its footer, without a Spark job.

Spark infers a Parquet file's schema with a job of its own (``read.parquet``): on a cluster
whose executors are cold that is seconds per file, paid for every file of a folder each time
an engine opens it. :func:`spark_schema` reads the footer here instead (DuckDB's
``parquet_schema``, no rows read) and converts it as Spark's ``ParquetToSparkSchemaConverter``
does, for the flat columns of plain types only: the same ``StructType`` that Spark would
infer, every field nullable (Spark reads files so). Anything else (nested or repeated
columns, unsigned integers, INT96, TIME, INTERVAL, UUID, a file Spark wrote with its own
schema in the footer, names equal but for case, a session setting that changes the
conversion) gives ``None``: the caller lets Spark infer, as before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb

#: Spark writes its own schema under this key; Spark then reads that one (char/varchar and
#: metadata the plain Parquet types do not carry): left to Spark.
SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"
#: (physical type, converted type) -> Spark's simple type name; DECIMAL and TIMESTAMP apart.
_PLAIN = {("BOOLEAN", None): "boolean", ("INT32", None): "int", ("INT32", "INT_32"): "int",
          ("INT32", "INT_8"): "tinyint", ("INT32", "INT_16"): "smallint",
          ("INT32", "DATE"): "date", ("INT64", None): "bigint", ("INT64", "INT_64"): "bigint",
          ("FLOAT", None): "float", ("DOUBLE", None): "double",
          ("BYTE_ARRAY", "UTF8"): "string", ("BYTE_ARRAY", None): "binary"}
_DECIMAL_PHYSICAL = ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY")
#: The settings under which the table above is Spark's conversion (their defaults).
_SETTINGS = {"spark.sql.parquet.binaryAsString": "false",
             "spark.sql.parquet.inferTimestampNTZ.enabled": "true"}


def spark_types(path: Path) -> list[tuple[str, str]] | None:
    """``[(column, Spark simple type)]`` of the Parquet file ``path``, or ``None`` when its
    footer holds anything outside the plain flat types (see the module docstring)."""
    with duckdb.connect() as con:
        target = str(path).replace("'", "''")
        if con.execute(f"SELECT count(*) FROM parquet_kv_metadata('{target}') WHERE "
                       f"decode(key) = '{SPARK_ROW_METADATA}'").fetchone() != (0,):
            return None
        rows = con.execute(
            "SELECT name, type, converted_type, scale, precision, logical_type, "
            f"repetition_type, num_children FROM parquet_schema('{target}')").fetchall()
    root, leaves = rows[0], rows[1:]
    if root[7] != len(leaves) or len({r[0].lower() for r in leaves}) != len(leaves):
        return None  # nested columns, or names Spark refuses as duplicates
    out = []
    for name, physical, converted, scale, precision, logical, repetition, children in leaves:
        if children or repetition == "REPEATED":
            return None
        simple = _simple(physical, converted, scale, precision, logical)
        if simple is None:
            return None
        out.append((name, simple))
    return out


def _simple(physical: str, converted: str | None, scale: int | None, precision: int | None,
            logical: str | None) -> str | None:
    if logical and converted is None:
        return None  # a logical type without its converted one: Spark reads it by the logical
    if converted == "DECIMAL" and physical in _DECIMAL_PHYSICAL and precision \
            and 0 < precision <= 38:
        return f"decimal({precision},{scale or 0})"
    if physical == "INT64" and converted in ("TIMESTAMP_MICROS", "TIMESTAMP_MILLIS"):
        # The logical type says whether the instant is UTC-adjusted (Spark's TIMESTAMP) or a
        # local date-time (TIMESTAMP_NTZ); without it, left to Spark.
        adjusted = re.search(r"isAdjustedToUTC=(\d)", logical or "")
        if adjusted is None:
            return None
        return "timestamp" if adjusted.group(1) == "1" else "timestamp_ntz"
    if logical and not logical.startswith(("IntType", "StringType", "DateType")):
        return None  # a logical type the converted one does not show (UUID, JSON, ...)
    return _PLAIN.get((physical, converted))


def struct_type(session: Any, columns: list[tuple[str, str]]) -> Any | None:
    """The ``StructType`` of ``columns`` (every field nullable, as Spark reads files), or
    ``None`` when ``session``'s settings change Spark's own conversion."""
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        ByteType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    for key, default in _SETTINGS.items():
        if str(session.conf.get(key, default)).lower() != default:
            return None
    kinds: dict[str, Any] = {
        "boolean": BooleanType, "tinyint": ByteType, "smallint": ShortType, "int": IntegerType,
        "bigint": LongType, "float": FloatType, "double": DoubleType, "string": StringType,
        "binary": BinaryType, "date": DateType, "timestamp": TimestampType,
        "timestamp_ntz": TimestampNTZType}
    fields = []
    for name, simple in columns:
        decimal = re.fullmatch(r"decimal\((\d+),(\d+)\)", simple)
        kind = DecimalType(int(decimal[1]), int(decimal[2])) if decimal else kinds[simple]()
        fields.append(StructField(name, kind, nullable=True))
    return StructType(fields)
