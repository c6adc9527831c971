"""Exports of a table view through pandas: Markdown, CSV (long form), LaTeX, HTML and JSON."""

from __future__ import annotations

import html
import json
import re

import pandas as pd

from repro.report.claims import ALPHA, CONFIDENCE, VERDICT_ORDER, ClaimView
from repro.report.layout import claim_cells, claim_header, claim_keys, claims_caption
from repro.report.view import TableView, caption, footnotes

# --- one frame for every export ------------------------------------------------------------------


def _groups(view: TableView) -> list[str] | None:
    """The top header level: each column's dataset and/or split, when some column names one."""
    cols = [view.spec.column(c) for c in view.columns]
    if not any(c.dataset or c.split for c in cols):
        return None
    return [" ".join(x for x in (c.dataset, c.split) if x) or view.spec.split for c in cols]


def frame(view: TableView) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The table as text cells (what the terminal shows, in the same order) and a mask of the best value
    of each reported and reproduced column (by the column's `better`; none for `better: none`).

    Columns are a MultiIndex: (group,) column, sub-column; the first column is the row name."""
    from repro.report.layout import table_grid

    grid = table_grid(view, cited="–")
    groups = _groups(view)
    keys, data, best = [], {}, {}
    for i, (name, group) in enumerate(zip(view.columns, grid.groups, strict=True)):
        label = group[0].group
        marks = _best(view, name)
        for j, col in enumerate(group):
            key = ((groups[i],) if groups else ()) + (label, col.header)
            keys.append(key)
            data[key] = col.cells
            best[key] = marks[j] if j < 2 else [False] * len(col.cells)
    row_key = (("",) if groups else ()) + ("", "Row")
    index = pd.MultiIndex.from_tuples([row_key] + keys)
    cells = pd.DataFrame({row_key: grid.label.cells, **data}, columns=index)
    mask = pd.DataFrame({row_key: [False] * len(grid.label.cells), **best}, columns=index)
    return cells, mask


def _best(view: TableView, column: str) -> tuple[list[bool], list[bool]]:
    better = view.spec.column(column).better

    def marks(values: list[float | None]) -> list[bool]:
        known = [v for v in values if v is not None]
        if better not in ("higher", "lower") or len(known) < 2:
            return [False] * len(values)
        target = max(known) if better == "higher" else min(known)
        return [v is not None and v == target for v in values]

    reported = [r.cells[column].reported for r in view.rows]
    reproduced = [None if r.cited else r.cells[column].reproduced for r in view.rows]
    return marks(reported), _separated(marks(reproduced), [r.cells[column] for r in view.rows], better)


def _separated(best: list[bool], cells: list, better: str) -> list[bool]:
    """A reproduced best stays bold only when it is ahead of every other row by more than the spread of both
    (its std plus theirs, over seeds); a value without a spread (one seed) is never bold."""
    if not any(best):
        return best
    top = next(c for c, b in zip(cells, best, strict=True) if b)
    if top.std is None or sum(best) > 1:
        return [False] * len(best)
    for cell, is_best in zip(cells, best, strict=True):
        if is_best or cell.reproduced is None:
            continue
        gap = top.reproduced - cell.reproduced if better == "higher" else cell.reproduced - top.reproduced
        if gap <= top.std + (cell.std if cell.std is not None else 0.0):
            return [False] * len(best)
    return best


def _flat(key: tuple) -> str:
    return " ".join(k for k in key if k)


def _md_table(frame_: pd.DataFrame, header: list[str], align: tuple[str, ...]) -> str:
    """A pipe table through pandas (tabulate): cells kept as text, `|` escaped."""
    cells = frame_.map(lambda c: str(c).replace("|", "\\|"))
    return cells.to_markdown(
        index=False,
        headers=[h.replace("|", "\\|") for h in header],
        tablefmt="pipe",
        colalign=align,
        disable_numparse=True,
    )


def render_markdown(view: TableView) -> str:
    cells, _ = frame(view)
    header = [_flat(k) for k in cells.columns]
    lines = [
        f"**{caption(view)}**",
        "",
        _md_table(cells, header, ("left",) + ("right",) * (len(header) - 1)),
    ]
    notes = [columns_note(view)] + footnotes(view)
    lines += [""] + [f"_{n}_" for n in notes]
    if view.claims:
        keys = claim_keys(view.claims)
        claims = pd.DataFrame([claim_cells(c) for c in view.claims], columns=list(keys))
        align = ("left", "left", "left") + ("right",) * (len(keys) - 3)
        lines += ["", _md_table(claims, [claim_header(view.scale, k) for k in keys], align)]
        lines += ["", f"_{claims_caption()}_"]
    return "\n".join(lines) + "\n"


# --- what each column is ------------------------------------------------------------------------


def columns_note(view: TableView) -> str:
    """One sentence naming the columns under each metric, as the table shows them (md, LaTeX, HTML)."""
    if view.scale == "paper":
        return (
            "Columns under each metric: reported = the paper's value; ours = our mean over the seeds ± their "
            "standard deviation; Δ = ours − reported."
        )
    base = view.baseline.name if view.baseline is not None else "the baseline row"
    return (
        f"Columns under each metric: reported = the paper's value; {view.scale} = our mean over the seeds at "
        f"scale {view.scale} ± their standard deviation; Δ paper = row − {base} in the paper; Δ {view.scale} = "
        f"row − {base} at scale {view.scale}. No difference between {view.scale} and paper values is shown: "
        "the scales differ."
    )


# What each key of a JSON row, and each column of the CSV, holds. The JSON carries it as "fields".
FIELDS = {
    "row": "the row's name in the paper (CSV)",
    "name": "the row's name in the paper (JSON)",
    "cited": "the reference of a row cited from another paper (shown, never run)",
    "column": "the metric column of the paper's table (CSV)",
    "reported": "the paper's value",
    "uncertain": "the paper's value was not confirmed (the PDF conversion garbled it)",
    "reproduced": "our mean over the seeds at this scale",
    "std": "the standard deviation over the seeds (empty with one seed)",
    "delta": "reproduced − reported, at paper scale only (empty/null at any other scale: the scales differ, "
    "compare effects instead)",
    "scale": "the scale the reproduced values come from",
    "n": "how many seeds the reproduced value pools",
    "split": "the split the reproduced values were measured on",
    "baseline": "the row the effects are measured from",
    "effect_paper": "row − baseline in the paper",
    "effect_reproduced": "row − baseline at this scale",
    "p_value": "a claim's two-sided difference test (Welch, floored at the exact permutation test's smallest p); "
    "p_one_sided is Welch in the claimed direction",
    "p_adjusted": "Holm-adjusted over the table's family (see family); the verdict compares it with the look's level",
    "design_hash": "the hash of the spec's design the claim was judged under; seeds of another design never judge",
    "seeds_used": "per row, the design's seeds the verdict used",
    "control": "passed | failed | not run: the positive control the claim depends on (null: none named)",
}


def long_frame(view: TableView) -> pd.DataFrame:
    """One line per (row, column): the tidy layout for pandas, R or a spreadsheet."""
    base = view.baseline
    paper = view.scale == "paper"  # delta (reproduced − reported) only where the terminal shows it
    records = []
    for row in view.rows:
        for col in view.columns:
            cell = row.cells[col]
            records.append(
                {
                    "row": row.name,
                    "cited": row.cited or "",
                    "column": col,
                    "reported": cell.reported,
                    "uncertain": "yes" if cell.uncertain else "",
                    "reproduced": cell.reproduced,
                    "std": cell.std,
                    "delta": cell.delta if paper else None,
                    "scale": view.scale,
                    "n": row.n,
                    "split": "" if row.result is None else row.result.split,
                    "baseline": "" if base is None else base.name,
                    "effect_paper": view.effect(row, col, reproduced=False),
                    "effect_reproduced": view.effect(row, col, reproduced=True),
                }
            )
    out = pd.DataFrame.from_records(records, columns=list(records[0]) if records else None)
    for name in ("reported", "reproduced", "std", "delta", "effect_paper", "effect_reproduced"):
        if name in out:
            out[name] = pd.to_numeric(out[name], errors="coerce").round(6)
    if "n" in out:
        out["n"] = out["n"].astype("Int64")
    return out


def render_csv(view: TableView) -> str:
    return long_frame(view).to_csv(index=False, lineterminator="\n", na_rep="")


_LATEX_SPECIAL = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}
_NUMBER = re.compile(r"(?<![\w.])-(?=\d)")


def _latex_escape(text: str) -> str:
    text = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))
    text = _NUMBER.sub("$-$", text).replace("−", "$-$")
    return (
        text.replace("Δ", r"$\Delta$")
        .replace("±", r"$\pm$")
        .replace("✓", r"$\checkmark$")
        .replace("✗", r"$\times$")
        .replace("–", "--")
        .replace("α", r"$\alpha$")
    )


def render_latex(view: TableView) -> str:
    """booktabs LaTeX: multi-level headers (dataset/split, column, reported/reproduced/Δ), the best value
    of each reported and reproduced column in bold, footnotes and the claims below."""
    cells, best = frame(view)
    shown = cells.map(_latex_escape)
    shown = shown.where(~best, "\\textbf{" + shown + "}")
    shown.columns = pd.MultiIndex.from_tuples([tuple(_latex_escape(k) for k in key) for key in cells.columns])
    styler = shown.style.hide(axis="index")
    body = styler.to_latex(hrules=True, multicol_align="c", column_format="l" + "r" * (len(cells.columns) - 1))
    lines = [r"\begin{table}[t]", r"\centering", r"\caption{" + _latex_escape(caption(view)) + "}", body.rstrip()]
    notes = [columns_note(view)] + footnotes(view)
    if any(best.to_numpy().ravel()):
        notes = ["Bold: the best value of each column (reported, and reproduced)."] + notes
    if notes:
        lines.append(r"\par\smallskip{\footnotesize " + r" \\ ".join(_latex_escape(n) for n in notes) + "}")
    lines.append(r"\end{table}")
    if view.claims:
        claims = pd.DataFrame([claim_cells(c) for c in view.claims], columns=list(claim_keys(view.claims)))
        claims.columns = [_latex_escape(claim_header(view.scale, k)) for k in claim_keys(view.claims)]
        table = (
            claims.map(_latex_escape)
            .style.hide(axis="index")
            .to_latex(hrules=True, column_format="p{5cm}ll" + "r" * (len(claims.columns) - 3))
        )
        lines += [
            "",
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{" + _latex_escape(f"The paper's claims at scale {view.scale}. {claims_caption()}") + "}",
            table.rstrip(),
            r"\end{table}",
        ]
    return "\n".join(lines) + "\n"


def render_html(view: TableView) -> str:
    """A standalone HTML page: the table (best values in bold), footnotes and claims."""
    cells, best = frame(view)
    styler = (
        cells.style.hide(axis="index")
        .format(escape="html")
        .apply(lambda _: best.map(lambda b: "font-weight: bold" if b else ""), axis=None)
        .set_caption(html.escape(caption(view)))
        .set_table_styles(
            [
                {"selector": "td", "props": "text-align: right; padding: 0 .6em"},
                {"selector": "th", "props": "text-align: center; padding: 0 .6em"},
            ]
        )
    )
    parts = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(view.spec.id)}</title></head><body>",
        styler.to_html(),
    ]
    parts += [f"<p><small>{html.escape(n)}</small></p>" for n in [columns_note(view)] + footnotes(view)]
    if view.claims:
        claims = pd.DataFrame([claim_cells(c) for c in view.claims], columns=list(claim_keys(view.claims)))
        claims.columns = [claim_header(view.scale, k) for k in claim_keys(view.claims)]
        parts += [
            f"<h3>{html.escape(f'The paper’s claims at scale {view.scale}')}</h3>",
            claims.to_html(index=False, escape=True),
            f"<p><small>{html.escape(claims_caption())}</small></p>",
        ]
    return "\n".join(parts + ["</body></html>"]) + "\n"


def view_to_json(view: TableView) -> dict:
    spec = view.spec
    shown = set(view.columns)

    def keep(name: str) -> bool:  # every key unless --columns picked some
        return view.selected is None or name in shown

    return {
        "id": spec.id,
        "paper": spec.paper,
        "table": spec.table,
        "title": spec.title,
        "split": spec.split,
        "scale": view.scale,
        "variant": view.variant,
        "columns": [
            {"name": c.name, "metric": c.metric, "key": c.key, "better": c.better, "unit": c.unit}
            for c in spec.columns
            if keep(c.name)
        ],
        "rows": [
            {
                "name": row.name,
                "cited": row.cited is not None,
                "reference": row.cited,
                "runnable": row.runnable,
                "reported": {
                    c: cell.reported for c, cell in row.cells.items() if cell.reported is not None and keep(c)
                },
                "uncertain": {c: cell.uncertain for c, cell in row.cells.items() if cell.uncertain and keep(c)},
                "reproduced": None if row.result is None else {c: v for c, v in row.result.metrics.items() if keep(c)},
                "std": None
                if row.result is None or not row.result.std
                else {c: v for c, v in row.result.std.items() if keep(c)},
                "delta": None
                if row.result is None or view.scale != "paper"
                else {c: cell.delta for c, cell in row.cells.items() if cell.delta is not None and keep(c)},
                "scale": None if row.result is None else view.scale,
                "n": row.n,
                "reproduced_split": None if row.result is None else (row.result.split or None),
            }
            for row in view.rows
        ],
        "baseline": None if view.baseline is None else view.baseline.name,
        "other_scales": view.other_scales,
        "claims": [claim_to_json(c) for c in view.claims],
        "alpha": ALPHA if view.judgement is None or view.judgement.alpha is None else view.judgement.alpha,
        "multiplicity": (
            "one Holm family over the table: each claim's two-sided difference test and, where the paper's effect "
            "exceeds δ, its equivalence test (p_adjusted, p_equivalence_adjusted; the verdict uses them)"
        ),
        "family": [] if view.judgement is None else view.judgement.family,
        "design_hash": None if view.judgement is None else view.judgement.design_hash,
        "look_levels": [] if view.judgement is None else list(view.judgement.levels),
        "verdict_order": list(VERDICT_ORDER),
        "confidence": CONFIDENCE,
        "fields": {k: v for k, v in FIELDS.items() if k not in ("row", "column")}
        | {"other_scales": "scales with results besides this one"},
        "columns_note": columns_note(view),
    }


def claim_to_json(c: ClaimView) -> dict:
    return {
        "text": c.text,
        "paper": c.paper,
        "verdict": c.verdict,
        "margin": c.margin,
        "spread": c.spread,
        "verdict_kind": c.kind,
        "p_value": c.p_value,
        "p_adjusted": c.p_adjusted,
        "p_reversed": c.p_reversed,
        "p_reversed_adjusted": c.p_reversed_adjusted,
        "delta": c.delta,
        "delta_source": c.delta_source,
        "p_equivalence": c.p_equivalence,
        "p_equivalence_adjusted": c.p_equivalence_adjusted,
        "detectable": c.detectable,
        "p_permutation": c.p_permutation,
        "p_permutation_reversed": c.p_permutation_reversed,
        "flags": list(c.flags),
        "holm_m": c.m if c.p_value is not None else None,
        "resolution": c.resolution,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "n": None if c.n is None else list(c.n),
        "ratio": c.ratio,
        "ratio_paper": c.ratio_paper,
        # how it was judged: "welch" (the rows' seeds) or "interleaved ratio" (a time claim's timing record,
        # repro.timing: ratio = geometric mean of its `pairs` ratios, with its interval)
        "test": c.method,
        "pairs": c.pairs,
        "ratio_ci_low": c.ratio_ci_low,
        "ratio_ci_high": c.ratio_ci_high,
        # the design it was judged under (repro.design)
        "design_hash": c.design_hash,
        "alpha": c.alpha,
        "level": c.level,
        "look": c.look,
        "looks": c.looks,
        "seeds_used": c.seeds_used,
        "p_one_sided": c.p_one_sided,
        "paper_effect": c.paper_effect,
        "control": c.control,
        "control_spec": c.control_spec,
    }


def render_json(view: TableView) -> str:
    return json.dumps(view_to_json(view), indent=2) + "\n"
