"""`repro weights ls` and `repro weights convert`: the released checkpoints and their layouts, and an official
checkpoint into this project's format with the key report (the strict load of `repro.weights`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from repro.cli.common import RICH_OR_JSON, app, boundary, console, escape
from repro.errors import ReproError

weights_app = typer.Typer(
    name="weights", help="Released checkpoints: what there is, download and conversion.", no_args_is_help=True
)


def released_rows() -> list[dict]:
    """Each released checkpoint as `repro weights ls` shows it: what it fills, where it downloads from (the
    catalog's entry and file, url or by hand), its size and sha256 where known, and what is on disk."""
    from repro.data.catalog import load_catalog
    from repro.weights import RELEASED, released_path, released_state

    catalog = load_catalog()
    rows = []
    for r in RELEASED:
        entry, f = r.catalog(catalog)
        rows.append(
            {
                "name": r.name,
                "family": r.family,
                "layout": r.layout,
                "rows": r.rows,
                "cells": [{"spec": s, "row": row, "columns": part or None} for s, row, part in r.cells],
                "dataset": r.dataset,
                "file": f.name,
                "url": f.urls[0] if f.urls else None,
                "manual": (entry.manual or "").strip() or None if f.manual else None,
                "size": f.size,
                "size_hint": f.size_hint,
                "sha256": f.sha256,
                "sha256_from": f.sha256_from or None,
                "on_disk": released_state(r, catalog),
                "path": str(released_path(r, catalog)),
                "note": r.note or None,
            }
        )
    return rows


def _size(row: dict) -> str:
    size = row["size"] or row["size_hint"]
    return "?" if size is None else (f"{size / 1e9:.2f} GB" if row["size"] else f"~{size / 1e9:.2f} GB")


@weights_app.command("ls")
@boundary
def ls_command(fmt: str = typer.Option("rich", "--format", "-f", help="Output format: rich or json.")) -> None:
    """What is released for which rows: where each downloads from (`repro weights download NAME`), its size and
    sha256 where published (? where not), and whether it is on disk."""
    if fmt not in RICH_OR_JSON:
        raise ReproError(f"--format {fmt!r}: one of {', '.join(RICH_OR_JSON)}")
    rows = released_rows()
    if fmt == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    console.print(ReleasedView(rows))
    for r in rows:  # a line each, never cut: a command or a URL to copy
        where = r["url"] or "by hand: `repro weights download` says how"
        console.print(f"{r['name']}: {r['dataset']}/{r['file']} from {where}", soft_wrap=True, highlight=False)
    console.print("size ?: not published; sha256 -: none published (the download records the one it finds)")


class ReleasedView:
    """`repro weights ls` in the block layout of `repro list`: one line per checkpoint (name, size, sha256, on disk
    never cut; the cells it fills cut at narrow widths), then where each downloads from, one wrapped line each."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __rich_console__(self, console, options):
        from rich.text import Text

        from repro.report.grid import Col, listing_grid, plain_listing, rich_listing, wrap

        rows, width = self.rows, options.max_width
        label = Col("name", [r["name"] for r in rows], justify="left")
        cols = [
            Col("size", [_size(r) for r in rows]),
            Col("sha256", [(r["sha256"][:12] + "…") if r["sha256"] else "-" for r in rows], justify="left"),
            Col("on disk", [r["on_disk"] for r in rows], justify="left"),
        ]
        grid = listing_grid(label, cols, width, console.is_terminal)
        title = "released checkpoints"
        if console.is_terminal:
            yield from rich_listing(grid, width, title=title, title_justify="left")
        else:
            yield Text("\n".join([title, *plain_listing(grid, width)]), no_wrap=True, overflow="ignore")
        for r in rows:  # what each fills, wrapped (where it downloads from: `ls_command`, never cut)
            yield Text("\n".join(wrap(f"{r['name']} ({r['family']} {r['layout']}): {r['rows']}", width, "  ")))


@weights_app.command("download")
@boundary
def download_command(
    names: list[str] = typer.Argument(..., metavar="NAME...", help="Released checkpoints (`repro weights ls`)."),
    verify: bool = typer.Option(False, "--verify", help="Rehash files already recorded as verified."),
) -> None:
    """Fetch released checkpoints into REPRO_DATA_DIR as `repro download` fetches datasets (the catalog's url,
    resumable, checksummed, unpacked); one shared by share links only has its sha256 recorded once you put it in
    place (verified only where the catalog publishes one).

    Example: [bold]repro weights download flickr30k.pth mscoco.pth[/]
    """
    from repro.cli.common import err_console
    from repro.data.progress import byte_progress
    from repro.weights import download_released, released_named, released_path

    chosen = [released_named(name) for name in names]
    log = lambda message: err_console.print(f"[yellow]note:[/] {escape(message)}", highlight=False)  # noqa: E731
    with byte_progress(console=err_console) as progress:
        for released in chosen:
            digest = download_released(released, verify=verify, progress=progress, log=log)
            checked = "verified" if released.catalog()[1].sha256 else "recorded (none is published to check it)"
            progress.console.print(
                f"[green]{released.name}[/]: sha256 {digest[:12]}… {checked}, {escape(str(released_path(released)))}",
                highlight=False,
            )


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
@boundary
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

    from repro.utils import atomic_open, check_not_an_input, check_output_path
    from repro.weights import render_report

    if fmt not in RICH_OR_JSON:
        raise ReproError(f"--format {fmt!r}: one of {', '.join(RICH_OR_JSON)}")
    check_not_an_input(out, {"official checkpoint": checkpoint}, what="--output")
    check_output_path(out, "--output")
    state, report = convert_checkpoint(checkpoint, family, layout, mix)
    with atomic_open(out, "wb") as handle:
        torch.save({"model": state, "weights": {"source": str(checkpoint), "family": family, "layout": layout}}, handle)
    if fmt == "json":
        typer.echo(json.dumps({**report.as_json(), "output": str(out)}, indent=2))
    else:
        render_report(report, console, show_placed=True)
        console.print(f"wrote {escape(str(out))}")


app.add_typer(weights_app)
