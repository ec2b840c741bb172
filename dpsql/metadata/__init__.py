"""What the data owner declares: tables, units, bounds, domains, settings."""
