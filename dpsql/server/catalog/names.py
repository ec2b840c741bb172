"""PostgreSQL's names, for the server: their home is :mod:`dpsql.query.names` (every door
names columns so)."""

from dpsql.query.names import _type_name as _type_name
from dpsql.query.names import function_name as function_name
from dpsql.query.names import pg_column_names as pg_column_names
from dpsql.query.names import pg_name as pg_name
from dpsql.query.names import remember_names as remember_names
