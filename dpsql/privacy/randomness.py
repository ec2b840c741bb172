"""Randomness: where every random bit dpsql uses comes from, passed in rather than global.

A :class:`Randomness` is handed to :class:`~dpsql.database.Database` (its ``randomness``
argument) and from there to everything that draws: the noise samplers
(:mod:`dpsql.privacy.samplers`, through :mod:`dpsql.privacy.mechanisms` and
:mod:`dpsql.execution.perturb`), the exponential mechanism (:mod:`dpsql.privacy.quantiles`), the
noisy unit counts of thresholding, and the secret salt of contribution bounding
(:func:`dpsql.routes.pipeline.answer`).

**Production.** ``Randomness()`` reads the operating system's CSPRNG: the samplers' 64-bit
words from ``os.urandom`` and the salt from ``secrets.randbits``. numpy's generators and the
``random`` module are seeded PRNGs: an analyst who could learn their state would subtract the
noise exactly, so they never feed a release. The samplers turn raw words into exact draws
(discrete Laplace and Gaussian, see :mod:`dpsql.privacy.samplers`), so a Randomness supplies bits,
not distributions.

**Mutation points.** Two, both explicit:

* ``Randomness(source)``: every bit (noise words and salt) from ``source(n) -> n bytes``. The
  tests seed it (:meth:`Randomness.seeded`: same verdict on every run) or feed it a fixed
  stream to prove that every draw flows from it (a constant stream makes answers repeat);
* :data:`DEFAULT`, the Randomness of a Database given none, looked up each time it draws:
  the test suite seeds it per test, so that queries through the front doors (CLI, server),
  which construct their own Database, draw from a reproducible stream too.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

#: The contribution-bounding salt is an integer in [0, 2**SALT_BITS) (a BIGINT parameter).
SALT_BITS = 63

Source = Callable[[int], bytes]


class Randomness:
    """Random bits for one Database: the OS CSPRNG by default, else ``source``."""

    def __init__(self, source: Source | None = None) -> None:
        self._source = source

    @classmethod
    def seeded(cls, seed: int) -> Randomness:
        """A reproducible stream (numpy's PCG64 seeded by ``seed``), for tests and audits whose
        verdict must not change from run to run; never for a release. Not for two threads at
        once: their interleaving would change the draws from run to run."""
        return cls(np.random.default_rng(seed).bytes)

    @property
    def reproducible(self) -> bool:
        """Whether the bits come from a given stream rather than the operating system."""
        return self._source is not None

    def bytes(self, n: int) -> bytes:
        """``n`` random bytes."""
        # os.urandom is looked up on every call (not imported by name): a test can check that
        # the operating system's randomness is what the default reads.
        return os.urandom(n) if self._source is None else self._source(n)

    def words(self, size: int) -> npt.NDArray[np.uint64]:
        """``size`` uniform 64-bit words (what :mod:`dpsql.privacy.samplers` builds every draw
        from)."""
        return np.frombuffer(self.bytes(8 * size), dtype="<u8")

    def salt(self) -> int:
        """A fresh secret salt for the contribution-bounding sample, uniform on
        ``[0, 2**63)``: from ``secrets`` in production, from the stream when one is given."""
        if self._source is None:
            return secrets.randbits(SALT_BITS)
        return int.from_bytes(self._source(8), "little") >> (64 - SALT_BITS)


#: The Randomness of a Database constructed without one: the operating system's. The test
#: suite replaces it per test by a seeded one (tests/conftest.py, ``seeded_randomness``).
DEFAULT = Randomness()


def default() -> Randomness:
    """The current :data:`DEFAULT` (looked up on each call, see the module docstring)."""
    return DEFAULT
