"""DuckDB: the reference engine's dialect of the engine IR."""
