"""The ledger: every analyst's budget, charged atomically and durably, and the stored answers."""
