"""The data owner's commands on its own data, read exactly and never released to an analyst:
``dpsql metadata init`` (:mod:`.metadata_init`: a metadata skeleton from the schema, with
proposals read from the data) and ``dpsql metadata check`` (:mod:`.metadata_check`: what the
declared bounds drop)."""
