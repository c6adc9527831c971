"""How `repro eval` shows a MetricResult: progress while scoring, a rich table, JSON, per-item file.

JSON out is strict JSON: a score that is NaN or infinite (a recall rank of a query whose relevant
item was never returned, an aggregate over no items) is written as null. `to_json` then adds
`null_items`, the number of per-item scores written as null by `write_per_item`.

`write_per_item` refuses a path that is one of the files the scores were read from (however it is
named: a symlink, "..", a hard link), a directory, or a file name with no room for the temporary
file it writes first; the file is written atomically (`repro.utils`).
"""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from repro.errors import ReproError
from repro.metrics.base import LazyPerItem, MetricResult, one_line
from repro.utils import atomic_open

PHASES = ("reading annotations", "reading predictions", "scoring")


def evaluate_with_progress(
    metric: str,
    annotations: Path,
    predictions: Path,
    questions: Path | None,
    threshold: float,
    variant: str | None,
    console: Console,
) -> MetricResult:
    from repro.metrics.files import evaluate_files

    with Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task(f"{metric}: starting", total=len(PHASES))

        def step(name: str) -> None:
            done = PHASES.index(name) if name in PHASES else 0
            progress.update(task, completed=done, description=f"{metric}: {name}")

        try:
            result = evaluate_files(metric, annotations, predictions, questions, threshold, variant, step)
        except ReproError as exc:  # one printable line, whatever ids or paths the message quotes
            exc.args = (one_line(str(exc)),)
            raise
        progress.update(task, completed=len(PHASES))
    return result


def rounded(value: Any, digits: int | None) -> Any:
    if digits is None:
        return value
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    return value


def strict(value: Any) -> Any:
    """`value` with every NaN or infinite float (in nested dicts too) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    return value


def null_items(result: MetricResult) -> int:
    """The number of per-item scores that are NaN or infinite (written as null)."""
    if isinstance(result.per_item, LazyPerItem):
        return result.per_item.count_nonfinite()
    return sum(1 for v in result.per_item.values() if not math.isfinite(float(v)))


def to_json(result: MetricResult, digits: int | None = None) -> dict[str, Any]:
    """The aggregate as strict JSON; `null_items` when some per-item scores are not finite."""
    out = strict(rounded(result.to_json(), digits))
    missing = null_items(result)
    if missing:
        out["null_items"] = missing
    return out


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, RuntimeError):  # a symlink loop, a name too long: not provably the same file
        return False


def check_per_item_path(path: Path, sources: tuple = ()) -> None:
    """A ReproError when --per-item `path` is an input (`sources`: (role, path) pairs) or a folder."""
    path = Path(path)
    for role, source in sources:
        if _same_file(path, Path(source)):
            raise ReproError(one_line(f"--per-item {path} is the {role} file {source}; refusing to overwrite it"))
    try:
        is_dir = path.is_dir()
    except OSError as exc:
        raise ReproError(one_line(f"--per-item {path}: {exc.strerror or exc}")) from None
    if is_dir:
        raise ReproError(one_line(f"--per-item {path} is a directory; give a file name"))


def write_per_item(path: Path, result: MetricResult, digits: int | None = None) -> None:
    """{id: score} as strict JSON (NaN or infinite scores as null), written atomically; never over an
    input of `result` (its `sources`), a directory or a name too long for the temporary file."""
    path = Path(path)
    check_per_item_path(path, result.sources)
    data = {str(k): strict(rounded(float(v), digits)) for k, v in result.per_item.items()}
    try:
        with atomic_open(path) as handle:
            json.dump(data, handle, indent=2, sort_keys=True, allow_nan=False)
            handle.write("\n")
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise ReproError(
                one_line(
                    f"--per-item {path}: the file name is too long ({len(os.fsencode(path.name))} "
                    f"bytes; it is written first under a temporary name about 14 bytes "
                    f"longer)"
                )
            ) from None
        raise ReproError(one_line(f"--per-item {path}: cannot write ({exc.strerror or exc})")) from None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def _cell(label: Any) -> Text:
    """A label from the input files (an answer type, a split) as plain text: no rich markup, one line."""
    return Text(one_line(str(label)))


def render_table(result: MetricResult, digits: int | None = None) -> Table:
    """One row per aggregate value; per-type breakdowns listed after, indented by their group."""
    aggregate = rounded(result.aggregate, digits)
    table = Table(title=f"{result.metric} on {result.n} items")
    table.add_column("key")
    table.add_column("value", justify="right")
    for key, value in aggregate.items():
        if not isinstance(value, dict):
            table.add_row(_cell(key), _fmt(value))
    for key, value in aggregate.items():
        if isinstance(value, dict):
            table.add_section()
            for sub, v in sorted(value.items(), key=lambda kv: str(kv[0])):
                table.add_row(_cell(f"{key} / {sub}"), _fmt(v))
    return table
