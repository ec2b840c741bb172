"""PostgreSQL: the engine (psycopg 3) and its dialect of the engine IR."""
