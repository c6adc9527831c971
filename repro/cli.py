"""The `repro` command line: thin, parses options, calls the layers below, renders with rich."""

from __future__ import annotations

import functools
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

from repro import __version__
from repro import completion as complete
from repro.errors import ReproError
from repro.metrics import REGISTRY as METRIC_REGISTRY
from repro.metrics import VARIANTS as METRIC_VARIANTS

METRIC_NAMES = tuple(METRIC_REGISTRY)
SCALES = ("paper", "synthetic", "smoke")  # repro.specs.SCALES (a test keeps them equal)
TABLE_FORMATS = ("rich", "text", "md", "csv", "latex", "html", "json")  # repro.report.FORMATS (idem)
RICH_OR_JSON = ("rich", "json")
LAUNCHERS = ("local", "slurm")


# typer's own copy of click raises these (found through a public class, whichever click typer uses)
ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class OneLineErrors(typer.core.TyperGroup):
    """Usage errors (an unknown option, a value not among the choices, a missing argument) are one line on
    stderr and exit 2, like every other error of the toolkit."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `repro` alone: the help
                typer.echo(exc.ctx.get_help())
                sys.exit(2)
            where = f" (`{exc.ctx.command_path} -h` lists the options)" if getattr(exc, "ctx", None) else ""
            err_console.print(f"[bold red]error:[/] {escape(one_line(exc.format_message()))}{where}", highlight=False)
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("Aborted.", highlight=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="repro",
    cls=OneLineErrors,
    help="Reproduce the tables of five papers on positional and spatial attention in vision-language models.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    """Print one line to stderr and exit with `code`."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(code)


def debugging() -> bool:
    """`--debug` or REPRO_DEBUG=1: failures show their traceback."""
    return os.environ.get("REPRO_DEBUG", "") not in ("", "0")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def target_argument():
    """The ID argument of the commands that take an experiment or a spec file of one's own."""
    return typer.Argument(
        ...,
        metavar="ID",
        autocompletion=complete.experiment_ids,
        help="Experiment id (e.g. table5-ablation) or a spec file.",
    )


def overrides_argument(help: str):
    return typer.Argument(None, metavar="[KEY=VALUE]...", help=help)


