"""Where the bundled sample data is: the default database of every front door."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def sample_paths() -> tuple[Path, Path]:
    """The bundled sample database folder and its metadata file."""
    try:
        folder = Path(str(resources.files("dpsql.sample_data")))
    except ModuleNotFoundError:
        # A source checkout run with PYTHONPATH=. (benchmarks/, scripts): the package's
        # data lives beside it, mapped to dpsql.sample_data only by an install.
        folder = Path(__file__).resolve().parent.parent / "sample_data"
    return folder, folder / "metadata.toml"
