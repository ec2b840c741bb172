"""Integrations with third-party tools: an SQLAlchemy dialect (``dpsql://``) and an Apache
Superset engine spec. Neither is imported by dpsql itself; each is loaded through its tool's entry
point (see pyproject.toml) and only needs that tool when it is used."""
