"""The wire: PostgreSQL protocol messages, types and SQL text, bytes <-> values."""
