"""``python -m dpsql``: the ``dpsql`` command line (:mod:`dpsql.cli`)."""

from dpsql.cli import main

if __name__ == "__main__":
    main(prog_name="dpsql")
