"""`repro list`, `show`, `table` and `plot`: what the experiments are and what their results say."""

from __future__ import annotations

import functools
import json
import shutil
import sys
import textwrap
from pathlib import Path

import typer

from repro import completion as complete
from repro.cli.common import (
    RICH_OR_JSON,
    SCALES,
    TABLE_FORMATS,
    command,
    console,
    err_console,
    escape,
    one_line,
    overrides_argument,
    target_argument,
    variant_view,
    view_inputs,
)
from repro.errors import ReproError


@command("list")
def list_command(
    paper: str | None = typer.Option(None, "--paper", help="Only this paper (an id `repro list` shows)."),
    fmt: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format."),
) -> None:
    """List every experiment, one line each: id, table, rows that run, scales it runs at, title.

    The scales run from cheapest to dearest (smoke and synthetic need no GPU or data); a * marks a scale
    with stored results. The title is cut to the terminal's width, or left out when too narrow. JSON:
    `runnable_scales` are the scales the spec runs at, `scales` those with results (as before).
    A spec that does not load is named with its file:line and the command exits 2; the others are listed.

    Example: [bold]repro list --paper psac --format json[/]
    """
    from repro.families import implemented, papers
    from repro.results import read_results
    from repro.specs import aliases, broken_specs, load_all

    if paper is not None and paper not in papers():
        raise ReproError(f"unknown paper {paper!r}; one of {', '.join(papers())}")
    specs = [s for s in load_all() if paper is None or s.paper == paper]
    entries = []
    for spec in specs:
        results = read_results(spec)
        runs = sum(1 for r in spec.runnable_rows if implemented(r))
        entries.append(
            {
                "id": spec.id,
                "aliases": aliases(spec),
                "paper": spec.paper,
                "table": spec.table,
                "title": spec.title,
                "rows": len(spec.rows),
                "runnable": len(spec.runnable_rows),
                "implemented": runs,
                "with_results": len({name for (name, _) in results}),
                "scales": sorted({scale for (_, scale) in results}),
                "runnable_scales": runnable_scales(spec) if runs else [],
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


def runnable_scales(spec) -> list[str]:
    """The scales `repro run` accepts for `spec`, cheapest first: those it has settings for, and paper."""
    return [scale for scale in ("smoke", "synthetic", "paper") if scale == "paper" or scale in spec.scales]


def _experiments_table(entries: list[dict]) -> None:
    """One line per experiment at any width: the block layout of `repro table`, rich in a terminal."""
    import shutil

    from repro.report.grid import Col, listing_grid, plain_listing, plain_width, rich_listing, rich_width

    scales = []
    for e in entries:
        runs = [s + ("*" if s in e["scales"] else "") for s in e["runnable_scales"]]
        runs += [f"{s}*" for s in e["scales"] if s not in e["runnable_scales"]]
        scales.append(" ".join(runs) or "–")
    cols = [
        Col("table", [e["table"] for e in entries], justify="left"),
        Col("rows run", [f"{e['runnable']} of {e['rows']}" for e in entries]),
        Col("scales (* results)", scales, justify="left"),
    ]
    label = Col("id", [e["id"] for e in entries], justify="left")
    title = Col("title", [one_line(e["title"]) for e in entries], justify="left")
    heading = f"{len(entries)} experiments"
    width = console.width if console.is_terminal else shutil.get_terminal_size((80, 24)).columns
    if (rich_width if console.is_terminal else plain_width)([label, *cols]) > width:
        cols = cols[1:]  # too narrow for one line each: the id names the table too (`repro show ID` gives it)
    if console.is_terminal:
        grid = listing_grid(label, cols, width, True, title)
        for table in rich_listing(grid, width, title=heading, title_justify="left"):
            console.print(table)
        return
    grid = listing_grid(label, cols, width, False, title)
    typer.echo("\n".join([heading, *plain_listing(grid, width)]))


@command("show")
def show_command(
    ident: str = typer.Argument(
        ..., metavar="ID", autocompletion=complete.experiment_ids, help="Experiment id (`repro list` shows them)."
    ),
    fmt_name: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format."),
) -> None:
    """Show a spec readably: columns, rows and their reported numbers, what each row runs as, the scales
    (seeds, sizes, schedule), the claims. Row names, numbers and the file path are never cut.

    Example: [bold]repro show mcan-pa-table5-ablation --format json[/]
    """
    from repro.report.grid import Col
    from repro.report.numbers import column_decimals, fmt
    from repro.specs import resolve

    spec = resolve(ident)
    if fmt_name == "json":
        typer.echo(json.dumps(spec_to_json(spec), indent=2, default=str))
        return
    say = functools.partial(console.print, highlight=False, soft_wrap=True)

    def wrap(text: str, indent: str, first: str = "  ") -> None:  # at spaces, never inside a word or number
        lines = textwrap.wrap(
            text,
            width=max(shutil.get_terminal_size((80, 24)).columns if not console.is_terminal else console.width, 40),
            initial_indent=first,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        for line in lines:
            say(escape(line))

    console.print(f"[bold]{escape(spec.id)}[/] — {escape(f'{spec.paper} {spec.table}: {one_line(spec.title)}')}")
    say(
        escape(
            f"datasets: {', '.join(spec.datasets)} · reported split: {spec.split}"
            + (f" · recipe: {spec.recipe}" if spec.recipe else "")
        )
    )
    say(f"file: {escape(str(spec.path))}")  # soft wrap: never folded or cut, so it can be copied
    names = [c.name for c in spec.columns]
    _print_grid(
        "columns",
        Col("name", names, justify="left"),
        [
            Col("metric", [c.metric for c in spec.columns], justify="left"),
            Col("key", [c.key or "" for c in spec.columns], justify="left"),
            Col("better", [c.better for c in spec.columns], justify="left"),
            Col("split", [c.split or spec.split for c in spec.columns], justify="left"),
            Col("unit", [c.unit or "" for c in spec.columns], justify="left"),
            Col("tolerance", [fmt(spec.tolerance_for(c.name, "paper")) for c in spec.columns]),
        ],
    )
    reported = []
    for c in spec.columns:
        values = [r.reported[c.name] for r in spec.rows if r.reported.get(c.name) is not None]
        digits = column_decimals(values)  # as printed: 52.30 beside 53.26
        cells = []
        for row in spec.rows:
            v = row.reported.get(c.name)
            cells.append("–" if v is None else f"{v:.{digits}f}" + ("?" if c.name in row.uncertain else ""))
        reported.append(Col(c.name, cells))
    rows = Col("row", [r.name for r in spec.rows], justify="left")
    _print_grid("rows, as reported (? = uncertain in the PDF)", rows, reported)
    say("[bold]runs as[/]")
    from rich.cells import cell_len

    width = max(cell_len(r.name) for r in spec.rows)
    for row in spec.rows:
        how = f"cited {row.cited}" if row.cited else _settings(row.model or row.compute or {})
        wrap(f"{row.name.ljust(width)}  {how}", " " * (width + 4))
    say("[bold]scales[/] (paper: the paper's data and schedule; `repro run ID --scale S`)")
    for scale in ("smoke", "synthetic", "paper"):
        settings = spec.scales.get(scale)
        if settings is None and scale != "paper":
            continue
        settings = settings or {}
        seeds = settings.get("seeds")
        facts = [f"seeds {','.join(map(str, seeds))}" if seeds else "seeds 0 (default)"]
        facts += [f"{k} {_settings(settings[k])}" for k in ("sizes", "recipe", "generator") if settings.get(k)]
        tolerance = {**spec.tolerance, **settings.get("tolerance", {})}
        facts.append(f"tolerance {_settings(tolerance)}")
        say(f"  {scale}")
        for fact in facts:
            wrap(fact, "      ", "    ")
    if spec.claims:
        say("[bold]claims[/] (judged under the design below: `repro table ID --scale S`)")
        for claim in spec.claims:
            control = f"; control {claim.control}" if claim.control else ""
            wrap(f"• {one_line(claim.text)} ({claim.column}: {claim.row} vs {claim.over}{control})", "    ")
        for line in design_lines(spec):
            wrap(line, "  ", "    ")
    for row in spec.rows:
        for col, note in row.uncertain.items():
            wrap(f"uncertain {row.name} / {col}: {one_line(note)}", "  ", "")
        for col, why in row.deviation.items():
            wrap(f"deviation {row.name} / {col}: {one_line(why)}", "  ", "")
        if row.note:
            wrap(f"note {row.name}: {one_line(row.note)}", "  ", "")
    if spec.notes:
        wrap(f"notes: {one_line(spec.notes)}", "  ", "")


def design_lines(spec) -> list[str]:
    """The spec's design as `repro show` prints it: when it was fixed, α and the test, δ with its source, seeds,
    looks and stopping rule per scale, each scale's design hash."""
    design = spec.design
    if design is None:
        return ["design: none (the claims are not judged until the spec has one)"]
    lines = [f"design fixed {design.fixed}: α {design.alpha:g} over one Holm family per table, test {design.test}"]
    for column, delta in design.delta.items():
        lines.append(f"δ {column}: {delta.value:g} ({one_line(delta.words)})")
    for scale, seeds in design.seeds.items():
        looks = design.looks.get(scale)
        plan = f", looks at {','.join(map(str, looks.at))} seeds ({looks.spending})" if looks else ""
        lines.append(f"{scale}: seeds {','.join(map(str, seeds))}{plan}; design hash {spec.design_hash(scale)}")
        if scale in design.stopping:
            lines.append(f"{scale} stopping rule: {one_line(design.stopping[scale])}")
    if design.note:
        lines.append(f"design note: {one_line(design.note)}")
    return lines


def _settings(value) -> str:
    """Settings as `key=value` words (nested keys dotted, lists comma-joined), shorter than JSON."""
    if isinstance(value, dict):
        words = []
        for k, v in value.items():
            if isinstance(v, dict):
                words += [f"{k}.{w}" for w in _settings(v).split(" ") if w]
            else:
                words.append(f"{k}={_settings(v)}")
        return " ".join(words)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_settings(v) for v in value) + "]"
    return str(value)


def _print_grid(heading: str, label, cols: list) -> None:
    """A small table in the block layout of `repro table`: rich in a terminal, plain text in pipes."""
    import shutil

    from repro.report.grid import listing_grid, plain_listing, rich_listing

    if console.is_terminal:
        grid = listing_grid(label, cols, console.width, True)
        for table in rich_listing(grid, console.width, title=heading, title_justify="left"):
            console.print(table)
        return
    width = shutil.get_terminal_size((80, 24)).columns
    typer.echo("\n".join([heading, *plain_listing(listing_grid(label, cols, width, False), width)]))


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
        "design": None
        if spec.design is None
        else {
            **asdict(spec.design),
            "hashes": {scale: spec.design_hash(scale) for scale in spec.design.seeds},
        },
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
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="The full view: the paper's Δ beside this scale's, each claim's verdict in full with its statistics, "
        "how the claims are judged (files written with -o are always full).",
    ),
) -> None:
    """Reported beside reproduced, per column; at other scales, each row's effect against the baseline.

    Tables wider than the terminal are split into blocks of columns; numbers and row names are never cut. The
    default view is short (one line per claim); -v shows everything.

    Example: [bold]repro table mcan-pa-table5-ablation --scale synthetic --columns Num,All[/]
    """
    import shutil

    from repro.report import SUFFIXES, render_claims_rich, render_rich, render_text
    from repro.utils import atomic_open, check_not_an_input

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
    view, variant = variant_view(ident, overrides, limit, scale, columns)
    if output is not None:
        check_not_an_input(output, view_inputs(view, variant), "-o")
    if fmt_name is None:
        fmt_name = "rich" if console.is_terminal else "text"
    if output is not None:
        text = render_text(view, fmt_name, width=shutil.get_terminal_size((80, 24)).columns)
        with atomic_open(output) as handle:
            handle.write(text)
        err_console.print(f"wrote {escape(str(output))} ({fmt_name})", highlight=False)
    elif fmt_name == "rich":
        console.print(render_rich(view, verbose))
        claims = render_claims_rich(view, verbose)
        if claims is not None:
            console.print(claims)
    else:
        sys.stdout.write(render_text(view, fmt_name, width=shutil.get_terminal_size((80, 24)).columns, verbose=verbose))


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

    Example: [bold]repro plot mcan-pa-table5-ablation --scale synthetic -o table5.png[/]
    """
    from repro.paths import data_dir
    from repro.report.plot import draw, training_logs
    from repro.utils import check_not_an_input

    view, variant = variant_view(ident, overrides, limit, scale, columns)
    check_not_an_input(output, view_inputs(view, variant), "-o")
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
