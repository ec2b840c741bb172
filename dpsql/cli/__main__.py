"""``python -m dpsql.cli``: the ``dpsql`` command line."""

from dpsql.cli import main

if __name__ == "__main__":
    main(prog_name="dpsql")