def command(*args, **kwargs) -> Callable:
    """`app.command` behind the error boundary: a ReproError is one line on stderr and its exit code
    (2: bad input, 1: a server refused); a failure of the system (disk full, permission, a file that
    vanished) is one line naming the file and exit 2; anything else is one line, exit 1, and a hint.
    `--debug` (REPRO_DEBUG=1) shows the traceback instead."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    return fn(*a, **k)
                except ReproError as exc:
                    if debugging():
                        raise
                    fail(escape(one_line(exc)), exc.exit_code)
                except OSError as exc:
                    if debugging():
                        raise
                    where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
                    fail(escape(one_line(f"{where}{exc.strerror or exc}")), 2)
                except (KeyboardInterrupt, typer.Exit, typer.Abort, SystemExit):
                    raise
                except Exception as exc:  # noqa: BLE001 - the boundary: no traceback unless asked
                    if debugging():
                        raise
                    fail(
                        escape(
                            one_line(
                                f"{type(exc).__name__}: {exc} (internal error; run with --debug or "
                                f"REPRO_DEBUG=1 for the traceback)"
                            )
                        ),
                        1,
                    )
                finally:
                    for w in caught:
                        err_console.print(f"[yellow]warning:[/] {escape(one_line(w.message))}", highlight=False)

        return app.command(*args, **kwargs)(wrapper)

    return decorate


def _version(value: bool) -> None:
    if value:
        typer.echo(f"repro {__version__}")
        raise typer.Exit()


@app.callback(context_settings={"help_option_names": ["-h", "--help"]})
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", envvar="REPRO_DEBUG", help="Show tracebacks instead of one-line errors."
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        envvar="REPRO_DATA_DIR",
        help="Datasets, prepared files, checkpoints (default: ~/.cache/repro/data).",
    ),
    results: Path | None = typer.Option(
        None,
        "--results",
        envvar="REPRO_RESULTS",
        help="Result records (default: the checkout's results/, else ./results).",
    ),
    experiments: Path | None = typer.Option(
        None,
        "--experiments",
        envvar="REPRO_EXPERIMENTS",
        help="Experiment specs (default: the specs shipped with repro).",
    ),
    catalog: Path | None = typer.Option(
        None, "--catalog", envvar="REPRO_CATALOG", help="A YAML of extra or overriding dataset entries."
    ),
) -> None:
    """Reproduce the tables of five papers on positional and spatial attention (`repro list` shows them)."""
    if debug:
        os.environ["REPRO_DEBUG"] = "1"
    for name, value in (
        ("REPRO_DATA_DIR", data_dir),
        ("REPRO_RESULTS", results),
        ("REPRO_EXPERIMENTS", experiments),
        ("REPRO_CATALOG", catalog),
    ):
        if value is not None:  # the layers below read the environment
            os.environ[name] = str(value)


# --- experiments ----------------------------------------------------------------------------------


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


@command("attention")
def attention_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument("The variant a run with these overrides trained."),
    row: str = typer.Option(
        ..., "--row", "-r", autocompletion=complete.rows, help="The row whose trained model to look into."
    ),
    question: int = typer.Option(..., "--question", "-q", help="A val question id of the generated data."),
    scale: str = complete.choice(("synthetic", "smoke"), "synthetic", "--scale", "-s", help="A generated scale."),
    seed: int = typer.Option(0, "--seed", help="Which seed's trained model."),
    map_name: str | None = typer.Option(None, "--map", help="Which map to draw (default: the family's first)."),
    layer: int = typer.Option(-1, "--layer", help="Layer (0-based; -1: the last)."),
    head: int | None = typer.Option(None, "--head", help="Head (0-based; default: the mean of the heads)."),
    output: Path = typer.Option(..., "--output", "-o", help="The figure (.png, .pdf, .svg); the maps go to .npz."),
    workdir: str | None = typer.Option(None, "--workdir", help="Checkpoints (default: $REPRO_DATA_DIR/runs)."),
) -> None:
    """Draw a question's image boxes weighted by the attention they receive in a trained row; save the maps.

    The row's unit must have been trained (`repro run`/`repro train`); needs matplotlib.

    Example: [bold]repro attention table5-ablation --row ROW --question 7 -o attention.png[/]
    """
    from repro.families import for_row
    from repro.families.base import RunContext
    from repro.launch.units import unit_dir, with_data
    from repro.paths import data_dir
    from repro.report.plot import draw_attention, require_matplotlib, save_maps
    from repro.run import make_plan

    require_matplotlib()
    spec, variant = target_and_variant(ident, overrides, None)
    plan = make_plan(spec, scale, [row], [seed], variant)
    the_row = plan.rows[0]
    family = for_row(the_row)
    if family is None or family.attention is None:
        raise ReproError(f"row {the_row.name!r} of {spec.id}: its family draws no attention maps yet")
    root = Path(workdir) if workdir else data_dir() / "runs"
    ctx = RunContext(
        spec=spec,
        row=the_row,
        config=the_row.config,
        scale=scale,
        settings=plan.settings,
        seed=seed,
        workdir=unit_dir(root, spec, scale, the_row, seed, variant),
        progress=False,
    )
    maps = family.attention(with_data(ctx) if scale != "paper" else ctx, question)
    what = draw_attention(maps, output, map_name, layer, head)
    raw = output.with_suffix(".npz")
    save_maps(maps, raw)
    console.print(
        f"wrote {escape(str(output))} ({escape(what)}) and {escape(str(raw))} (every map); "
        f"{escape(maps.question)} → {escape(maps.answer)}",
        highlight=False,
        soft_wrap=True,
    )


@command("check")
def check_command(
    idents: list[str] | None = typer.Argument(None, metavar="[ID]...", help="Experiments to check (default: all)."),
    rerun: bool = typer.Option(
        False,
        "--rerun",
        help="Also train each fingerprinted row for its first steps again "
        "and compare the losses with the stored fingerprint.",
    ),
    rebaseline: bool = typer.Option(False, "--rebaseline", help="With --rerun: store new fingerprints instead."),
    scale: str = complete.choice(
        SCALES, "synthetic", "--scale", "-s", help="With --rerun: the scale of the fingerprints."
    ),
    fmt_name: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format of the values."),
) -> None:
    """Regression check for CI: every stored result within its spec's tolerance.

    Paper-scale results are compared with the paper's number, other scales with the reference the
    record carries. With --rerun, the fingerprints (the loss of the first training steps, which
    holds on any CPU) are trained again and compared. Exits 1 on any regression or unreadable
    result, 0 otherwise.

    Example: [bold]repro check table5-ablation --rerun[/]
    """
    from rich.table import Table

    from repro.paths import results_dir
    from repro.report import check_spec
    from repro.results import CorruptResult
    from repro.specs import broken_specs, load_all, resolve

    if not results_dir().is_dir():
        raise ReproError(
            f"{results_dir()}: no such results folder (REPRO_RESULTS or the checkout's results/); "
            f"nothing to check is not a pass"
        )
    specs = [resolve(i) for i in idents] if idents else list(load_all())
    if not idents:
        for _, message in broken_specs():
            err_console.print(f"[bold red]broken spec:[/] {escape(message)}", highlight=False)
        if broken_specs():
            raise typer.Exit(1)
    if rerun:
        _check_fingerprints(specs, scale, rebaseline, explicit=bool(idents))
    checks, unreadable = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for spec in specs:
            checks += check_spec(spec)
    for w in caught:
        if issubclass(w.category, CorruptResult):
            unreadable.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    failed = [c for c in checks if not c.ok]
    if fmt_name == "json":
        from dataclasses import asdict

        values = [{**asdict(c), "ok": c.ok} for c in checks]
        typer.echo(json.dumps({"checks": values, "regressions": len(failed), "unreadable": unreadable}, indent=2))
        raise typer.Exit(1 if failed or unreadable else 0)
    table = Table(title=f"repro check: {len(checks)} values in {len(specs)} experiment(s)")
    for name in ("experiment", "row", "scale", "column", "expected", "got", "Δ", "tolerance", "status"):
        table.add_column(name, justify="right" if name in ("expected", "got", "Δ", "tolerance") else "left")
    for c in checks:
        status = "[green]ok[/]" if c.ok else "[bold red]REGRESSION[/]"
        table.add_row(
            c.spec,
            c.row,
            c.scale,
            c.column,
            f"{c.expected:.4g} ({c.against})",
            f"{c.actual:.4g}",
            f"{c.actual - c.expected:+.3g}",
            f"±{c.tolerance:g}",
            status,
        )
    if checks:
        console.print(table)
    for message in unreadable:
        err_console.print(f"[bold red]unreadable:[/] {escape(message)}", highlight=False)
    if failed or unreadable:
        console.print(f"[bold red]{len(failed)} regression(s), {len(unreadable)} unreadable result(s)[/]")
        raise typer.Exit(1)
    console.print(
        f"[green]all {len(checks)} stored values within tolerance[/]" if checks else "no stored results to check"
    )


def _check_fingerprints(specs: list, scale: str, rebaseline: bool, explicit: bool) -> None:
    from repro import fingerprint

    chosen = [spec for spec in specs if fingerprint.settings(spec, scale) is not None]
    if explicit and len(chosen) < len(specs):
        missing = ", ".join(s.id for s in specs if s not in chosen)
        raise ReproError(f"{missing}: no fingerprint declared at scale {scale!r} (scales.{scale}.fingerprint)")
    failed = 0
    for spec in chosen:
        if rebaseline:
            out = fingerprint.write(
                spec, scale, on_row=lambda row, spec=spec: console.print(f"fingerprint {spec.id} / {row}")
            )
            console.print(f"[green]stored[/] {out}", highlight=False)
            continue
        for c in fingerprint.check(spec, scale):
            status = "[green]ok[/]" if c.ok else "[bold red]REGRESSION[/]"
            console.print(
                f"{status} fingerprint {c.spec} / {c.row} ({c.scale}, {c.steps} steps): largest relative "
                f"loss difference {c.worst:.2e} at step {c.worst_step}, tolerance {c.tolerance:.0e}",
                highlight=False,
                soft_wrap=True,
            )
            failed += not c.ok
    if failed:
        console.print(f"[bold red]{failed} fingerprint regression(s)[/]")
        raise typer.Exit(1)


# --- running experiments -------------------------------------------------------------------------


MAX_SEED = 2**31 - 1


def parse_seeds(text: str) -> list[int]:
    """`0,1,2` -> [0, 1, 2]: integers in 0..2^31-1, each once."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ReproError(f"--seeds must be comma-separated integers, not {text!r}") from None
    if not seeds:
        raise ReproError("--seeds names no seed")
    if any(not 0 <= seed <= MAX_SEED for seed in seeds):
        raise ReproError(f"--seeds must lie in 0..{MAX_SEED}, not {text!r}")
    if len(set(seeds)) != len(seeds):
        raise ReproError(f"--seeds names a seed twice: {text!r}")
    return seeds


