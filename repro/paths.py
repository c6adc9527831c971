"""Where the toolkit keeps its files: specs, results, data. Overridable by environment variables.

The lookup rule, in a checkout and in an installed package alike:
  specs    REPRO_EXPERIMENTS, else the checkout's `experiments/`, else the specs shipped in the package
           (`repro/experiments`, the same files)
  results  REPRO_RESULTS, else the checkout's `results/`, else `./results` in the current folder
  data     REPRO_DATA_DIR, else `$XDG_CACHE_HOME/repro/data` (`~/.cache/repro/data`)
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent


def in_checkout() -> bool:
    """True when the package runs from a source checkout (editable install or PYTHONPATH), not an installed wheel."""
    return (REPO_DIR / "pyproject.toml").is_file() and (REPO_DIR / "experiments").is_dir()


def experiments_dir() -> Path:
    """`REPRO_EXPERIMENTS`, the checkout's `experiments/`, or the specs shipped with the package."""
    if os.environ.get("REPRO_EXPERIMENTS"):
        return Path(os.environ["REPRO_EXPERIMENTS"])
    return REPO_DIR / "experiments" if in_checkout() else PACKAGE_DIR / "experiments"


def results_dir() -> Path:
    """`REPRO_RESULTS`, the checkout's `results/`, or `./results` (never inside site-packages)."""
    if os.environ.get("REPRO_RESULTS"):
        return Path(os.environ["REPRO_RESULTS"])
    return REPO_DIR / "results" if in_checkout() else Path.cwd() / "results"


def data_dir() -> Path:
    """`REPRO_DATA_DIR` or `~/.cache/repro/data`."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro" / "data"
    return Path(os.environ.get("REPRO_DATA_DIR", default))
