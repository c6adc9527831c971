"""One table view of a spec and its results at one scale: cells, the baseline row, captions, notes.

The view never mixes scales: it shows the results of one scale, and says which.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from repro.errors import ReproError
from repro.report.check import config_note, other_settings
from repro.report.claims import ClaimView, Judgement, judge_table
from repro.report.numbers import column_decimals, fmt
from repro.results import Result, read_results
from repro.specs import Spec


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
    here: bool = True  # its family runs it at the view's scale (`Hooks.not_at_scale`)

    @property
    def label(self) -> str:
        return f"{self.name} {self.cited}" if self.cited else self.name

    @property
    def n(self) -> int | None:
        """Seeds behind the reproduced numbers."""
        return None if self.result is None else max(len(self.result.seeds), 1)


@dataclass
class TableView:
    spec: Spec
    scale: str
    rows: list[RowView] = field(default_factory=list)
    other_scales: list[str] = field(default_factory=list)
    claims: list[ClaimView] = field(default_factory=list)
    judgement: Judgement | None = None  # the claims' design, Holm family and levels (repro.report.claims)
    selected: list[str] | None = None  # the columns shown (default: all of the spec's)
    variant: dict | None = None  # the results are a variant (overrides, --limit, a spec file): repro.variants
    config_notes: list[str] = field(default_factory=list)  # rows whose seeds ran under several configs
    settings_notes: list[str] = field(default_factory=list)  # the rows made under settings the spec no longer gives
    # rows evaluated from released or given weights (`repro run --weights`, results/weights/): their own source,
    # never in the cells of the numbers trained here
    weights: list[Result] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return list(self.selected) if self.selected is not None else [c.name for c in self.spec.columns]

    @property
    def baseline(self) -> RowView | None:
        """What effects are measured against at a scale other than the paper's: the first runnable row (of those its
        family runs at this scale)."""
        return next((r for r in self.rows if r.runnable and r.here), None)

    def effect(self, row: RowView, column: str, reproduced: bool) -> float | None:
        """`row - baseline` on `column`, in the paper (reproduced=False) or at this scale."""
        base = self.baseline
        if base is None or base is row:
            return None
        a, b = row.cells[column], base.cells[column]
        x, y = (a.reproduced, b.reproduced) if reproduced else (a.reported, b.reported)
        return None if x is None or y is None else x - y


def select_columns(spec: Spec, names: list[str] | None) -> list[str] | None:
    """Check `--columns` against the spec's columns, in the order given."""
    if not names:
        return None
    known = [c.name for c in spec.columns]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(known)}"
            raise ReproError(f"{spec.id} has no column {name!r}; {hint}")
    return list(dict.fromkeys(names))


def _runs_at(row, scale: str) -> bool:
    """Whether the row's family runs it at `scale` (a row of the paper scale only is not the generated scales')."""
    from repro import families

    return not (row.runnable and families.implemented(row) and families.not_at_scale(row, scale))


def build_view(
    spec: Spec, scale: str = "paper", results_root: Path | None = None, columns: list[str] | None = None
) -> TableView:
    everything = read_results(spec, root=results_root)
    view = TableView(
        spec=spec,
        scale=scale,
        selected=select_columns(spec, columns),
        other_scales=sorted({s for (_, s) in everything if s != scale}),
    )
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
        here = _runs_at(row, scale)
        view.rows.append(RowView(row.name, row.cited, row.runnable, cells, result, here))
    view.judgement = judge_table(spec, {r.name: r.result for r in view.rows}, scale, results_root)
    view.claims = view.judgement.claims
    view.config_notes = [
        n for r in view.rows if r.result is not None for n in [config_note(spec, r.result, results_root)] if n
    ]
    now: dict[str, dict[str, str]] = {}
    view.settings_notes = [r.name for r in view.rows if r.result is not None and other_settings(spec, r.result, now)]
    view.variant = next((r.result.variant for r in view.rows if r.result is not None and r.result.variant), None)
    if results_root is None:
        view.weights = weights_results(spec, scale)
    return view


def weights_results(spec: Spec, scale: str) -> list[Result]:
    """The spec's records at `scale` evaluated from released or given weights (results/weights/<source>/)."""
    from repro.paths import WEIGHTS_FOLDER, results_read_dir

    folder = results_read_dir(scale) / WEIGHTS_FOLDER
    if not folder.is_dir():
        return []
    out = []
    for source in sorted(p for p in folder.iterdir() if p.is_dir()):
        out += [r for (_, s), r in sorted(read_results(spec, scale, root=source).items()) if s == scale and r.weights]
    return out