def _run(
    ident: str,
    rows: str | None,
    scale: str,
    seeds: str | None,
    dry_run: bool,
    resume: bool,
    workdir: str | None,
    rebaseline: bool = False,
    jobs: int | None = None,
    force: bool = False,
    overrides: list[str] | None = None,
    limit: int | None = None,
    launcher: str = "local",
    slurm=None,
    status: bool = False,
    wait: bool = False,
    fmt: str = "rich",
    ensemble: bool | None = None,
) -> None:
    from rich.table import Table

    from repro.launch.local import execute
    from repro.paths import data_dir, resolve, resolve_command, shown
    from repro.report import build_view, render_claims_rich, render_rich
    from repro.run import format_hours, make_plan
    from repro.submit.check import target_for

    spec, variant = target_and_variant(ident, overrides, limit)
    seed_list = None
    if seeds:
        seed_list = parse_seeds(seeds)
    plan = make_plan(spec, scale, rows.split(",") if rows else None, seed_list, variant)
    if ensemble is not None:  # how seeds are scheduled, not what they compute: no variant
        plan.settings = {**plan.settings, "ensemble": ensemble}
    root = Path(workdir) if workdir else data_dir() / "runs"
    if status:
        _slurm_status(plan, root, seeds=seed_list, fmt=fmt)
        return
    if not variant.empty:
        console.print(
            f"[bold]variant[/] {escape(variant.describe())}: not the spec as written; records go to "
            f"{escape(str(plan.results_root))}",
            highlight=False,
            soft_wrap=True,
        )
    steps = Table(title=f"plan: {spec.id} at scale {scale}")
    for name in ("row", "step", "seeds", "what", "GPU-hours", "status"):
        steps.add_column(name, overflow="fold")
    for step in plan.steps:
        steps.add_row(
            step.row.name,
            step.kind,
            ",".join(map(str, step.seeds)),
            step.detail,
            format_hours(step.gpu_hours) if scale == "paper" else "CPU",
            "ready" if step.ready else "[yellow]not implemented yet[/]",
        )
        for name, what, hours in step.stages:
            steps.add_row("", f"└ {name}", "", what, format_hours(hours), "")
    console.print(steps)
    for item in plan.data:
        console.print(f"data: {item}", highlight=False)
    if scale == "paper":
        total = sum(s.gpu_hours or 0.0 for s in plan.steps for _ in s.seeds)
        console.print(f"estimated GPU-hours (paper schedule): {total:.1f}")
    if launcher == "slurm":
        _slurm_run(plan, root, slurm, dry_run, resume, force, rebaseline, wait)
        return
    if dry_run:
        return

    from repro.monitor import RunMonitor

    results = execute(
        plan,
        root,
        resume=resume,
        force=force,
        rebaseline=rebaseline,
        jobs=jobs,
        monitor=lambda units: RunMonitor(console, units),
    )
    view = build_view(spec, scale, results_root=plan.results_root)
    console.print(render_rich(view))
    claims = render_claims_rich(view)
    if claims is not None:
        console.print(claims)
    for result in results:
        target = target_for(spec.datasets)
        # a family may give the exact commands per file (extra["submit"]: per seed, {file: [command, ...]})
        commands = {}
        for per_seed in result.extra.get("submit", []):
            commands.update(per_seed if isinstance(per_seed, dict) else {})
        files = result.extra.get("predictions", [])
        for path in files:  # as the record stores them (repro.paths): shown as this checkout's files
            submit = [resolve_command(c, files, plan.results_root) for c in commands.get(path, [])]
            submit = submit or [
                f"repro submit {target or 'TARGET'} --predictions {shown(resolve(path, plan.results_root))}"
            ]
            what = f"only the server scores {spec.split}" if scale == "paper" else "a test file for the server"
            console.print(
                f"{result.row}: {what}; submit with " + " or ".join(f"`{c}`" for c in submit),
                highlight=False,
                soft_wrap=True,
            )
    if not variant.empty:
        words = " ".join(_quoted(w) for w in [ident, *(overrides or [])])
        console.print(
            f"the variant's table again: `repro table {escape(words)} --scale {scale}"
            + (f" --limit {limit}" if limit else "")
            + "`",
            highlight=False,
            soft_wrap=True,
        )


