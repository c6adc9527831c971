"""`repro weights ls` and `repro weights convert`: the released checkpoints and their layouts, and an official
checkpoint into this project's format with the key report (the strict load of `repro.weights`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from repro.cli.common import RICH_OR_JSON, app, console, fail, one_line
from repro.errors import ReproError

weights_app = typer.Typer(
    name="weights", help="Released checkpoints: what there is, and conversion.", no_args_is_help=True
)


def _boundary(fn):
    """The app's error boundary for this group's commands: a ReproError is one line and its exit code."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **k):
        try:
            return fn(*a, **k)
        except ReproError as exc:
            fail(escape(one_line(exc)), exc.exit_code)

    return wrapper


@weights_app.command("ls")
@_boundary
def ls_command(fmt: str = typer.Option("rich", "--format", "-f", help="Output format: rich or json.")) -> None:
    """What is released for which rows (URL, size and sha256 where published)."""
    from dataclasses import asdict

    from rich.table import Table

    from repro.weights import RELEASED

    if fmt not in RICH_OR_JSON:
        raise ReproError(f"--format {fmt!r}: one of {', '.join(RICH_OR_JSON)}")
    if fmt == "json":
        typer.echo(json.dumps([asdict(r) for r in RELEASED], indent=2))
        return
    table = Table(title="released checkpoints")
    for column in ("name", "family", "layout", "rows", "url", "size", "sha256"):
        table.add_column(column)
    for r in RELEASED:
        table.add_row(
            r.name, r.family, r.layout, r.rows, r.url or "(not in the reference notes)", r.size or "?", r.sha256 or "-"
        )
    console.print(table)


def convert_checkpoint(path: Path, paper: str, layout: str, option: str | None = None):
    """(our model's state dict, the key report) for an official checkpoint, by the paper's family."""
    from repro import families

    hooks = families.require(families.by_paper(paper))
    if not hooks.weight_layouts or hooks.convert_weights is None:
        raise ReproError(f"--family {paper}: its family reads no released checkpoint")
    if layout not in hooks.weight_layouts:
        raise ReproError(f"--layout {layout!r} for {paper}: one of {', '.join(hooks.weight_layouts)}")
    model, report = hooks.convert_weights(path, layout, option)
    return model.state_dict(), report


@weights_app.command("convert")
@_boundary
def convert_command(
    checkpoint: Path = typer.Argument(..., metavar="OFFICIAL.pth", help="The official checkpoint file."),
    family: str = typer.Option(..., "--family", help="The paper whose model it is (`repro weights ls` lists them)."),
    layout: str = typer.Option(..., "--layout", help="The checkpoint's official layout (`repro weights ls`)."),
    out: Path = typer.Option(..., "--output", "-o", help="Where to write this project's checkpoint (.pt)."),
    mix: str = typer.Option(
        None,
        "--mix",
        help="The released configuration's spatial mixing where a layout has several (default: released).",
    ),
    fmt: str = typer.Option("rich", "--format", "-f", help="Output format of the key report: rich or json."),
) -> None:
    """An official checkpoint to this project's format, printing the key report (placed, reshaped, missing,
    unexpected keys). Everything is placed or nothing is written.

    Example: [bold]repro weights convert model.pth --family sa-m4c --layout mmf -o m4c.pt[/]
    """
    import torch

    from repro.utils import atomic_open
    from repro.weights import render_report

    if fmt not in RICH_OR_JSON:
        raise ReproError(f"--format {fmt!r}: one of {', '.join(RICH_OR_JSON)}")
    state, report = convert_checkpoint(checkpoint, family, layout, mix)
    with atomic_open(out, "wb") as handle:
        torch.save({"model": state, "weights": {"source": str(checkpoint), "family": family, "layout": layout}}, handle)
    if fmt == "json":
        typer.echo(json.dumps({**report.as_json(), "output": str(out)}, indent=2))
    else:
        render_report(report, console, show_placed=True)
        console.print(f"wrote {escape(str(out))}")


app.add_typer(weights_app)