def weights_source_words(result: Result) -> str:
    """ "released weights" or "weights FILE", with the checkpoint's name and digest (each checkpoint's, with the
    columns it fills, where a row has one per data set; those left empty named): the source of a number."""
    weights = result.weights or {}
    source = "released weights" if weights.get("weights") == "released" else f"weights {weights.get('weights')}"
    if "checkpoints" not in weights:
        return f"{source} ({weights.get('checkpoint')}, sha256 {str(weights.get('sha256', ''))[:12]}…)"
    each = [
        f"{c.get('checkpoint')} for {c.get('columns')}, sha256 {str(c.get('sha256', ''))[:12]}…"
        for c in weights["checkpoints"]
    ]
    each += [f"no checkpoint for {part}: empty" for part in weights.get("empty", [])]
    return f"{source} ({'; '.join(each)})"


# --- formatting helpers ---------------------------------------------------------------------------


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


def fmt_signed(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"


def sign_mark(paper: float | None, ours: float | None) -> str:
    """✓ when the effect has the same sign in the paper and at this scale, ✗ when not, "" when either is 0."""
    if paper is None or ours is None or paper == 0 or ours == 0:
        return ""
    return "✓" if (paper > 0) == (ours > 0) else "✗"


def column_digits(view: TableView, column: str) -> int:
    """Decimals to print a reported column with: the most any of its values has (52.30 beside 53.26)."""
    return column_decimals([r.cells[column].reported for r in view.rows if r.cells[column].reported is not None])


def column_label(view: TableView, column: str) -> str:
    unit = view.spec.column(column).unit
    return f"{column} [{unit}]" if unit and unit != "%" else column


def reproduced_on(view: TableView) -> str:
    """Split and seed count of the reproduced numbers, e.g. "val, n = 3 seeds" ("" with no results)."""
    results = [r.result for r in view.rows if r.result is not None]
    if not results:
        return ""
    splits = sorted({r.split for r in results if r.split})
    counts = sorted({max(len(r.seeds), 1) for r in results})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    seeds = "seed" if counts == [1] else "seeds"
    return ", ".join(([f"split {'/'.join(splits)}"] if splits else []) + [f"n = {n} {seeds} per row"])


def caption(view: TableView) -> str:
    spec = view.spec
    on = reproduced_on(view)
    return (
        f"{spec.paper} {spec.table} ({spec.id}): {spec.title} — reported on {spec.split}; "
        f"reproduced at scale {view.scale}" + (f" ({on})" if on else "") + variant_words(view)
    )


def variant_words(view: TableView) -> str:
    """What a variant changed, for the caption ("" for the spec as written)."""
    v = view.variant
    if not v:
        return ""
    parts = [f"spec file {v['spec_file']}"] if v.get("spec_file") else []
    parts += [f"{k}={val}" for k, val in (v.get("overrides") or {}).items()]
    parts += [f"PARTIAL: first {v['limit']} questions per split"] if v.get("limit") else []
    return f"; VARIANT, not the spec as written: {', '.join(parts)}"


def footnotes(view: TableView) -> list[str]:
    notes = []
    if any(c.uncertain for r in view.rows for c in r.cells.values()):
        notes.append("? = value not confirmed: the PDF conversion garbled it (see `repro show`).")
    if any(c.deviation and c.reproduced is not None for r in view.rows for c in r.cells.values()):
        notes.append("! = an explained deviation from the paper (see `repro show`); checked against its own reference.")
    if any(r.cited for r in view.rows):
        notes.append("Rows with a reference such as [16] are cited from other papers: shown, never run.")
    if view.scale != "paper":
        notes.append(f"Scale {view.scale!r} is not the paper's setting: compare trends, not values.")
        if view.baseline is not None:
            notes.append(
                f"Δ = row − {view.baseline.name} (the first runnable row), in the paper and at scale "
                f"{view.scale}; ✓ = the same sign in both, ✗ = opposite signs."
            )
    if view.config_notes:
        notes.append("Seeds pooled from several configs: " + " | ".join(view.config_notes) + ".")
    if view.settings_notes:
        notes.append(
            f"Made under other settings than the spec's now (its scale's settings, model or recipe changed since): "
            f"{', '.join(view.settings_notes)}; `repro run {view.spec.id} --scale {view.scale} --rows ROWS --force` "
            "makes them anew (`repro check -v` gives the configurations)."
        )
    if view.other_scales:
        notes.append(f"Results also exist at scale(s): {', '.join(view.other_scales)} (use --scale).")
    for result in view.weights:  # their own source: not trained here, not the paper
        values = ", ".join(f"{c} {fmt(result.metrics[c])}" for c in view.columns if c in result.metrics)
        notes.append(
            f"{result.row} from {weights_source_words(result)}, not trained here: {values or 'no scores yet'} "
            f"(split {result.split})."
        )
    return notes