def _slurm_run(plan, root: Path, options, dry_run: bool, resume: bool, force: bool, rebaseline: bool, wait: bool):
    """`repro run --launcher slurm`: submit the plan's units as a job array; with --wait, follow them."""
    from repro.launch import slurm

    words = f" --scale {plan.scale}"
    if dry_run:
        from repro.families import for_row
        from repro.launch.units import groups

        together = {
            group[0][0].row.name: len(group) for group in groups(plan, [(s, n) for s in plan.steps for n in s.seeds])
        }
        for step in plan.steps:
            if for_row(step.row) is not None:
                seeds = together.get(step.row.name, 1)
                res = slurm.group_resources(step, plan.scale, options, seeds)
                what = f"one job for its {seeds} seeds trained together" if seeds > 1 else "one job per seed"
                console.print(
                    f"slurm: {escape(step.row.name)}: {what}, {res.describe()}", highlight=False, soft_wrap=True
                )
        return
    submitted = slurm.submit(plan, root, options, resume=resume, force=force, rebaseline=rebaseline)
    if not submitted:
        console.print("nothing to submit: every seed has a stored result", highlight=False)
    from repro.launch.unit import label

    for unit in submitted:
        console.print(
            f"submitted {escape(label(unit.row, unit.seeds))}: job {unit.job_id} ({unit.resources.describe()}); "
            f"log {escape(unit.stdout)}",
            highlight=False,
            soft_wrap=True,
        )
    if not wait:
        if submitted:
            console.print(
                f"follow them with `repro run {escape(_quoted(plan.spec.id))}{escape(words)} --status`; each job "
                f"writes its record as it finishes, `repro table {escape(_quoted(plan.spec.id))} --scale {plan.scale}` "
                f"shows them",
                highlight=False,
                soft_wrap=True,
            )
        return
    states = slurm.wait(
        plan,
        root,
        sorted({seed for u in submitted for seed in u.seeds}),
        on_change=lambda u: console.print(f"{escape(u.row)} seed {u.seed}: job {u.job_id} {u.state}", highlight=False),
    )
    _slurm_status(plan, root, states)
    from repro.report import build_view, render_rich

    console.print(render_rich(build_view(plan.spec, plan.scale, results_root=plan.results_root)))
    failed = [u for u in states if u.state != "done"]
    if failed:
        names = ", ".join(f"{u.row} seed {u.seed}" for u in failed)
        raise slurm.UnitsFailed(f"{len(failed)} unit(s) did not finish: {names}; `--status` shows their logs")


