"""The query layer: SQL text -> a parsed, bound, checked, constant-folded and costed query
(parse -> bind -> check -> fold -> cost), with what the checker reads: the interval
arithmetic of bounds/, the relation of joins.py, the total expressions."""
