"""Text exports of a table view: Markdown, CSV, LaTeX and JSON."""
from __future__ import annotations

import csv
import io
import json

from repro.report.claims import ALPHA, CLAIM_KEYS, CONFIDENCE, claim_cells, claim_header, claim_to_json, claims_caption
from repro.report.view import (
    TableView,
    caption,
    column_digits,
    fmt_delta,
    fmt_reported,
    fmt_reproduced,
    footnotes,
)


def _header_cells(view: TableView) -> list[str]:
    header = ["Row"]
    for col in view.columns:
        header += [f"{col} reported", f"{col} reproduced", f"{col} Δ"]
    return header


def _body_cells(view: TableView) -> list[list[str]]:
    body = []
    digits = {col: column_digits(view, col) for col in view.columns}
    for row in view.rows:
        line = [row.label]
        for col in view.columns:
            cell = row.cells[col]
            line += [fmt_reported(cell, digits[col]), fmt_reproduced(cell, digits[col]), fmt_delta(cell)]
        body.append(line)
    return body


def render_markdown(view: TableView) -> str:
    header = _header_cells(view)
    lines = [f"**{caption(view)}**", "", "| " + " | ".join(header) + " |",
             "|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|"]
    for line in _body_cells(view):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in line) + " |")
    notes = footnotes(view)
    if notes:
        lines += [""] + [f"_{n}_" for n in notes]
    if view.claims:
        lines += ["", "| " + " | ".join(claim_header(view.scale, k) for k in CLAIM_KEYS) + " |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for c in view.claims:
            cells = claim_cells(c)
            lines.append("| " + " | ".join(cells[k].replace("|", "\\|") for k in CLAIM_KEYS) + " |")
        lines += ["", f"_{claims_caption()}_"]
    return "\n".join(lines) + "\n"


def render_csv(view: TableView) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["row", "cited", "column", "reported", "uncertain", "reproduced", "std", "delta", "scale"])
    for row in view.rows:
        for col in view.columns:
            cell = row.cells[col]
            writer.writerow([row.name, row.cited or "", col, _num(cell.reported), "yes" if cell.uncertain else "",
                             _num(cell.reproduced), _num(cell.std), _num(cell.delta), view.scale])
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else repr(round(float(value), 6))


_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text).replace("Δ", r"$\Delta$").replace("±", r"$\pm$")


def render_latex(view: TableView) -> str:
    header = _header_cells(view)
    lines = [r"\begin{table}[t]", r"\centering", r"\caption{" + _latex_escape(caption(view)) + "}",
             r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
             " & ".join(_latex_escape(h) for h in header) + r" \\", r"\midrule"]
    for line in _body_cells(view):
        lines.append(" & ".join(_latex_escape(c) for c in line) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def view_to_json(view: TableView) -> dict:
    spec = view.spec
    shown = set(view.columns)

    def keep(name: str) -> bool:  # every key unless --columns picked some
        return view.selected is None or name in shown

    return {
        "id": spec.id, "paper": spec.paper, "table": spec.table, "title": spec.title,
        "split": spec.split, "scale": view.scale,
        "columns": [{"name": c.name, "metric": c.metric, "key": c.key, "better": c.better, "unit": c.unit}
                    for c in spec.columns if keep(c.name)],
        "rows": [{
            "name": row.name, "cited": row.cited is not None, "reference": row.cited, "runnable": row.runnable,
            "reported": {c: cell.reported for c, cell in row.cells.items()
                         if cell.reported is not None and keep(c)},
            "uncertain": {c: cell.uncertain for c, cell in row.cells.items() if cell.uncertain and keep(c)},
            "reproduced": None if row.result is None else
                          {c: v for c, v in row.result.metrics.items() if keep(c)},
            "std": None if row.result is None or not row.result.std else
                   {c: v for c, v in row.result.std.items() if keep(c)},
            "delta": None if row.result is None else
                     {c: cell.delta for c, cell in row.cells.items() if cell.delta is not None and keep(c)},
            "scale": None if row.result is None else view.scale,
            "n": row.n,
            "reproduced_split": None if row.result is None else (row.result.split or None),
        } for row in view.rows],
        "baseline": None if view.baseline is None else view.baseline.name,
        "other_scales": view.other_scales,
        "claims": [claim_to_json(c) for c in view.claims],
        "alpha": ALPHA, "confidence": CONFIDENCE,
    }


def render_json(view: TableView) -> str:
    return json.dumps(view_to_json(view), indent=2) + "\n"
