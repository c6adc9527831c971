"""Reported beside reproduced: build one table view of a spec and its results, render it, check it.

Renderers: rich (terminal), text (pipes and files), md, csv, latex, json. The view never mixes
scales: it shows the results of one scale, and says which.
"""
from __future__ import annotations

from repro.report.check import Check, check_spec
from repro.report.claims import ALPHA, CONFIDENCE, ClaimView, judge_claim, welch
from repro.report.export import render_csv, render_json, render_latex, render_markdown, view_to_json
from repro.report.layout import render_claims_rich, render_plain, render_rich
from repro.report.view import Cell, RowView, TableView, build_view, fmt, fmt_reported, fmt_reproduced

FORMATS = ("rich", "text", "md", "csv", "latex", "json")


def render_text(view: TableView, fmt_name: str, width: int = 80) -> str:
    """Any format but rich as a string; `width` is the line length plain text is laid out for."""
    if fmt_name == "text":
        return render_plain(view, width)
    return {"md": render_markdown, "csv": render_csv, "latex": render_latex, "json": render_json}[fmt_name](view)


__all__ = [
    "ALPHA", "CONFIDENCE", "FORMATS", "Cell", "Check", "ClaimView", "RowView", "TableView", "build_view",
    "check_spec", "fmt", "fmt_reported", "fmt_reproduced", "judge_claim", "render_claims_rich", "render_csv",
    "render_json", "render_latex", "render_markdown", "render_plain", "render_rich", "render_text",
    "view_to_json", "welch",
]
