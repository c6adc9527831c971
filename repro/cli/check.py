"""`repro check`: every stored result within its spec's tolerance, and the fingerprints trained again."""

from __future__ import annotations

import json
import warnings

import typer

from repro import completion as complete
from repro.cli.common import RICH_OR_JSON, SCALES, command, console, err_console, escape
from repro.errors import ReproError


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
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every value checked, not only the failed."),
) -> None:
    """Regression check for CI: every stored result within its spec's tolerance.

    Paper-scale results are compared with the paper's number, other scales with the reference the
    record carries. With --rerun, the fingerprints (the loss of the first training steps, which
    holds on any CPU) are trained again and compared. Prints the failed values (all with -v) and a
    summary line. Exits 1 on any regression or unreadable result, 0 otherwise.

    Example: [bold]repro check mcan-pa-table5-ablation --rerun[/]
    """
    from repro.paths import results_read_dir
    from repro.report import check_spec
    from repro.report.check import check_records
    from repro.results import CorruptResult
    from repro.specs import broken_specs, load_all, resolve

    if not results_read_dir().is_dir():
        raise ReproError(
            f"{results_read_dir()}: no such results folder (REPRO_RESULTS or the checkout's results/); "
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
    checks, unreadable, records = [], [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for spec in specs:
            checks += check_spec(spec)
            records.append(check_records(spec))
    problems = [p for r in records for p in r.problems]
    notes = [n for r in records for n in r.notes]
    for w in caught:
        if issubclass(w.category, CorruptResult):
            unreadable.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    failed = [c for c in checks if not c.ok]
    if fmt_name == "json":
        from dataclasses import asdict

        values = [{**asdict(c), "ok": c.ok} for c in checks]
        bad_records = [asdict(p) for p in problems]
        typer.echo(
            json.dumps(
                {
                    "checks": values,
                    "regressions": len(failed),
                    "unreadable": unreadable,
                    "records": {"problems": bad_records, "notes": notes},
                },
                indent=2,
            )
        )
        raise typer.Exit(1 if failed or unreadable or problems else 0)
    import shutil

    from rich.text import Text

    from repro.report.layout import check_lines

    width = console.width if console.is_terminal else shutil.get_terminal_size((80, 24)).columns
    for line in check_lines(checks, width, verbose):  # the failed values only, unless -v; never cut
        text = Text(line)
        text.highlight_words(["REGRESSION"], "bold red")
        console.print(text, soft_wrap=True, highlight=False)
    for message in unreadable:
        err_console.print(f"[bold red]unreadable:[/] {escape(message)}", highlight=False)
    for note in notes if verbose else []:  # what holds but cannot be verified: listed with -v
        console.print(f"[dim]note:[/] {escape(note)}", highlight=False)
    for p in problems:
        err_console.print(
            f"[bold red]record:[/] {escape(p.path)}: {escape(p.message)}", highlight=False, soft_wrap=True
        )
    rows, seeds = sum(r.rows for r in records), sum(r.seeds for r in records)
    if failed or unreadable or problems:
        console.print(
            f"[bold red]{len(failed)} regression(s), {len(unreadable)} unreadable result(s), "
            f"{len(problems)} record problem(s)[/]; {len(checks) - len(failed)} of {len(checks)} values "
            f"in {len(specs)} experiment(s) within tolerance",
            highlight=False,
        )
        raise typer.Exit(1)
    console.print(
        f"[green]all {len(checks)} stored values within tolerance[/] in {len(specs)} experiment(s)"
        + ("" if verbose else " (-v lists them)")
        if checks
        else "no stored results to check",
        highlight=False,
    )
    if rows:
        console.print(
            f"[green]{rows} row records agree with their per-seed values (mean, std ddof 1, finite) and "
            f"{seeds} seed records[/]"
            + (f"; {len(notes)} note(s) {'above' if verbose else '(-v lists them)'}" if notes else ""),
            highlight=False,
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
                f"loss difference {c.worst:.2e} at step {c.worst_step}, tolerance {c.tolerance:.0e}; "
                + {
                    "ok": "scores of the probe split: the same (within the probe tolerance)",
                    "differs": "scores of the probe split: DIFFER (scoring or decoding changed)",
                    "not stored": "probe split: no scores stored (an older fingerprint), scoring not checked",
                }[c.probe],
                highlight=False,
                soft_wrap=True,
            )
            failed += not c.ok
    if failed:
        console.print(f"[bold red]{failed} fingerprint regression(s)[/]")
        raise typer.Exit(1)
