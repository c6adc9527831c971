"""Where the toolkit keeps its files: specs, results, data. Overridable by environment variables.

The lookup rule, in a checkout and in an installed package alike:
  specs    REPRO_EXPERIMENTS, else the checkout's `experiments/`, else the specs shipped in the package
           (`repro/experiments`, the same files)
  results  REPRO_RESULTS, else the checkout's `results/`, else `./results` in the current folder
  data     REPRO_DATA_DIR, else `$XDG_CACHE_HOME/repro/data` (`~/.cache/repro/data`)

How a result record stores a path, so that a record written on one machine reads on another
(`portable` writes it, `resolve` reads it back; older records' absolute paths still resolve):
  under the results root in use   relative to it: `ace-rpe/ace-rpe-table2-pe/predictions/X.json`
  under the data dir              `$REPRO_DATA_DIR/runs/...` (the variable, whatever the folder is)
  anything else                   as it is (only a command line's words go further: `command_words`)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

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
    """`REPRO_RESULTS`, the checkout's `results/`, or `./results` (never inside site-packages); absolute."""
    if os.environ.get("REPRO_RESULTS"):
        return Path(os.environ["REPRO_RESULTS"]).absolute()
    return REPO_DIR / "results" if in_checkout() else Path.cwd() / "results"


def data_dir() -> Path:
    """`REPRO_DATA_DIR` or `~/.cache/repro/data`; absolute (a record names what lies under it portably)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro" / "data"
    return Path(os.environ.get("REPRO_DATA_DIR", default)).absolute()


# --- paths in result records ---------------------------------------------------------------------

DATA_DIR_VAR = "$REPRO_DATA_DIR"
LOCAL = "{local}"  # a folder of the machine that wrote the record (a command's word outside both roots)


def _roots(results_root: Path | None) -> list[tuple[str, str]]:
    """(absolute folder, what a record writes for it), the deeper first where one holds the other."""
    pairs = [(os.path.abspath(results_root or results_dir()), ""), (os.path.abspath(data_dir()), DATA_DIR_VAR)]
    return sorted((p for p in pairs if p[0] != os.sep), key=lambda p: -len(p[0]))


def portable(text: str, results_root: Path | None = None) -> str:
    """`text` (a path, a command, a message) with every path under the results root written relative to
    it and every path under the data dir as `$REPRO_DATA_DIR/...`; the rest is left as it is."""
    for root, mark in _roots(results_root):
        pattern = r"(?<![\w.$/-])" + re.escape(root) + r"(/|(?![\w.-]))"
        text = re.sub(pattern, lambda m, mark=mark: mark + m.group(1) if mark else "" if m.group(1) else ".", text)
    return text


def portable_value(value: Any, results_root: Path | None = None) -> Any:
    """`portable` over every string of a JSON value, mapping keys included."""
    if isinstance(value, str):
        return portable(value, results_root)
    if isinstance(value, dict):
        return {portable(k, results_root): portable_value(v, results_root) for k, v in value.items()}
    if isinstance(value, list):
        return [portable_value(v, results_root) for v in value]
    return value


def command_words(argv: list[str], results_root: Path | None = None) -> list[str]:
    """A command line as a record keeps it: the program by its name (`repro` for `.venv/bin/repro` and
    for `python -m repro`, whose argv[0] is the package's `__main__.py`), the other words `portable`, and
    a path outside both roots as `{local}/<its name>`."""
    if not argv:
        return []
    first = Path(argv[0])
    words = [first.parent.name if first.name == "__main__.py" else first.name]
    for word in argv[1:]:
        option, eq, value = word.partition("=") if word.startswith("-") else ("", "", word)
        value = portable(value, results_root)
        if os.path.isabs(value):
            value = f"{LOCAL}/{Path(value).name}"
        words.append(option + eq + value)
    return words


def resolve(stored: str, results_root: Path | None = None) -> Path:
    """A path as a record stores it, on this machine: `$REPRO_DATA_DIR/x` in the data dir, a relative
    path under the results root in use, an absolute one (older records) as it is."""
    if stored == DATA_DIR_VAR or stored.startswith(DATA_DIR_VAR + "/"):
        return data_dir() / stored[len(DATA_DIR_VAR) :].lstrip("/")
    path = Path(stored)
    return path if path.is_absolute() else (results_root or results_dir()) / path


def resolve_command(command: str, files: list[str], results_root: Path | None = None) -> str:
    """A command a record stores, to run here: its words that are the record's own files (`files`, as
    stored) or `$REPRO_DATA_DIR/...` become paths of this machine."""
    here = (
        shown(resolve(w, results_root)) if w in files or w.startswith(DATA_DIR_VAR) else w for w in command.split(" ")
    )
    return " ".join(here)


def shown(path: Path) -> str:
    """A path to print: relative to the current folder when it lies under it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
