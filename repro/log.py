"""Logging: the `repro` logger tree, its console handler and the per-run log file.

The console (stderr) always shows warnings and errors; info by default, debug with `repro -v`, and only
warnings and errors with `repro -q`. The root options set `REPRO_LOG_LEVEL`, so a process started below
(a unit, a Slurm job) logs at the same level. Each training run also writes `run.log` beside its
`train.jsonl` with every message of the run at debug level, whatever the console shows.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LEVEL_ENV = "REPRO_LOG_LEVEL"
RUN_LOG = "run.log"
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FILE_ONLY = "run_log_only"  # a record with this attribute set goes to run.log, not to the console

logger = logging.getLogger("repro")


def level_for(verbose: int = 0, quiet: int = 0) -> int:
    """-v: debug; -q: warnings and errors only; neither: info. Warnings and errors are never hidden."""
    if verbose:
        return logging.DEBUG
    if quiet:
        return logging.WARNING
    return logging.INFO


def _level_from_env() -> int:
    name = os.environ.get(LEVEL_ENV, "").strip().upper()
    level = logging.getLevelName(name) if name else logging.INFO
    return min(level, logging.WARNING) if isinstance(level, int) else logging.INFO


class _Console(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a message comes (a test runner may swap it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns it
        pass


class _ConsoleFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {text}"
        return text


def setup(level: int | None = None) -> int:
    """Give the `repro` logger its console handler (once) at `level` (default: REPRO_LOG_LEVEL, else info);
    export the level for processes started below. Returns the level."""
    level = _level_from_env() if level is None else min(level, logging.WARNING)
    os.environ[LEVEL_ENV] = logging.getLevelName(level)
    console = next((h for h in logger.handlers if isinstance(h, _Console)), None)
    if console is None:
        console = _Console()
        console.setFormatter(_ConsoleFormat())
        console.addFilter(lambda record: not getattr(record, FILE_ONLY, False))
        logger.addHandler(console)
    console.setLevel(level)
    logger.setLevel(logging.DEBUG)  # the handlers filter: the console by level, run.log takes everything
    return level


def file_only(**fields: Any) -> dict[str, Any]:
    """`extra=` for a message that goes to run.log but not to the console (which prints its own lines)."""
    return {FILE_ONLY: True, **fields}


@contextmanager
def run_log(workdir: Path, append: bool = False, started: str = "") -> Iterator[Path]:
    """Every message of the `repro` loggers, debug included, into `workdir/run.log` while the block runs
    (appended to when a run resumes), with `started` first and how the block ended last. Under torchrun
    only rank 0 writes it."""
    path = Path(workdir) / RUN_LOG
    if os.environ.get("RANK", "0") != "0":
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="a" if append else "w", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter(FILE_FORMAT))
    if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    log = logging.getLogger("repro.train")
    try:
        if started:
            log.info(started, extra=file_only())
        yield path
    except BaseException as exc:
        level = logging.WARNING if type(exc).__name__ == "TrainingInterrupted" else logging.ERROR
        log.log(level, "stopped: %s: %s", type(exc).__name__, exc, extra=file_only())
        raise
    else:
        log.info("training loop ended", extra=file_only())
    finally:
        logger.removeHandler(handler)
        handler.close()
