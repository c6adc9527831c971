"""`repro submit` and `repro eval`: a test-set prediction file checked and sent to its server, and predictions
scored with a metric identical to the official scorer.

How `repro eval` shows a MetricResult: progress while scoring, a rich table, JSON, a per-item file.
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
from typing import TYPE_CHECKING, Any

import typer

from repro import __version__
from repro import completion as complete
from repro.cli.common import RICH_OR_JSON, command, console, err_console
from repro.errors import ReproError
from repro.metrics import REGISTRY as METRIC_REGISTRY
from repro.metrics import VARIANTS as METRIC_VARIANTS
from repro.metrics.base import one_line

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from repro.metrics.base import MetricResult

METRIC_NAMES = tuple(METRIC_REGISTRY)
PHASES = ("reading annotations", "reading predictions", "scoring")


@command("submit")
def submit_command(
    target: str | None = typer.Argument(
        None, metavar="TARGET", autocompletion=complete.targets, help="An evaluation target (omit to list them)."
    ),
    predictions: str | None = typer.Option(
        None, "--predictions", "-p", help="Prediction file: JSON array or JSON lines."
    ),
    questions: str | None = typer.Option(None, "--questions", help="Question file (default: the downloaded one)."),
    wait: bool = typer.Option(False, "--wait", help="Poll until evaluated and print the result."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the file only; no network, nothing sent."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    host: str | None = typer.Option(
        None, "--host", help="EvalAI API URL (default: ~/.evalai/host_url, EVALAI_API_URL)."
    ),
    token: str | None = typer.Option(
        None, "--token", help="EvalAI token or token.json path (default: ~/.evalai/token.json)."
    ),
    phase: int | None = typer.Option(None, "--phase", help="EvalAI phase id, overriding the catalog and the lookup."),
    large: bool = typer.Option(False, "--large", help="Use the presigned large-file upload whatever the size."),
    method: str | None = typer.Option(None, "--method", help="Method name shown on the leaderboard / in file names."),
    status: int | None = typer.Option(None, "--status", metavar="ID", help="Show (with --wait: follow) a submission."),
    poll: float = typer.Option(5.0, "--poll", help="First polling interval in seconds (grows to 60)."),
    timeout: float = typer.Option(3600.0, "--timeout", help="Give up waiting after this many seconds."),
) -> None:
    """Check a test-set prediction file, then submit it to its evaluation server.

    Everything is checked before any network call: format, every required question answered once,
    no unknown ids, size. EvalAI targets are sent with the evalai client; others get the exact file
    their server needs and upload instructions.

    Example: [bold]repro submit TARGET --predictions FILE --dry-run[/]
    """
    from repro.submit import SubmitOptions, show_status, submit, targets_table

    if status is not None:
        raise typer.Exit(show_status(status, console, err_console, wait, host, token, poll, timeout))
    if target is None:
        console.print(targets_table())
        return
    if predictions is None:
        raise ReproError("--predictions FILE is required to submit")
    opts = SubmitOptions(
        target=target,
        predictions=Path(predictions),
        questions=Path(questions) if questions else None,
        wait=wait,
        dry_run=dry_run,
        yes=yes,
        host=host,
        token=token,
        phase=phase,
        large=large,
        method=method,
        poll_s=poll,
        timeout_s=timeout,
    )
    raise typer.Exit(submit(opts, console, err_console, lambda text: typer.confirm(text, default=False)))


@command("eval")
def eval_command(
    metric: str = complete.choice(METRIC_NAMES, ..., "--metric", "-m", help="The metric.", what="metric"),
    annotations: Path = typer.Option(
        ..., "--annotations", "-a", help="Ground truth: an official file or [{question_id, answers}]."
    ),
    predictions: Path = typer.Option(
        ..., "--predictions", "-p", help="Predictions: [{question_id, answer}] (or score matrices for recall)."
    ),
    questions: Path | None = typer.Option(None, "--questions", help="Questions file, checked against the annotations."),
    threshold: float = typer.Option(
        0.9, "--threshold", help="WUPS threshold in [0, 1] (the tables use 0.9 and 0.0), or -1 for exact match."
    ),
    variant: str | None = typer.Option(
        None,
        "--variant",
        help="Reference version: " + "; ".join(f"{m} {'|'.join(v)}" for m, v in METRIC_VARIANTS.items()) + ".",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: metric, aggregate, n."),
    fmt_name: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format (json = --json)."),
    per_item: Path | None = typer.Option(None, "--per-item", help="Write {question_id: score} to this file."),
    digits: int | None = typer.Option(None, "--round", help="Round like the official script (e.g. --round 2)."),
) -> None:
    """Score predictions with a metric identical to the official scorer.

    Example: [bold]repro eval --metric anls --annotations gold.json --predictions predictions.json --json[/]
    """
    from repro.metrics import files

    if digits is not None and not 0 <= digits <= 15:  # round(x, -1) would print 33.33 as 30.0
        raise ReproError(f"--round takes 0 to 15 digits, not {digits}")
    if per_item is not None:  # before scoring: a long evaluation is not wasted on a path that will be refused
        check_per_item_path(per_item, files.sources(annotations, predictions, questions))
    result = evaluate_with_progress(metric, annotations, predictions, questions, threshold, variant, err_console)
    if per_item is not None:
        write_per_item(per_item, result, digits)
    if as_json or fmt_name == "json":
        out = to_json(result, digits)
        out.setdefault("variant", variant or METRIC_VARIANTS.get(metric, (None,))[0])
        out.setdefault("toolkit_version", __version__)
        typer.echo(json.dumps(out, allow_nan=False))
    else:
        console.print(render_table(result, digits))


# --- how `repro eval` shows a MetricResult ------------------------------------------------------


def evaluate_with_progress(
    metric: str,
    annotations: Path,
    predictions: Path,
    questions: Path | None,
    threshold: float,
    variant: str | None,
    console: Console,
) -> MetricResult:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

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
    from repro.metrics.base import LazyPerItem

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
    from repro.utils import check_output_path

    check_output_path(path, "--per-item")  # a FIFO or device (/dev/null) would be replaced by the rename


def write_per_item(path: Path, result: MetricResult, digits: int | None = None) -> None:
    """{id: score} as strict JSON (NaN or infinite scores as null), written atomically; never over an
    input of `result` (its `sources`), a directory or a name too long for the temporary file."""
    path = Path(path)
    from repro.utils import atomic_open

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
    from rich.text import Text

    return Text(one_line(str(label)))


def render_table(result: MetricResult, digits: int | None = None) -> Table:
    """One row per aggregate value; per-type breakdowns listed after, indented by their group."""
    from rich.table import Table

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
