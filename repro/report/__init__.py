"""Reported beside reproduced: build one table view of a spec and its results, render it, check it.

Renderers: rich (terminal), text (pipes and files), md, csv, latex, json. The view never mixes
scales: it shows the results of one scale, and says which.
"""

from __future__ import annotations

from repro.report.check import Check, check_spec
from repro.report.claims import ALPHA, CONFIDENCE, ClaimView, judge_claim, welch
from repro.report.export import (
    frame,
    long_frame,
    render_csv,
    render_html,
    render_json,
    render_latex,
    render_markdown,
    view_to_json,
)
from repro.report.layout import render_claims_rich, render_plain, render_rich
from repro.report.view import Cell, RowView, TableView, build_view, fmt, fmt_reported, fmt_reproduced

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


def render_text(view: TableView, fmt_name: str, width: int = 80) -> str:
    """Any format but rich as a string; `width` is the line length plain text is laid out for."""
    if fmt_name == "text":
        return render_plain(view, width)
    renderers = {
        "md": render_markdown,
        "csv": render_csv,
        "latex": render_latex,
        "html": render_html,
        "json": render_json,
    }
    return renderers[fmt_name](view)


__all__ = [
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
