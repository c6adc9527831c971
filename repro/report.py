"""Reported beside reproduced: build one table view of a spec and its results, render it, check it.

Renderers: rich (terminal), md, csv, latex, json. The view never mixes scales: it shows the
results of one scale, and says which.
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repro.results import Result, read_results
from repro.specs import Spec

FORMATS = ("rich", "md", "csv", "latex", "json")
ALPHA = 0.05  # level of the one-sided test a claim is judged with
CONFIDENCE = 0.95  # level of the interval printed around a claim's margin


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
    # at the view's scale: holds, reversed, not decided (p = …), not judged (1 seed), no results
    verdict: str
    margin: float | None = None  # reproduced mean difference, in the column's better direction
    spread: float | None = None  # std of the two rows added (kept for readers of the JSON output)
    p_value: float | None = None  # one-sided Welch test, in the claimed direction
    ci_low: float | None = None  # CONFIDENCE interval of the margin (Welch–Satterthwaite df)
    ci_high: float | None = None
    n: tuple[int, int] | None = None  # seeds of `row` and of `over`


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

    At a scale with at least two seeds per row the per-seed values of the two rows are compared with
    Welch's t-test, one-sided in the claimed direction, at level ALPHA: the claim "holds" when
    p < ALPHA, is "reversed" when the one-sided test the other way is significant, and is
    "not decided" otherwise. With one seed on either row nothing can be said: "not judged (1 seed)".
    """
    sign = -1.0 if spec.column(claim.column).better == "lower" else 1.0
    cells = {r.name: r.cells[claim.column] for r in view.rows}
    a, b = cells[claim.row], cells[claim.over]
    paper = None if a.reported is None or b.reported is None else sign * (a.reported - b.reported) > 0
    if a.reproduced is None or b.reproduced is None:
        return ClaimView(claim.text, paper, "no results")
    rows = {r.name: r for r in view.rows}
    sample_a = seed_sample(rows[claim.row].result, claim.column)
    sample_b = seed_sample(rows[claim.over].result, claim.column)
    margin = sign * (a.reproduced - b.reproduced)
    spread = (a.std or 0.0) + (b.std or 0.0)
    n = (sample_a.n, sample_b.n)
    if min(n) < 2:
        return ClaimView(claim.text, paper, "not judged (1 seed)", margin, spread, n=n)
    test = welch(sample_a, sample_b, sign)
    if test.p_value < ALPHA and test.margin > 0:
        verdict = "holds"
    elif 1.0 - test.p_value < ALPHA and test.margin < 0:
        verdict = "reversed"
    else:
        verdict = f"not decided (p = {fmt_p(test.p_value)})"
    return ClaimView(claim.text, paper, verdict, test.margin, spread, test.p_value, test.ci_low, test.ci_high, n)


@dataclass(frozen=True)
class Sample:
    """One row's values of one column over its seeds: mean, sample std (ddof 1) and count."""

    mean: float
    std: float
    n: int


def seed_sample(result: Result | None, column: str) -> Sample:
    """The per-seed values a record carries (`extra.per_seed`), or its mean, std and seed count."""
    if result is None or column not in result.metrics:
        return Sample(math.nan, math.nan, 0)
    per_seed = result.extra.get("per_seed") if isinstance(result.extra, dict) else None
    if isinstance(per_seed, list):
        values = [float(run[column]) for run in per_seed
                  if isinstance(run, dict) and isinstance(run.get(column), (int, float))
                  and not isinstance(run.get(column), bool)]
        if values:
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            return Sample(statistics.fmean(values), std, len(values))
    n = max(len(result.seeds), 1)
    std = result.std.get(column) if result.std else None
    if n > 1 and std is None:  # a record with several seeds but no spread: treat as one value
        n = 1
    return Sample(float(result.metrics[column]), float(std or 0.0), n)


@dataclass(frozen=True)
class Welch:
    margin: float  # mean difference in the claimed direction
    se: float
    df: float
    p_value: float  # one-sided: P(T >= t) under "no difference"
    ci_low: float
    ci_high: float


