"""Where the toolkit keeps its files: specs, results, data. Overridable by environment variables.

The lookup rule, in a checkout and in an installed package alike:
  specs    REPRO_EXPERIMENTS, else the checkout's `experiments/`, else the specs shipped in the package
           (`repro/experiments`, the same files)
  results  REPRO_RESULTS (every record, whatever its scale, as the tests and Slurm jobs set it); else
           paper and synthetic records in the checkout's `results/`, else `./results` in the current
           folder; smoke-scale and variant records (scratch: never committed) in REPRO_SCRATCH, else
           `$XDG_CACHE_HOME/repro/results` (`~/.cache/repro/results`)
  data     REPRO_DATA_DIR, else `$XDG_CACHE_HOME/repro/data` (`~/.cache/repro/data`)

Reading is writing's folder, with one fallback: an installed package with neither REPRO_RESULTS nor
`./results` reads the committed results shipped inside it (`repro/results`, read-only: a run writes
`./results`, and from then on that folder is what is read).

How a result record stores a path, so that a record written on one machine reads on another
(`portable` writes it, `resolve` reads it back; older records' absolute paths still resolve):
  under the results root in use   relative to it: `ace-rpe/ace-rpe-table2-pe/predictions/X.json` (the root
                                  the record lives in: the results folder, the scratch folder, a variant's)
  under the data dir              `$REPRO_DATA_DIR/runs/...` (the variable, whatever the folder is)
  anything else                   as it is (only a command line's words go further: `command_words`)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from repro.errors import ReproError

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


WEIGHTS_FOLDER = "weights"  # results/weights/<source>/<paper>/<id>/: numbers of released or given weights
SCRATCH_SCALES = frozenset({"smoke"})  # scales whose records are scratch: they prove a pipeline, no number


def results_dir(scale: str | None = None) -> Path:
    """Where a run writes the records of `scale` (None: paper and synthetic): `REPRO_RESULTS` for every
    scale; else the scratch folder for smoke, the checkout's `results/` or `./results` for the others
    (never inside site-packages); absolute."""
    if given := env_folder("REPRO_RESULTS"):
        return given
    if scale in SCRATCH_SCALES:
        return scratch_dir()
    return REPO_DIR / "results" if in_checkout() else Path.cwd() / "results"


def scratch_dir() -> Path:
    """Where smoke-scale and variant records go: `REPRO_RESULTS` when it is set (everything goes there),
    else `REPRO_SCRATCH`, else `$XDG_CACHE_HOME/repro/results` (`~/.cache/repro/results`); absolute."""
    return env_folder("REPRO_RESULTS") or env_folder("REPRO_SCRATCH") or cache_home() / "repro" / "results"


def env_folder(name: str) -> Path | None:
    """The folder the environment variable `name` names, absolute; None when it is unset or empty. One line when
    it names something that is not a folder (a file), before anything is read or trained."""
    value = os.environ.get(name)
    if not value:
        return None
    path = Path(value).absolute()
    if path.exists() and not path.is_dir():
        raise ReproError(f"{name}={value}: not a folder; point it at a folder (it is made when missing) or unset it")
    return path


def cache_home() -> Path:
    """`$XDG_CACHE_HOME` (unset or empty: `~/.cache`), absolute: the parent of the data and scratch folders."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").absolute()


def shipped_results_dir() -> Path:
    """The committed results an installed package carries (`repro/results`; in a checkout, a link to results/)."""
    return PACKAGE_DIR / "results"


def results_read_dir(scale: str | None = None) -> Path:
    """Where the records of `scale` are read: `results_dir(scale)`, except from an installed package with
    neither `REPRO_RESULTS` nor `./results`, which reads the committed results shipped in it (read-only)."""
    written = results_dir(scale)
    if (
        os.environ.get("REPRO_RESULTS")
        or scale in SCRATCH_SCALES
        or in_checkout()
        or written.is_dir()
        or not shipped_results_dir().is_dir()
    ):
        return written
    return shipped_results_dir()


def results_read_roots() -> list[tuple[Path, bool | None]]:
    """The folders a reader of every scale looks in, each with which records it reads there: None every
    scale (REPRO_RESULTS set), False all but the scratch scales (the results folder), True only those."""
    main, scratch = results_read_dir(), scratch_dir()
    return [(main, None)] if main == scratch else [(main, False), (scratch, True)]


def read_here(scale: str, scratch: bool | None) -> bool:
    """Whether a record of `scale` is read from a folder of `results_read_roots` marked `scratch`."""
    return scratch is None or (scale in SCRATCH_SCALES) == scratch


def data_dir() -> Path:
    """`REPRO_DATA_DIR` or `~/.cache/repro/data`; absolute (a record names what lies under it portably)."""
    return env_folder("REPRO_DATA_DIR") or cache_home() / "repro" / "data"


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