def _slurm_status(plan, root: Path, states=None, seeds: list[int] | None = None, fmt: str = "rich") -> None:
    """`repro run ID --status`: each submitted unit pending, running, done or failed, with its logs."""
    from rich.table import Table

    from repro.launch import slurm

    states = slurm.unit_states(plan, root, seeds) if states is None else states
    if fmt == "json":
        out = {
            "spec": plan.spec.id,
            "scale": plan.scale,
            "variant": None if plan.variant.empty else plan.variant.name,
            "units": [u.to_json() for u in states],
        }
        typer.echo(json.dumps(out, indent=2))
        return
    if not states:
        console.print(f"no unit of {plan.spec.id} at scale {plan.scale} was submitted to Slurm from {root}")
        return
    colours = {"done": "green", "failed": "red", "running": "cyan", "pending": "yellow"}
    table = Table(title=f"{plan.spec.id} at scale {plan.scale}: Slurm jobs")
    for name in ("row", "seed", "job", "state", "logs / record"):
        table.add_column(name, overflow="fold")
    for u in states:
        state = f"[{colours.get(u.state, 'white')}]{u.state}[/] ({u.slurm_state})"
        where = "\n".join(escape(p) for p in (u.stdout, u.stderr, u.record, u.error) if p)
        table.add_row(escape(u.row), str(u.seed), u.job_id, state, where)
    console.print(table)
    counts = {}
    for u in states:
        counts[u.state] = counts.get(u.state, 0) + 1
    console.print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())), highlight=False)


def _quoted(word: str) -> str:
    import shlex

    return shlex.quote(word)


