"""A long query on a terminal: a status line while it runs, and Ctrl-C as one line.

After about a second, ``dpsql query`` shows one line on standard error -- how long the query
has run, the epsilon charged (or that nothing is charged yet), the engine's progress where it
reports one -- rewritten in place and erased before the answer prints. Only on a terminal:
a pipe or a file never gets it. Ctrl-C stops the query (:mod:`dpsql.execution.watch`) and
prints one line saying whether the charge stands, exit status 130 (as shells report SIGINT).
"""

from __future__ import annotations

import sys
from typing import TextIO

import click

from dpsql.errors import QueryCancelled
from dpsql.execution.watch import Watch

#: Seconds before the status line shows: a quick answer never flickers one.
DELAY = 1.0
#: The exit status of an interrupted command (128 + SIGINT).
INTERRUPTED = 130
_ERASE = "\r\x1b[K"


class StatusLine:
    """The status line on ``stream`` (a terminal): call it with the watch to redraw it."""

    def __init__(self, stream: TextIO, delay: float = DELAY) -> None:
        self.stream, self.delay = stream, delay
        self.shown = ""  # the line on screen

    def __call__(self, watch: Watch) -> None:
        if watch.elapsed < self.delay:
            return
        parts = [f"running {watch.elapsed:.0f} s"]
        if watch.charged is not None:
            epsilon, delta = watch.charged
            parts.append(f"charged epsilon {epsilon:g}" + (f", delta {delta:g}" if delta else ""))
        else:
            parts.append("nothing charged yet")
        progress = watch.progress()
        if progress is not None:
            parts.append(f"engine {progress:.0f}%")
        text = f"dpsql: {'; '.join(parts)} (Ctrl-C stops it)"
        if text != self.shown:  # redrawn only when it changes
            self.shown = text  # first: a Ctrl-C during the write still erases it
            self.stream.write(_ERASE + text)
            self.stream.flush()

    def clear(self) -> None:
        """Erase the line (before the answer, an error or the interrupt's line)."""
        if self.shown:
            self.stream.write(_ERASE)
            self.stream.flush()
            self.shown = ""


def status_line() -> StatusLine | None:
    """The status line when standard error is a terminal; None on a pipe or a file."""
    stream = sys.stderr
    return StatusLine(stream) if stream.isatty() else None


def interrupted(e: QueryCancelled) -> None:
    """The one line of a cancelled query, and exit status 130."""
    click.echo(f"dpsql: interrupted after {e.seconds:.0f} s; {e.charge_words()}", err=True)
    sys.exit(INTERRUPTED)
