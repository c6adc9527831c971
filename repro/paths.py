"""Where the toolkit keeps its files: specs, results, data. Overridable by environment variables."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent


def experiments_dir() -> Path:
    """`REPRO_EXPERIMENTS` or the `experiments/` folder of the checkout."""
    return Path(os.environ.get("REPRO_EXPERIMENTS", REPO_DIR / "experiments"))


def results_dir() -> Path:
    """`REPRO_RESULTS` or the `results/` folder of the checkout."""
    return Path(os.environ.get("REPRO_RESULTS", REPO_DIR / "results"))


def data_dir() -> Path:
    """`REPRO_DATA_DIR` or `~/.cache/repro/data`."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro" / "data"
    return Path(os.environ.get("REPRO_DATA_DIR", default))