def welch(a: Sample, b: Sample, sign: float = 1.0, confidence: float | None = None) -> Welch:
    """Welch's unequal-variance t-test of `sign * (a - b) > 0` from two rows' summary statistics.

    df is the Welch–Satterthwaite approximation; the interval is two-sided at `confidence`.
    """
    from scipy import stats

    confidence = CONFIDENCE if confidence is None else confidence
    margin = sign * (a.mean - b.mean)
    va, vb = a.std ** 2 / a.n, b.std ** 2 / b.n
    se = math.sqrt(va + vb)
    if se == 0.0:  # every seed gave the same value on both rows: the difference is exact
        p = 0.0 if margin > 0 else 1.0 if margin < 0 else 0.5
        return Welch(margin, 0.0, math.inf, p, margin, margin)
    df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1))
    p = float(stats.t.sf(margin / se, df))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return Welch(margin, se, df, p, margin - half, margin + half)


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "–"
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


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
    return (f"{spec.paper} {spec.table} ({spec.id}): {spec.title} — reported on {spec.split}; "
            f"reproduced at scale {view.scale}")


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


def claims_caption(view: TableView) -> str:
    return (f"One-sided Welch t-test per claim over the seeds of the two rows, at α = {ALPHA:g}; "
            f"margin = mean difference in the claimed direction, with its {CONFIDENCE:.0%} confidence "
            "interval (Welch–Satterthwaite df); p = one-sided, in the claimed direction (near 1 when reversed); "
            "n = seeds of the row and of the row it is compared with.")


def claim_cells(c: ClaimView) -> dict[str, str]:
    """The claims table's cells as text, shared by every renderer."""
    return {
        "claim": c.text,
        "in the paper": {True: "yes", False: "no", None: "–"}[c.paper],
        "verdict": c.verdict,
        "margin": "–" if c.margin is None else f"{c.margin:+.2f}",
        "CI": "–" if c.ci_low is None else f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}]",
        "p": fmt_p(c.p_value),
        "n": "–" if c.n is None else f"{c.n[0]}, {c.n[1]}",
    }


CLAIM_HEADERS = ("claim", "in the paper", "verdict", "margin", "CI", "p", "n")


def _claim_header(view: TableView, key: str) -> str:
    return {"verdict": f"at scale {view.scale}", "CI": f"{CONFIDENCE:.0%} CI"}.get(key, key)


def _verdict_style(verdict: str) -> str:
    return {"holds": "green", "reversed": "bold red", "no results": "dim"}.get(
        verdict, "yellow" if verdict.startswith("not decided") else "dim")


def render_claims_rich(view: TableView) -> Table | None:
    if not view.claims:
        return None
    table = Table(title=f"the paper's claims, at scale {view.scale}", title_justify="left",
                  caption=claims_caption(view), caption_justify="left")
    for key in CLAIM_HEADERS:
        table.add_column(_claim_header(view, key), justify="left" if key in ("claim", "in the paper", "verdict")
                         else "right", no_wrap=key not in ("claim",), overflow="fold")
    for c in view.claims:
        cells = claim_cells(c)
        table.add_row(*[Text(cells[k], style=_verdict_style(c.verdict)) if k == "verdict" else cells[k]
                        for k in CLAIM_HEADERS])
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
        lines += ["", "| " + " | ".join(_claim_header(view, k) for k in CLAIM_HEADERS) + " |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for c in view.claims:
            cells = claim_cells(c)
            lines.append("| " + " | ".join(cells[k].replace("|", "\\|") for k in CLAIM_HEADERS) + " |")
        lines += ["", f"_{claims_caption(view)}_"]
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
        "claims": [{"text": c.text, "paper": c.paper, "verdict": c.verdict, "margin": c.margin, "spread": c.spread,
                    "p_value": c.p_value, "ci_low": c.ci_low, "ci_high": c.ci_high,
                    "n": None if c.n is None else list(c.n)}
                   for c in view.claims],
        "alpha": ALPHA, "confidence": CONFIDENCE,
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
