"""How dpsql explains a query to the analyst before it runs: the text and JSON of ``dpsql
explain`` and the server's ``EXPLAIN`` (:mod:`.render`), and the notes on what bounding and
clamping do to an answer (:mod:`.bias`)."""