def target_and_variant(ident: str, overrides: list[str] | None, limit: int | None):
    """The spec an id or a spec file names, and what this run changes from the committed spec."""
    from repro.variants import Variant, load_target, parse_overrides

    spec, spec_file, digest = load_target(ident)
    return spec, Variant(parse_overrides(overrides), limit, spec_file, digest)


def variant_view(ident: str, overrides: list[str] | None, limit: int | None, scale: str, columns: str | None):
    """The table view of a spec, or of the variant these overrides / this limit / this spec file name."""
    from repro.report import build_view

    spec, variant = target_and_variant(ident, overrides, limit)
    picked = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    view = build_view(spec, scale, results_root=variant.results_root(), columns=picked)
    view.variant = view.variant or variant.to_json()  # said in the caption even before it has results
    return view, variant


OVERRIDES_HELP = (
    "Overrides such as recipe.epochs=2 sizes.d_model=32 model.positional=[pwa]; the results are a variant, "
    "kept under results/variants/ (README: Overrides)."
)


@command("run")
def run_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument(OVERRIDES_HELP),
    rows: str | None = typer.Option(
        None,
        "--rows",
        autocompletion=complete.rows,
        help="Comma-separated row names (default: every runnable row).",
    ),
    scale: str = complete.choice(
        SCALES, "paper", "--scale", "-s", help="paper: the real data; the others generate it."
    ),
    seeds: str | None = typer.Option(None, "--seeds", help="Comma-separated seeds (default: the spec's)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (rows, data, steps, GPU-hours) and stop."),
    resume: bool = typer.Option(
        False, "--resume", help="Keep stored seeds, run the missing ones, continue each from its checkpoint."
    ),
    workdir: str | None = typer.Option(None, "--workdir", help="Checkpoints and logs (default: $REPRO_DATA_DIR/runs)."),
    rebaseline: bool = typer.Option(
        False, "--rebaseline", help="Make these results the new reference for `repro check`."
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace stored results of these seeds and start over their checkpoints."
    ),
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        "-j",
        min=1,
        help="Runs at a time, each in its own process (default: the spec's scale setting, else 1).",
    ),
    ensemble: bool | None = typer.Option(
        None,
        "--ensemble/--no-ensemble",
        help="Train a row's seeds together in one process, each recorded as its own run (default: the scale's "
        "`ensemble` setting; generated scales; README: Specs).",
        show_default=False,
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Paper scale: only the first N questions of each split (a partial run, a variant)."
    ),
    launcher: str = complete.choice(
        LAUNCHERS,
        "local",
        "--launcher",
        help="local: here, --jobs at a time; slurm: a job per (row, seed), or per row with `ensemble: true`, on a "
        "Slurm cluster (README: Running on a Slurm cluster).",
        what="launcher",
    ),
    partition: str | None = typer.Option(None, "--partition", help="Slurm partition of the jobs."),
    account: str | None = typer.Option(None, "--account", help="Slurm account the jobs are charged to."),
    qos: str | None = typer.Option(None, "--qos", help="Slurm quality of service of the jobs."),
    slurm_opt: list[str] | None = typer.Option(
        None,
        "--slurm-opt",
        metavar="KEY=VALUE",
        help="Another sbatch option, e.g. constraint=a100 or time=2-00:00:00 (repeat it for several).",
    ),
    status: bool = typer.Option(
        False, "--status", help="Show each submitted Slurm unit: pending, running, done or failed, with its logs."
    ),
    fmt: str = complete.choice(
        RICH_OR_JSON, "rich", "--format", "-f", help="With --status: the output format (json: one object per unit)."
    ),
    wait: bool = typer.Option(
        False, "--wait", help="With --launcher slurm: wait for the jobs, then print their states and the table."
    ),
) -> None:
    """Train and evaluate every runnable row of a table, write results, print the table.

    Example: [bold]repro run table5-ablation --scale synthetic --rows ROW --seeds 0 recipe.epochs=2[/]

    On a Slurm cluster: [bold]repro run table5-ablation --launcher slurm --partition gpu[/], then
    [bold]repro run table5-ablation --status[/].
    """
    slurm_words = [w for w, v in (("--partition", partition), ("--account", account), ("--qos", qos)) if v]
    slurm_words += ["--slurm-opt"] * bool(slurm_opt) + ["--wait"] * wait
    if launcher != "slurm" and slurm_words:
        raise ReproError(f"{', '.join(slurm_words)}: only with --launcher slurm")
    if fmt != "rich" and not status:
        raise ReproError(f"--format {fmt}: only with --status (a run prints its table)")
    if launcher == "slurm" and jobs is not None:
        raise ReproError("--jobs is for --launcher local; on Slurm every (row, seed), or ensemble, is a job of its own")
    options = None
    if launcher == "slurm":
        from repro.launch.slurm import SlurmOptions

        options = SlurmOptions.parse(partition, account, qos, slurm_opt)
    _run(
        ident,
        rows,
        scale,
        seeds,
        dry_run,
        resume,
        workdir,
        rebaseline,
        jobs,
        force,
        overrides,
        limit,
        launcher=launcher,
        slurm=options,
        status=status,
        wait=wait,
        fmt=fmt,
        ensemble=ensemble,
    )


