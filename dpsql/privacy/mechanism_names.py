"""The names of the noise mechanisms, apart from their numpy code, so that the command line
can offer them (``--mechanism``) without importing numpy (docs/performance.md)."""

from __future__ import annotations

from enum import StrEnum


class Mechanism(StrEnum):
    """How a measurement is released (Laplace, Gaussian: noise; exponential: quantiles), equal
    to its name as a string wherever that is stored or shown."""

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"
    EXPONENTIAL = "exponential"


#: What an analyst may ask for, the default first, as strings (click matches an Enum's name).
MECHANISMS: tuple[str, ...] = (Mechanism.LAPLACE.value, Mechanism.GAUSSIAN.value)
