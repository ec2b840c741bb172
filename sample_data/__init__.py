"""dpsql's bundled sample dataset: synthetic members of a fictional health service.

Two Parquet tables (ZSTD) plus the data owner's declaration, ``metadata.toml``:

- ``people.parquet``: 20,000 rows, one per person (the privacy unit, ``person_id``), with
  age, sex, education, state (very skewed, a few states have fewer than 15 people), income
  (about 5% NULL, correlated with age and education), married, children, a fake e-mail
  address and a sign-up date.
- ``visits.parquet``: about 150,000 visits in 2025, many rows per person and heavy-tailed
  (a few people have 200+ visits), with category, amount billed (a handful above the declared
  bound of 5000) and duration.

Everything is synthetic and reproducible: ``python sample_data/generate.py`` rebuilds the files.
"""