@command("train")
def train_command(
    ident: str = target_argument(),
    overrides: list[str] | None = overrides_argument(OVERRIDES_HELP),
    row: str = typer.Option(
        ..., "--row", "-r", autocompletion=complete.rows, help="The row to train (a name `repro show ID` lists)."
    ),
    scale: str = complete.choice(
        SCALES, "paper", "--scale", "-s", help="paper: the real data; the others generate it."
    ),
    seed: int | None = typer.Option(None, "--seed", help="One seed (default: the spec's seeds)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint."),
    workdir: str | None = typer.Option(None, "--workdir", help="Checkpoints and logs (default: $REPRO_DATA_DIR/runs)."),
    force: bool = typer.Option(
        False, "--force", help="Replace a stored result of this seed and start over its checkpoint."
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Paper scale: only the first N questions of each split (a partial run, a variant)."
    ),
) -> None:
    """Train and evaluate one row of a table.

    Example: [bold]repro train table5-ablation --row ROW --scale smoke --resume[/]
    """
    _run(
        ident,
        row,
        scale,
        None if seed is None else str(seed),
        False,
        resume,
        workdir,
        force=force,
        overrides=overrides,
        limit=limit,
    )


@command("cp")
def cp_command(
    ident: str = typer.Argument(
        ..., metavar="ID", autocompletion=complete.experiment_ids, help="Experiment id to copy, e.g. table5-ablation."
    ),
    dest: Path = typer.Argument(..., metavar="FILE", help="Where to write the copy (.yaml)."),
    force: bool = typer.Option(False, "--force", help="Replace FILE if it exists."),
) -> None:
    """Copy a spec to edit it; `repro run FILE` runs the copy, its results kept apart as a variant.

    Example: [bold]repro cp table5-ablation ./my.yaml[/]
    """
    from repro.specs import resolve
    from repro.utils import atomic_open

    spec = resolve(ident)
    if dest.suffix not in (".yaml", ".yml"):
        raise ReproError(f"{dest}: a spec file ends in .yaml")
    if dest.exists() and not force:
        raise ReproError(f"{dest} exists; pass --force to replace it")
    with atomic_open(dest) as handle:
        handle.write(spec.path.read_text(encoding="utf-8"))
    console.print(
        f"wrote {escape(str(dest))} (a copy of {spec.id}); edit it, then `repro run {escape(str(dest))} --scale ...`: "
        f"its results go to results/variants/, never over {spec.id}'s",
        highlight=False,
        soft_wrap=True,
    )


