"""The ways a query can be answered, each a :class:`~dpsql.routes.route.Route`: what it costs,
whether it is charged, what it checks before the charge, how it answers, how it explains
itself, its output columns. The planner (:mod:`dpsql.routes.planner`) chooses the route of
a query, the one place that chooses; :class:`~dpsql.database.Database` charges and answers
whatever route it gets without asking which kind it is."""
