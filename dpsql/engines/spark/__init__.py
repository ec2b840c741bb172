"""Spark SQL: the engine and its dialect of the engine IR."""
