"""``dpsql audit``: the statistical audit and neighbour testing by execution."""
