"""Run inside dbt's own virtual environment (by tests/server/test_server_dbt.py): dbt commands
in one process, so that dbt is imported once, not once per command (4 to 6 s each on a shared
machine). Each line of stdin is a JSON list of a command's arguments, run as ``dbt ARGS...``
through dbt's programmatic entry point (``dbtRunner``, the same code as the ``dbt`` command);
each answer is one JSON line on stdout: ``{"success": bool, "output": what dbt printed}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from dbt.cli.main import dbtRunner  # type: ignore[import-not-found]


def main() -> None:
    answers = sys.stdout
    for line in sys.stdin:
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            result = dbtRunner().invoke(json.loads(line))
        answers.write(json.dumps({"success": result.success,
                                  "output": captured.getvalue()}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
