"""`repro download` and `repro prepare`: the datasets in REPRO_DATA_DIR; `repro download --list` shows every
catalog dataset, its size, and what is present and verified."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from repro import completion as complete
from repro.cli.common import RICH_OR_JSON, command, console, err_console, escape

if TYPE_CHECKING:
    from rich.table import Table

    from repro.data.catalog import DatasetEntry


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


# --- repro download --list ---------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def catalog_rows(catalog: dict[str, DatasetEntry], root: Path) -> list[dict[str, Any]]:
    from repro.data.download import dataset_status

    rows = []
    for name in sorted(catalog):
        entry = catalog[name]
        states = [s.state for s in dataset_status(entry, root)]
        rows.append(
            {
                "name": name,
                "title": entry.title,
                "papers": list(entry.papers),
                "size": sum(f.expected_bytes or 0 for f in entry.files),
                "size_known": all(f.expected_bytes is not None for f in entry.files),
                "files": len(states),
                "verified": states.count("verified"),
                "present": states.count("present"),
                "partial": states.count("partial"),
                "manual": bool(entry.manual) or any(f.manual for f in entry.files),
            }
        )
    return rows


def catalog_table(rows: list[dict[str, Any]], root: Path) -> Table:
    from rich.table import Table

    table = Table(title=f"{len(rows)} datasets in {root}")
    for col, justify in (
        ("dataset", "left"),
        ("papers", "left"),
        ("size", "right"),
        ("on disk", "left"),
        ("title", "left"),
    ):
        table.add_column(col, justify=justify, overflow="fold", no_wrap=col in ("dataset", "size"))
    for r in rows:
        size = _size(r["size"]) if r["size_known"] else ("≥ " + _size(r["size"]) if r["size"] else "?")
        if r["verified"] == r["files"]:
            disk = f"[green]verified {r['verified']}/{r['files']}[/]"
        else:
            parts = [f"verified {r['verified']}/{r['files']}"]
            if r["present"]:
                parts.append(f"{r['present']} unverified")
            if r["partial"]:
                parts.append(f"{r['partial']} partial")
            disk = ", ".join(parts)
        title = r["title"] + (" [yellow](manual files)[/]" if r["manual"] else "")
        table.add_row(r["name"], ", ".join(r["papers"]), size, disk, title)
    return table
