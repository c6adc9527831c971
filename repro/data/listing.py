"""`repro download --list`: every catalog dataset, its size, and what is present and verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from repro.data.catalog import DatasetEntry
from repro.data.download import dataset_status


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def catalog_rows(catalog: dict[str, DatasetEntry], root: Path) -> list[dict[str, Any]]:
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