@command("model")
def model_command(
    ident: str = typer.Argument(
        ..., metavar="ID", autocompletion=complete.experiment_ids, help="Experiment id, e.g. table6-complexity."
    ),
    row: str = typer.Option(
        ..., "--row", "-r", autocompletion=complete.rows, help="The row (a name `repro show ID` lists)."
    ),
    fmt: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="Output format."),
) -> None:
    """What a row trains, without data: each model's task, parameters and FLOPs per sample at the paper's sizes.

    Example: [bold]repro model table6-complexity --row ROW --format json[/]
    """
    from rich.table import Table

    from repro import families
    from repro.specs import resolve

    spec = resolve(ident)
    the_row = spec.row(row)
    if the_row.cited:
        raise ReproError(f"row {the_row.name!r} of {spec.id} is cited from {the_row.cited}: no model of ours")
    if the_row.config is None:
        raise ReproError(f"row {the_row.name!r} of {spec.id} trains no model ({the_row.compute.get('task')} row)")
    family = families.require(families.by_arch(the_row.config.arch))
    if the_row.config.arch not in family.archs:
        raise ReproError(f"row {the_row.name!r} of {spec.id}: arch {the_row.config.arch!r} is not implemented yet")
    models = family.describe(the_row.config, spec)  # one per model of the row (ace-rpe: per downstream task)
    if fmt == "json":
        typer.echo(
            json.dumps(
                {
                    "spec": spec.id,
                    "row": the_row.name,
                    "family": family_paper(the_row),
                    "models": [m.to_json() for m in models],
                },
                indent=2,
            )
        )
        return
    console.print(
        f"[bold]{spec.id}[/] / {the_row.name}: {the_row.config.model_dump_json(exclude_defaults=True)}", highlight=False
    )
    for m in models:
        flops = "? " if m.flops_per_sample is None else f"{m.flops_per_sample / 1e9:.2f} G"
        table = Table(
            title=f"{m.name} ({m.task}): {m.trainable_params:,} trainable of {m.total_params:,} "
            f"parameters, {flops}FLOPs per sample"
        )
        table.add_column("module")
        table.add_column("trainable parameters", justify="right")
        for name, count in m.modules:
            table.add_row(name, f"{count:,}")
        console.print(table)


def family_paper(row) -> str:
    from repro import families

    return families.by_arch(row.config.arch).paper


# --- data -----------------------------------------------------------------------------------------


@command("download")
def download_command(
    names: list[str] | None = typer.Argument(
        None, metavar="[NAME]...", autocompletion=complete.datasets, help="Datasets to fetch (see --list)."
    ),
    list_: bool = typer.Option(False, "--list", "-l", help="Show every dataset, its size and what is verified."),
    verify: bool = typer.Option(False, "--verify", help="Rehash files already recorded as verified."),
    fmt: str = complete.choice(RICH_OR_JSON, "rich", "--format", "-f", help="For --list: the output format."),
) -> None:
    """Fetch datasets into REPRO_DATA_DIR: resumable, checksummed, extracted safely.

    Example: [bold]repro download --list[/]
    """
    from repro.data.catalog import get_dataset, load_catalog
    from repro.data.download import download_dataset
    from repro.data.listing import catalog_rows, catalog_table
    from repro.data.progress import byte_progress
    from repro.paths import data_dir

    catalog, root = load_catalog(), data_dir()
    if list_ or not names:
        rows = catalog_rows(catalog, root)
        if fmt == "json":
            typer.echo(json.dumps(rows, indent=2))
        else:
            console.print(catalog_table(rows, root))
        return
    entries = [get_dataset(n, catalog) for n in names]
    log = lambda message: err_console.print(f"[yellow]note:[/] {escape(message)}", highlight=False)  # noqa: E731
    with byte_progress(console=err_console) as progress:
        for entry in entries:
            digests = download_dataset(entry, root, verify=verify, progress=progress, log=log)
            progress.console.print(f"[green]{entry.name}[/]: {len(digests)} file(s) verified in {root / entry.name}")


@command("prepare")
def prepare_command(
    name: str = typer.Argument(
        ...,
        metavar="NAME",
        autocompletion=complete.datasets,
        help="A downloaded dataset or feature set with a preparation step, or depth.",
    ),
    source: Path | None = typer.Option(
        None, "--source", help="Folder with the downloaded files (default: REPRO_DATA_DIR/<dataset>)."
    ),
    glove: Path | None = typer.Option(None, "--glove", help="glove.840B.300d.txt (default: from glove-840b)."),
    store: Path | None = typer.Option(None, "--store", help="For depth: the feature store to add depth to."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the prepared files are current."),
) -> None:
    """Vocabularies, tokenised questions, soft-score targets, memory-mapped feature stores, depth.

    Example: [bold]repro prepare NAME --force[/]
    """
    from repro.data.progress import item_progress
    from repro.datasets.prepare import prepare

    with item_progress(console=err_console) as progress:
        outputs = prepare(name, source=source, glove=glove, store=store, force=force, progress=progress)
    for out in outputs:
        console.print(f"[green]prepared[/] {out}")


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
    from pathlib import Path

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


# --- metrics --------------------------------------------------------------------------------------


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
    from repro.metrics.report import check_per_item_path, evaluate_with_progress, render_table, to_json, write_per_item

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


def main() -> None:
    """Console-script entry point."""
    app(prog_name="repro")


if __name__ == "__main__":
    main()
