"""`repro list`, `show`, `table` and `plot`: what the experiments are and what their results say."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.markup import escape

from repro import completion as complete
from repro.cli.common import (
    RICH_OR_JSON,
    SCALES,
    TABLE_FORMATS,
    command,
    console,
    err_console,
    overrides_argument,
    target_argument,
    variant_view,
)
from repro.errors import ReproError


@command("list")
def list_command(
    paper: str | None = typer.Option(None, "--paper", help="Only this paper (an id `repro list` shows)."),
    fmt: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format."),
) -> None:
    """List every experiment: id, paper, table, title, rows, runnable rows, rows with results.

    A spec that does not load is named with its file:line and the command exits 2; the others are listed.

    Example: [bold]repro list --format json[/]
    """
    from repro.families import for_row, papers
    from repro.results import read_results
    from repro.specs import aliases, broken_specs, load_all

    if paper is not None and paper not in papers():
        raise ReproError(f"unknown paper {paper!r}; one of {', '.join(papers())}")
    specs = [s for s in load_all() if paper is None or s.paper == paper]
    entries = []
    for spec in specs:
        results = read_results(spec)
        entries.append(
            {
                "id": spec.id,
                "aliases": aliases(spec),
                "paper": spec.paper,
                "table": spec.table,
                "title": spec.title,
                "rows": len(spec.rows),
                "runnable": len(spec.runnable_rows),
                "implemented": sum(1 for r in spec.runnable_rows if r.config is None or for_row(r) is not None),
                "with_results": len({name for (name, _) in results}),
                "scales": sorted({scale for (_, scale) in results}),
            }
        )
    broken = broken_specs()
    if fmt == "json":
        typer.echo(json.dumps(entries, indent=2))
    else:
        _experiments_table(entries)
    for _, message in broken:
        err_console.print(f"[bold red]broken spec:[/] {escape(message)}", highlight=False)
    if broken:
        raise typer.Exit(2)


def _experiments_table(entries: list[dict]) -> None:
    from rich.table import Table

    table = Table(title=f"{len(entries)} experiments")
    for name, justify in (
        ("id", "left"),
        ("paper", "left"),
        ("table", "left"),
        ("title", "left"),
        ("rows", "right"),
        ("runnable", "right"),
        ("with results", "right"),
    ):
        table.add_column(name, justify=justify, overflow="fold")
    for e in entries:
        done = f"{e['with_results']}" + (f" ({', '.join(e['scales'])})" if e["scales"] else "")
        table.add_row(e["id"], e["paper"], e["table"], e["title"], str(e["rows"]), str(e["runnable"]), done)
    console.print(table)


@command("show")
def show_command(
    ident: str = typer.Argument(
        ..., metavar="ID", autocompletion=complete.experiment_ids, help="Experiment id, e.g. table5-ablation."
    ),
    fmt_name: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format."),
) -> None:
    """Show a spec readably: columns, rows, reported numbers, what runs and what is cited.

    Example: [bold]repro show table5-ablation --format json[/]
    """
    from rich.table import Table

    from repro.report import fmt
    from repro.specs import resolve

    spec = resolve(ident)
    if fmt_name == "json":
        typer.echo(json.dumps(spec_to_json(spec), indent=2, default=str))
        return
    console.print(f"[bold]{spec.id}[/] — {spec.paper} {spec.table}: {spec.title}")
    console.print(
        f"datasets: {', '.join(spec.datasets)}   reported split: {spec.split}"
        + (f"   recipe: {spec.recipe}" if spec.recipe else "")
    )
    console.print(f"file: {spec.path}")
    cols = Table(title="columns")
    for name in ("name", "metric", "key", "better", "split", "unit", "tolerance"):
        cols.add_column(name)
    for c in spec.columns:
        cols.add_row(
            c.name,
            c.metric,
            c.key or "",
            c.better,
            c.split or spec.split,
            c.unit or "",
            fmt(spec.tolerance_for(c.name, "paper")),
        )
    console.print(cols)
    rows = Table(title="rows")
    rows.add_column("row", style="bold")
    for c in spec.columns:
        rows.add_column(c.name, justify="right")
    rows.add_column("runs as")
    for row in spec.rows:
        values = []
        for c in spec.columns:
            v = row.reported.get(c.name)
            values.append("–" if v is None else (f"{v:g}?" if c.name in row.uncertain else f"{v:g}"))
        how = f"cited {row.cited}" if row.cited else json.dumps(row.model or row.compute, sort_keys=True)
        rows.add_row(row.name, *values, how)
    console.print(rows)
    for row in spec.rows:
        for col, note in row.uncertain.items():
            console.print(f"[yellow]uncertain[/] {row.name} / {col}: {escape(note)}", highlight=False)
        for col, why in row.deviation.items():
            console.print(f"[magenta]deviation[/] {row.name} / {col}: {escape(why)}", highlight=False)
        if row.note:
            console.print(f"[dim]note[/] {row.name}: {escape(row.note)}", highlight=False)
    if spec.notes:
        console.print(f"[dim]notes:[/] {escape(spec.notes.strip())}", highlight=False)


def spec_to_json(spec) -> dict:
    """A spec as `repro show --format json` prints it: what the YAML says, typed configs resolved."""
    from dataclasses import asdict

    return {
        "id": spec.id,
        "paper": spec.paper,
        "table": spec.table,
        "title": spec.title,
        "datasets": list(spec.datasets),
        "split": spec.split,
        "recipe": spec.recipe,
        "file": str(spec.path),
        "columns": [asdict(c) for c in spec.columns],
        "rows": [
            {
                "name": r.name,
                "reported": r.reported,
                "cited": r.cited,
                "model": r.model,
                "compute": r.compute,
                "uncertain": r.uncertain,
                "deviation": r.deviation,
                "note": r.note,
            }
            for r in spec.rows
        ],
        "claims": [asdict(c) for c in spec.claims],
        "tolerance": spec.tolerance,
        "scales": spec.scales,
        "notes": spec.notes,
    }


@command("table")
def table_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument("Show the variant a run with these overrides wrote."),
    fmt_name: str | None = complete.choice(
        TABLE_FORMATS,
        None,
        "--format",
        "-f",
        help="Output format (default: rich in a terminal, text when piped, or from the suffix of -o).",
    ),
    scale: str = complete.choice(SCALES, "paper", "--scale", "-s", help="Which results to show.", what="scale"),
    columns: str | None = typer.Option(None, "--columns", "-c", help="Only these columns, e.g. Num,All."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write to this file (.md .csv .tex .html .json .txt), replaced atomically."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Show the partial run made with this --limit."),
) -> None:
    """Reported beside reproduced, per column; at other scales, each row's effect against the baseline.

    Tables wider than the terminal are split into blocks of columns; numbers and row names are never cut.

    Example: [bold]repro table table5-ablation --scale synthetic --columns Num,All[/]
    """
    import shutil

    from repro.report import SUFFIXES, render_claims_rich, render_rich, render_text
    from repro.utils import atomic_open

    if output is not None:
        by_suffix = SUFFIXES.get(output.suffix.lower())
        if by_suffix is None and fmt_name in (None, "rich"):
            raise ReproError(
                f"-o {output}: cannot tell the format from {output.suffix or 'no suffix'!r}; "
                f"use one of {', '.join(SUFFIXES)} or --format"
            )
        if fmt_name not in (None, "rich") and by_suffix not in (None, fmt_name):
            raise ReproError(f"-o {output} names a {by_suffix} file but --format is {fmt_name}")
        fmt_name = by_suffix if fmt_name in (None, "rich") else fmt_name
    view, _ = variant_view(ident, overrides, limit, scale, columns)
    if fmt_name is None:
        fmt_name = "rich" if console.is_terminal else "text"
    if output is not None:
        text = render_text(view, fmt_name, width=shutil.get_terminal_size((80, 24)).columns)
        with atomic_open(output) as handle:
            handle.write(text)
        err_console.print(f"wrote {escape(str(output))} ({fmt_name})", highlight=False)
    elif fmt_name == "rich":
        console.print(render_rich(view))
        claims = render_claims_rich(view)
        if claims is not None:
            console.print(claims)
    else:
        sys.stdout.write(render_text(view, fmt_name, width=shutil.get_terminal_size((80, 24)).columns))


@command("plot")
def plot_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument("Plot the variant a run with these overrides wrote."),
    scale: str = complete.choice(SCALES, "paper", "--scale", "-s", help="Which results to plot.", what="scale"),
    output: Path = typer.Option(..., "--output", "-o", help="The figure: .png, .pdf or .svg."),
    columns: str | None = typer.Option(None, "--columns", "-c", help="Only these columns, e.g. Num,All."),
    workdir: str | None = typer.Option(
        None, "--workdir", help="Where the runs' train.jsonl are (default: $REPRO_DATA_DIR/runs)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Plot the partial run made with this --limit."),
) -> None:
    """Reported vs reproduced per column (seed error bars), the claims as a forest plot, training curves.

    Needs matplotlib (pip install 'repro[plot]').

    Example: [bold]repro plot table5-ablation --scale synthetic -o table5.png[/]
    """
    from repro.paths import data_dir
    from repro.report.plot import draw, training_logs

    view, variant = variant_view(ident, overrides, limit, scale, columns)
    root = Path(workdir) if workdir else data_dir() / "runs"
    curves = training_logs(root, view, None if variant.empty else variant.name)
    held = draw(view, output, curves)
    console.print(
        f"wrote {escape(str(output))}: reported vs reproduced for {held['columns']} column(s), "
        f"{held['claims']} claim(s), training curves of {held['curves']} unit(s)"
        + ("" if held["curves"] else f" (no train.jsonl under {escape(str(root))})"),
        highlight=False,
        soft_wrap=True,
    )
