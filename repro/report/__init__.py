"""Reported beside reproduced: build one table view of a spec and its results, render it, check it.

Renderers: rich (terminal), text (pipes and files), md, csv, latex, json. The view never mixes
scales: it shows the results of one scale, and says which.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repro.report.view import TableView

# name -> the module of repro.report that defines it, imported on first use (PEP 562): `repro table` loads the
# view and the layout, never pandas (export) unless a format needs it
_DEFINED_IN = {
    "Check": "check",
    "check_spec": "check",
    "ALPHA": "claims",
    "CONFIDENCE": "claims",
    "ClaimView": "claims",
    "judge_claim": "claims",
    "welch": "claims",
    "frame": "export",
    "long_frame": "export",
    "render_csv": "export",
    "render_html": "export",
    "render_json": "export",
    "render_latex": "export",
    "render_markdown": "export",
    "view_to_json": "export",
    "render_claims_rich": "layout",
    "render_plain": "layout",
    "render_rich": "layout",
    "Cell": "view",
    "RowView": "view",
    "TableView": "view",
    "build_view": "view",
    "fmt": "numbers",
    "fmt_reported": "view",
    "fmt_reproduced": "view",
}


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'repro.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"repro.report.{module}"), name)
    globals()[name] = value
    return value


FORMATS = ("rich", "text", "md", "csv", "latex", "html", "json")
SUFFIXES = {
    ".txt": "text",
    ".md": "md",
    ".csv": "csv",
    ".tex": "latex",
    ".html": "html",
    ".htm": "html",
    ".json": "json",
}  # what `repro table -o FILE` writes, by the file's suffix


def render_text(view: TableView, fmt_name: str, width: int = 80, verbose: bool = True) -> str:
    """Any format but rich as a string; `width` is the line length plain text is laid out for (not `verbose`: the
    short view of plain text; the other formats are always whole)."""
    if fmt_name == "text":
        from repro.report.layout import render_plain

        return render_plain(view, width, verbose)
    from repro.report import export

    renderers = {
        "md": export.render_markdown,
        "csv": export.render_csv,
        "latex": export.render_latex,
        "html": export.render_html,
        "json": export.render_json,
    }
    return renderers[fmt_name](view)


__all__ = [  # noqa: F822 - each defined on first use (`__getattr__`)
    "ALPHA",
    "CONFIDENCE",
    "FORMATS",
    "SUFFIXES",
    "Cell",
    "Check",
    "ClaimView",
    "RowView",
    "TableView",
    "build_view",
    "check_spec",
    "fmt",
    "fmt_reported",
    "fmt_reproduced",
    "frame",
    "judge_claim",
    "long_frame",
    "render_claims_rich",
    "render_csv",
    "render_html",
    "render_json",
    "render_latex",
    "render_markdown",
    "render_plain",
    "render_rich",
    "render_text",
    "view_to_json",
    "welch",
]
