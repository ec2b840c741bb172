"""Group commit: the writes that threads submit at the same time share one durable transaction.

A durable commit costs one ``fsync`` (about 0.5-3 ms on common disks), and a ledger charge must
be durable before its query runs (:mod:`dpsql.ledger.budget`). Made one at a time, the fsyncs cap
the whole process at a few hundred charges per second however many clients wait. Here every thread
that wants to write queues its request; the thread at the head of the queue (the *leader*)
takes every request queued so far, commits them in one transaction with one fsync, hands each
submitter its own outcome and leaves; the next head leads the next batch. No background
thread: a batch is committed by a thread that was waiting anyway (the scheme of LevelDB's
write queue). Alone, a writer commits at once; under load, the requests that arrived during
one fsync share the next.

Every submitter returns only after the transaction holding its request committed (or failed:
then every request of the batch gets the error and none was written), so a caller that goes on
to release an answer does so only after its charge is on disk. What the batch does with each
request -- admit or refuse a charge, attach an answer -- is the ``commit`` callback's; one
request's refusal is its own outcome, not the batch's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: The most requests one transaction takes (a bound on how long one batch holds the lock).
MAX_BATCH = 256


@dataclass
class _Slot(Generic[T, R]):
    """One submitted request and, once its batch is done, its outcome."""

    request: T
    done: bool = False
    result: R | None = None
    error: BaseException | None = None


class GroupCommit(Generic[T, R]):
    """Batches concurrent submissions into calls of ``commit``.

    ``commit(requests)`` runs one transaction over the requests, in order, and returns one
    outcome per request: a result, or an exception that is that request's own (raised to its
    submitter only). An exception raised by ``commit`` itself fails the whole batch.
    """

    def __init__(self, commit: Callable[[Sequence[T]], list[R | BaseException]]) -> None:
        self._commit = commit
        self._queue: list[_Slot[T, R]] = []
        self._changed = threading.Condition(threading.Lock())
        self.batches = 0  # transactions committed or attempted (for tests and benchmarks)

    @property
    def waiting(self) -> int:
        """How many requests are queued or being committed now."""
        with self._changed:
            return len(self._queue)

    def submit(self, request: T) -> R:
        """Queue ``request``, wait until a batch holding it is committed, return its outcome."""
        slot: _Slot[T, R] = _Slot(request)
        with self._changed:
            self._queue.append(slot)
            while not slot.done and self._queue[0] is not slot:
                self._changed.wait()
            if not slot.done:  # the head of the queue: lead the next batch
                batch = self._queue[:MAX_BATCH]
                self.batches += 1
        if not slot.done:
            self._lead(batch)
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]  # set with done, error unset

    def _lead(self, batch: list[_Slot[T, R]]) -> None:
        outcomes: list[R | BaseException]
        try:
            outcomes = self._commit([slot.request for slot in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError("group commit: one outcome per request expected")
        except Exception as failed:  # the transaction failed: nothing of it was written
            outcomes = [failed] * len(batch)
        except BaseException as stopped:  # KeyboardInterrupt, SystemExit: this thread's own
            others = RuntimeError("the ledger transaction of this batch was interrupted; "
                                  "the query was not run")
            self._finish(batch, [others] * len(batch))
            raise stopped
        self._finish(batch, outcomes)

    def _finish(self, batch: list[_Slot[T, R]], outcomes: Sequence[R | BaseException]) -> None:
        with self._changed:
            for slot, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    slot.error = outcome
                else:
                    slot.result = outcome
                slot.done = True
            del self._queue[:len(batch)]
            self._changed.notify_all()
