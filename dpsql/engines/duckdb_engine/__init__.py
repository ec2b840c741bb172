"""DuckDB: the reference engine (:mod:`.engine`) and its dialect of the engine IR."""
