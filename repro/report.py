"""Reported beside reproduced: build one table view of a spec and its results, render it, check it.

Renderers: rich (terminal), md, csv, latex, json. The view never mixes scales: it shows the
results of one scale, and says which.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repro.results import Result, read_results
from repro.specs import Spec

FORMATS = ("rich", "md", "csv", "latex", "json")


@dataclass
class Cell:
    reported: float | None
    reproduced: float | None = None
    std: float | None = None
    uncertain: str | None = None  # what the PDF shows, when the reported value is not confirmed
    deviation: str | None = None  # why a faithful run differs from the paper here

    @property
    def delta(self) -> float | None:
        if self.reported is None or self.reproduced is None:
            return None
        return self.reproduced - self.reported


@dataclass
class RowView:
    name: str
    cited: str | None
    runnable: bool
    cells: dict[str, Cell]
    result: Result | None = None


@dataclass
class ClaimView:
    text: str
    paper: bool | None  # does the paper's own table support it
    verdict: str  # at the view's scale: holds, within seed spread, not reproduced, no results
    margin: float | None = None  # reproduced difference, in the column's better direction
    spread: float | None = None  # std of the two rows added


@dataclass
class TableView:
    spec: Spec
    scale: str
    rows: list[RowView] = field(default_factory=list)
    other_scales: list[str] = field(default_factory=list)
    claims: list[ClaimView] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return [c.name for c in self.spec.columns]


def build_view(spec: Spec, scale: str = "paper", results_root: Path | None = None) -> TableView:
    everything = read_results(spec, root=results_root)
    view = TableView(spec=spec, scale=scale,
                     other_scales=sorted({s for (_, s) in everything if s != scale}))
    for row in spec.rows:
        result = everything.get((row.name, scale))
        cells = {}
        for col in spec.columns:
            cells[col.name] = Cell(
                reported=row.reported.get(col.name),
                reproduced=None if result is None else result.metrics.get(col.name),
                std=None if result is None else result.std.get(col.name),
                uncertain=row.uncertain.get(col.name),
                deviation=row.deviation.get(col.name),
            )
        view.rows.append(RowView(name=row.name, cited=row.cited, runnable=row.runnable, cells=cells, result=result))
    view.claims = [judge_claim(spec, claim, view) for claim in spec.claims]
    return view


def judge_claim(spec: Spec, claim, view: "TableView") -> ClaimView:
    """Does `claim.row` beat `claim.over` on `claim.column`? In the paper, and at the view's scale.

    At a scale with several seeds the claim holds when the margin exceeds the two rows' standard
    deviations added (their mean ± std intervals do not overlap), is "within seed spread" when it is
    positive but smaller, and "not reproduced" when it is zero or negative.
    """
    sign = -1.0 if spec.column(claim.column).better == "lower" else 1.0
    cells = {r.name: r.cells[claim.column] for r in view.rows}
    a, b = cells[claim.row], cells[claim.over]
    paper = None if a.reported is None or b.reported is None else sign * (a.reported - b.reported) > 0
    if a.reproduced is None or b.reproduced is None:
        return ClaimView(claim.text, paper, "no results")
    margin = sign * (a.reproduced - b.reproduced)
    spread = (a.std or 0.0) + (b.std or 0.0)
    verdict = "holds" if margin > spread else "within seed spread" if margin > 0 else "not reproduced"
    return ClaimView(claim.text, paper, verdict, margin, spread)


# --- formatting helpers ---------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    return f"{value:.{digits}f}"


def fmt_reported(cell: Cell, digits: int = 2) -> str:
    text = fmt(cell.reported, digits)
    return text + "?" if cell.uncertain else text


def fmt_reproduced(cell: Cell, digits: int = 2) -> str:
    if cell.reproduced is None:
        return "–"
    text = fmt(cell.reproduced, max(digits, 2))
    if cell.std is not None:
        text += f" ± {fmt(cell.std)}"
    return text + "!" if cell.deviation else text


def fmt_delta(cell: Cell) -> str:
    delta = cell.delta
    return "–" if delta is None else f"{delta:+.2f}"


def _decimals(value: float) -> int:
    text = repr(float(value))
    return 2 if "e" in text else len(text.split(".")[1].rstrip("0"))


def column_digits(view: "TableView", column: str) -> int:
    """Decimals to print a reported column with: the most any of its values has (52.30 beside 53.26)."""
    values = [r.cells[column].reported for r in view.rows if r.cells[column].reported is not None]
    return min(max((_decimals(v) for v in values), default=2), 4)


def _row_label(row: RowView) -> str:
    return f"{row.name} {row.cited}" if row.cited else row.name


def _header_cells(view: TableView) -> list[str]:
    header = ["Row"]
    for col in view.columns:
        header += [f"{col} reported", f"{col} reproduced", f"{col} Δ"]
    return header


def _body_cells(view: TableView) -> list[list[str]]:
    body = []
    digits = {col: column_digits(view, col) for col in view.columns}
    for row in view.rows:
        line = [_row_label(row)]
        for col in view.columns:
            cell = row.cells[col]
            line += [fmt_reported(cell, digits[col]), fmt_reproduced(cell, digits[col]), fmt_delta(cell)]
        body.append(line)
    return body


def _caption(view: TableView) -> str:
    spec = view.spec
    return f"{spec.paper} {spec.table} ({spec.id}): {spec.title} — reported on {spec.split}; reproduced at scale {view.scale}"


def _footnotes(view: TableView) -> list[str]:
    notes = []
    if any(c.uncertain for r in view.rows for c in r.cells.values()):
        notes.append("? = value not confirmed: the PDF conversion garbled it (see `repro show`).")
    if any(c.deviation and c.reproduced is not None for r in view.rows for c in r.cells.values()):
        notes.append("! = an explained deviation from the paper (see `repro show`); checked against its own reference.")
    if any(r.cited for r in view.rows):
        notes.append("Rows with a reference such as [16] are cited from other papers: shown, never run.")
    if view.scale != "paper":
        notes.append(f"Scale {view.scale!r} is not the paper's setting: compare trends, not values.")
    if view.other_scales:
        notes.append(f"Results also exist at scale(s): {', '.join(view.other_scales)} (use --scale).")
    return notes


# --- renderers ------------------------------------------------------------------------------------


def render_claims_rich(view: TableView) -> Table | None:
    if not view.claims:
        return None
    table = Table(title=f"the paper's claims, at scale {view.scale}", title_justify="left")
    for name, justify in (("claim", "left"), ("in the paper", "left"), (view.scale, "left"), ("margin", "right")):
        table.add_column(name, justify=justify)
    styles = {"holds": "green", "within seed spread": "yellow", "not reproduced": "bold red", "no results": "dim"}
    for c in view.claims:
        margin = "–" if c.margin is None else f"{c.margin:+.2f}" + (f" (spread {c.spread:.2f})" if c.spread else "")
        table.add_row(c.text, {True: "yes", False: "no", None: "–"}[c.paper],
                      Text(c.verdict, style=styles[c.verdict]), margin)
    return table


def render_rich(view: TableView) -> Table:
    table = Table(title=_caption(view), caption="\n".join(_footnotes(view)) or None, caption_justify="left")
    table.add_column("Row", style="bold")
    for col in view.columns:
        unit = view.spec.column(col).unit
        label = escape(f"{col} [{unit}]" if unit and unit != "%" else col)
        table.add_column(f"{label}\nreported", justify="right")
        scale_label = "ours" if view.scale == "paper" else view.scale
        table.add_column(f"{label}\n{scale_label}", justify="right")
        table.add_column("Δ", justify="right")
    digits = {col: column_digits(view, col) for col in view.columns}
    for row in view.rows:
        label = Text(row.name)
        if row.cited:
            label.append(f" {row.cited}", style="dim")
        cells: list[Text | str] = [label]
        for col in view.columns:
            cell = row.cells[col]
            better = view.spec.column(col).better
            reported = Text(fmt_reported(cell, digits[col]), style="yellow" if cell.uncertain else "")
            reproduced = Text(fmt_reproduced(cell, digits[col])) if not row.cited else Text("cited", style="dim")
            cells += [reported, reproduced, _delta_text(cell, better)]
        table.add_row(*cells, style="dim" if row.cited else None)
    return table


def _delta_text(cell: Cell, better: str) -> Text:
    delta = cell.delta
    if delta is None:
        return Text("–", style="dim")
    good = delta >= 0 if better == "higher" else delta <= 0 if better == "lower" else True
    return Text(f"{delta:+.2f}", style="green" if good else "red")


def render_markdown(view: TableView) -> str:
    header = _header_cells(view)
    lines = [f"**{_caption(view)}**", "", "| " + " | ".join(header) + " |",
             "|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|"]
    for line in _body_cells(view):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in line) + " |")
    notes = _footnotes(view)
    if notes:
        lines += [""] + [f"_{n}_" for n in notes]
    if view.claims:
        lines += ["", f"| claim | in the paper | at scale {view.scale} | margin |", "| --- | --- | --- | ---: |"]
        for c in view.claims:
            margin = "–" if c.margin is None else f"{c.margin:+.2f}" + (f" (spread {c.spread:.2f})" if c.spread else "")
            lines.append(f"| {c.text} | {({True: 'yes', False: 'no', None: '–'})[c.paper]} | {c.verdict} | {margin} |")
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
    lines = [r"\begin{table}[t]", r"\centering", r"\caption{" + _latex_escape(_caption(view)) + "}",
             r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
             " & ".join(_latex_escape(h) for h in header) + r" \\", r"\midrule"]
    for line in _body_cells(view):
        lines.append(" & ".join(_latex_escape(c) for c in line) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def view_to_json(view: TableView) -> dict:
    spec = view.spec
    return {
        "id": spec.id, "paper": spec.paper, "table": spec.table, "title": spec.title,
        "split": spec.split, "scale": view.scale,
        "columns": [{"name": c.name, "metric": c.metric, "key": c.key, "better": c.better, "unit": c.unit}
                    for c in spec.columns],
        "rows": [{
            "name": row.name, "cited": row.cited is not None, "reference": row.cited, "runnable": row.runnable,
            "reported": {c: cell.reported for c, cell in row.cells.items() if cell.reported is not None},
            "uncertain": {c: cell.uncertain for c, cell in row.cells.items() if cell.uncertain},
            "reproduced": None if row.result is None else dict(row.result.metrics),
            "std": None if row.result is None or not row.result.std else dict(row.result.std),
            "delta": None if row.result is None else
                     {c: cell.delta for c, cell in row.cells.items() if cell.delta is not None},
            "scale": None if row.result is None else view.scale,
        } for row in view.rows],
        "other_scales": view.other_scales,
        "claims": [{"text": c.text, "paper": c.paper, "verdict": c.verdict, "margin": c.margin, "spread": c.spread}
                   for c in view.claims],
    }


def render_json(view: TableView) -> str:
    return json.dumps(view_to_json(view), indent=2) + "\n"


def render_text(view: TableView, fmt_name: str) -> str:
    return {"md": render_markdown, "csv": render_csv, "latex": render_latex, "json": render_json}[fmt_name](view)


# --- regression check -----------------------------------------------------------------------------


@dataclass
class Check:
    spec: str
    row: str
    scale: str
    column: str
    expected: float
    actual: float
    tolerance: float
    against: str  # "reported" or "reference"

    @property
    def ok(self) -> bool:
        return abs(self.actual - self.expected) <= self.tolerance + 1e-9


def check_spec(spec: Spec, results_root: Path | None = None) -> list[Check]:
    """Compare every stored result of a spec with what it claims: the paper's number at paper scale,
    the record's own reference at other scales."""
    checks = []
    for (row_name, scale), result in sorted(read_results(spec, root=results_root).items()):
        row = spec.row(row_name)
        for col in spec.columns:
            against = "reported" if scale == "paper" and col.name not in row.deviation else "reference"
            expected = (row.reported if against == "reported" else (result.reference or {})).get(col.name)
            actual = result.metrics.get(col.name)
            if expected is None or actual is None:
                continue
            checks.append(Check(spec.id, row_name, scale, col.name, float(expected), float(actual),
                                spec.tolerance_for(col.name, scale), against))
    return checks
