"""The `repro` command line: thin, parses options, calls the layers below, renders with rich.

The app, its error boundary and what the commands share are in `common`; the root options and `main` are
here. Each command module registers its commands with `command` when it is imported below:
`tables` (list, show, table, plot), `check`, `models` (model, attention), `run` (run, train, cp; `slurm`
holds the Slurm side of run), `data` (download, prepare) and `evaluate` (submit, eval). The modules import
the layers below inside the commands, so `repro --help` loads none of them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import typer

from repro import __version__
from repro.cli import check, data, evaluate, models, run, tables
from repro.cli import weights as weights  # the `repro weights` group registers itself
from repro.cli.common import LAUNCHERS, RICH_OR_JSON, SCALES, TABLE_FORMATS, app, command, console, err_console
from repro.load import tokenizers_serial

# the order of `repro --help`
COMMANDS = (
    "list",
    "show",
    "table",
    "plot",
    "attention",
    "check",
    "run",
    "train",
    "cp",
    "model",
    "download",
    "prepare",
    "submit",
    "eval",
)
app.registered_commands.sort(key=lambda info: COMMANDS.index(info.name))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"repro {__version__}")
        raise typer.Exit()


# help as wide as the terminal, up to 120 columns (click stops at 80)
@app.callback(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
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
        help="Result records of every scale (default: the checkout's results/, else ./results; smoke and "
        "variant records in REPRO_SCRATCH, default ~/.cache/repro/results).",
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
    verbose: int = typer.Option(0, "-v", "--verbose", count=True, show_default=False, help="Log debug messages too."),
    quiet: int = typer.Option(
        0, "-q", "--quiet", count=True, show_default=False, help="Log only warnings and errors (they always show)."
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
    from repro import log

    if verbose and quiet:
        raise typer.BadParameter("-v and -q contradict each other; pass one of them", param_hint="-v/-q")
    level = log.setup(log.level_for(verbose, quiet))
    log.logger.debug(
        "repro %s; log level %s; data %s; results %s",
        __version__,
        logging.getLevelName(level),
        os.environ.get("REPRO_DATA_DIR", "(default)"),
        os.environ.get("REPRO_RESULTS", "(default)"),
    )


def main() -> None:
    """Console-script entry point."""
    tokenizers_serial()
    app(prog_name="repro")


__all__ = [
    "COMMANDS",
    "LAUNCHERS",
    "RICH_OR_JSON",
    "SCALES",
    "TABLE_FORMATS",
    "app",
    "check",
    "command",
    "console",
    "data",
    "err_console",
    "evaluate",
    "main",
    "models",
    "run",
    "tables",
]
