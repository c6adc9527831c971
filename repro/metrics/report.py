"""How `repro eval` shows a MetricResult: progress while scoring, a rich table, JSON, per-item file."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from repro.metrics.base import MetricResult
from repro.results import write_json_atomic

PHASES = ("reading annotations", "reading predictions", "scoring")


def evaluate_with_progress(metric: str, annotations: Path, predictions: Path, questions: Optional[Path],
                           threshold: float, variant: Optional[str], console: Console) -> MetricResult:
    from repro.metrics.files import evaluate_files

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(f"{metric}: starting", total=len(PHASES))

        def step(name: str) -> None:
            done = PHASES.index(name) if name in PHASES else 0
            progress.update(task, completed=done, description=f"{metric}: {name}")

        result = evaluate_files(metric, annotations, predictions, questions, threshold, variant, step)
        progress.update(task, completed=len(PHASES))
    return result


def rounded(value: Any, digits: Optional[int]) -> Any:
    if digits is None:
        return value
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    return value


def to_json(result: MetricResult, digits: Optional[int] = None) -> dict[str, Any]:
    return rounded(result.to_json(), digits)


def write_per_item(path: Path, result: MetricResult, digits: Optional[int] = None) -> None:
    write_json_atomic(Path(path), {str(k): rounded(float(v), digits) for k, v in result.per_item.items()})


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def render_table(result: MetricResult, digits: Optional[int] = None) -> Table:
    """One row per aggregate value; per-type breakdowns listed after, indented by their group."""
    aggregate = rounded(result.aggregate, digits)
    table = Table(title=f"{result.metric} on {result.n} items")
    table.add_column("key")
    table.add_column("value", justify="right")
    for key, value in aggregate.items():
        if not isinstance(value, dict):
            table.add_row(key, _fmt(value))
    for key, value in aggregate.items():
        if isinstance(value, dict):
            table.add_section()
            for sub, v in sorted(value.items()):
                table.add_row(f"{key} / {sub}", _fmt(v))
    return table
