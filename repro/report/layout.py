"""Terminal layouts of a table view that never cut a number or a row name.

A table is a row-name column plus groups of columns (one group per metric). When the groups do not
fit the width, they are split into blocks, each repeating the row-name column; a group too wide on
its own is split into its columns. Rendered with rich (boxes, colour) or as plain text (pipes, files).
"""

from __future__ import annotations

from dataclasses import replace

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from repro.report.claims import CONFIDENCE, POWER, ClaimView, fmt_p
from repro.report.grid import (
    Col,
    Grid,
    blocks,
    listing_grid,
    plain_block,
    plain_listing,
    plain_width,
    rich_table,
    rich_width,
    wrap,
)
from repro.report.view import (
    TableView,
    caption,
    column_digits,
    column_label,
    fmt_delta,
    fmt_reported,
    fmt_reproduced,
    fmt_signed,
    footnotes,
    sign_mark,
)


def table_grid(view: TableView, cited: str = "cited", verbose: bool = True) -> Grid:
    """The cells of a view as text: reported, reproduced and Δ per column at paper scale; at another
    scale reported, reproduced and the effect against the baseline row in the paper and at this scale (not
    `verbose`: the effect at this scale alone, its mark saying whether the paper's has the same sign, and short
    headers, so two columns sit side by side in 80 characters)."""
    label = Col("Row", [r.label for r in view.rows], justify="left")
    groups = []
    paper_scale = view.scale == "paper"
    for col in view.columns:
        digits = column_digits(view, col)
        better = view.spec.column(col).better
        cells = [r.cells[col] for r in view.rows]
        reported = Col(
            "reported", [fmt_reported(c, digits) for c in cells], ["yellow" if c.uncertain else None for c in cells]
        )
        ours = Col(
            "ours" if paper_scale else view.scale,
            [cited if r.cited else fmt_reproduced(r.cells[col], digits) for r in view.rows],
            ["dim" if r.cited else None for r in view.rows],
        )
        if paper_scale:
            deltas = Col("Δ", [fmt_delta(c) for c in cells], [_delta_style(c.delta, better) for c in cells])
            group = [reported, ours, deltas]
        else:
            base = view.baseline
            in_paper, at_scale, paper_styles, scale_styles = [], [], [], []
            for r in view.rows:
                if r is base:
                    in_paper.append("base"), at_scale.append("base")
                    paper_styles.append("dim"), scale_styles.append("dim")
                    continue
                p, s = view.effect(r, col, reproduced=False), view.effect(r, col, reproduced=True)
                mark = sign_mark(p, s) if _seeds(r) > 1 and _seeds(base) > 1 else ""  # no mark on one seed
                in_paper.append(fmt_signed(p))
                at_scale.append(fmt_signed(s) + (f" {mark}" if mark else ""))
                paper_styles.append(None)
                scale_styles.append({"✓": "green", "✗": "red"}.get(mark))
            group = [
                reported,
                ours,
                Col("Δ paper", in_paper, paper_styles),
                Col(f"Δ {view.scale}", at_scale, scale_styles),
            ]
            if not verbose:
                group = [replace(reported, header="paper"), ours, Col("Δ", at_scale, scale_styles)]
        for c in group:
            c.group = column_label(view, col)
        group[0].lead = True
        groups.append(group)
    return Grid(label, groups, ["dim" if r.cited else None for r in view.rows])


def _seeds(row) -> int:
    return len(row.result.seeds) if row is not None and row.result is not None and row.result.seeds else 0


def _delta_style(delta: float | None, better: str) -> str:
    if delta is None:
        return "dim"
    good = delta >= 0 if better == "higher" else delta <= 0 if better == "lower" else True
    return "green" if good else "red"


# --- the claims as text, shared by every renderer ------------------------------------------------


def claims_caption() -> str:
    return (
        "Judged under the spec's design (fixed before the runs; `repro show ID` prints it): only the design's seeds "
        "whose records carry its hash count (extra seeds are shown, never judged). One Holm family per table at "
        "the design's α: each claim's two-sided Welch test (p; floored at the smallest p the exact permutation "
        "test of those seeds can give) and, where the paper's own effect exceeds δ, its equivalence test (TOST "
        "within ±δ, δ from the design with its source); p (Holm) = adjusted, what the verdict uses; a sequential "
        "design spends α over its looks (a claim keeps the verdict of the first look that decides it; "
        '"underpowered at look j of k": undecided so far, the next look adds seeds). One verdict per claim, the '
        "first that applies: not judged (why) > uninformative (its positive control failed or has not run) > "
        "holds | reversed > equivalent > not testable at this δ (the paper's effect is smaller) > underpowered "
        "(with the smallest effect these seeds detect at "
        f"{POWER:.0%} power at Holm's first level). margin = mean difference in the claimed direction, with its "
        f"{CONFIDENCE:.0%} interval; perm. p = exact permutation test, ⚑ where it and Welch disagree; n = design "
        "seeds used. Time claims: K ratios of the two rows' steps interleaved in one process (`repro run ID "
        "--timing`), exact sign-flip test, δ relative."
    )


CLAIM_KEYS = ("claim", "in the paper", "verdict", "margin", "CI", "p", "p (Holm)", "perm. p", "n", "ratio")


def claim_keys(claims: list[ClaimView]) -> tuple[str, ...]:
    """The claims table's columns: the ratio only when some claim is about time."""
    if any(c.ratio is not None or c.ratio_paper is not None for c in claims):
        return CLAIM_KEYS
    return CLAIM_KEYS[:-1]


def claim_header(scale: str, key: str) -> str:
    return {"verdict": f"at scale {scale}", "CI": f"{CONFIDENCE:.0%} CI"}.get(key, key)


def claim_cells(c: ClaimView) -> dict[str, str]:
    """The claims table's cells as text, shared by every renderer."""
    return {
        "claim": c.text,
        "in the paper": {True: "yes", False: "no", None: "–"}[c.paper],
        "verdict": c.verdict + (" ⚑" if c.flags else ""),
        "margin": "–" if c.margin is None else f"{c.margin:+.2f}",
        "CI": "–" if c.ci_low is None else f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}]",
        "p": fmt_p(c.p_value),
        "p (Holm)": fmt_p(c.p_adjusted),
        "perm. p": fmt_p(c.p_permutation),
        "n": "–" if c.n is None else f"{c.n[0]}, {c.n[1]}",
        "ratio": fmt_ratio(c),
    }


def fmt_ratio(c: ClaimView) -> str:
    """`row / over` at the scale (in the paper) for time claims; – for the others."""
    if c.ratio is None and c.ratio_paper is None:
        return "–"
    ours = "–" if c.ratio is None else f"{c.ratio:.2f}"
    return ours + ("" if c.ratio_paper is None else f" (paper {c.ratio_paper:.2f})")


# --- splitting into blocks ------------------------------------------------------------------------


def render_plain(view: TableView, width: int = 80, verbose: bool = True) -> str:
    """The table as plain text for pipes and files: no colour, no box characters beyond rules. Not `verbose`: the
    short view of `repro table` (`compact_footnotes`, one line per claim, `-v` for the statistics)."""
    grid = table_grid(view, verbose=verbose)
    lines = wrap(caption(view), width)
    for block in blocks(grid, width, plain_width):
        lines += [""] + plain_block(grid, block)
    notes = footnotes(view) if verbose else compact_footnotes(view)
    if notes:
        lines.append("")
        for note in notes:
            lines += wrap(note, width, "  ")
    if view.claims:
        lines += [""] + (plain_claims(view, width) if verbose else short_claims(view, width))
    return "\n".join(lines) + "\n"


def compact_footnotes(view: TableView) -> list[str]:
    """The footnotes of the short view: the scale's warning and what Δ and its mark mean, said for its headers."""
    notes = footnotes(view)
    if view.scale == "paper" or view.baseline is None:
        return notes
    base = view.baseline.name
    return [n for n in notes if not n.startswith("Δ = ")] + [
        f"paper = the paper's value; Δ = row − {base} at scale {view.scale}; ✓ = the paper's Δ has the same sign, "
        "✗ = the opposite (`-v`: the paper's Δ too)"
    ]


def short_claims(view: TableView, width: int) -> list[str]:
    """One line per claim (wrapped where it must be): its text, its verdict's kind and its margin; `-v` gives the
    verdicts in full, the statistics and how the claims are judged."""
    lines = [f"the paper's claims, at scale {view.scale}"]
    for claim in view.claims:
        margin = "" if claim.margin is None else f" · margin {claim_cells(claim)['margin']}"
        lines += wrap(f"• {' '.join(claim.text.split())}: {claim.kind}{margin}", width, "    ")
    more = "(`repro table ID -v`: each verdict in full, its statistics, how the claims are judged)"
    return lines + wrap(more, width)


def claims_grid(view: TableView) -> Grid:
    cells = [claim_cells(c) for c in view.claims]
    label = Col("claim", [c["claim"] for c in cells], justify="left")
    cols = [
        Col(
            claim_header(view.scale, k),
            [c[k] for c in cells],
            justify="left" if k in ("in the paper", "verdict") else "right",
        )
        for k in claim_keys(view.claims)[1:]
    ]
    return Grid(label, [cols])


def claim_lines(view: TableView, claim: ClaimView, width: int) -> list[str]:
    """One claim as a heading and a wrapped line of facts (the layout for narrow terminals)."""
    cells = claim_cells(claim)
    facts = [f"in the paper: {cells['in the paper']}", f"at scale {view.scale}: {cells['verdict']}"]
    if claim.margin is not None:
        facts.append(
            f"margin {cells['margin']}"
            + (f", {claim_header(view.scale, 'CI')} {cells['CI']}" if claim.ci_low is not None else "")
        )
    if claim.p_value is not None:
        facts.append(f"p {cells['p']} (Holm {cells['p (Holm)']})")
    if claim.p_permutation is not None:
        facts.append(f"perm. p {cells['perm. p']}")
    facts += [f"⚑ {flag}" for flag in claim.flags]
    if claim.n is not None:
        facts.append(f"n {cells['n']}")
    if cells["ratio"] != "–":
        facts.append(f"ratio {cells['ratio']}")
    out, line = wrap("• " + claim.text, width, "  "), "   "
    for fact in facts:
        if cell_len("    " + fact) > width:  # a long fact (an underpowered verdict, a flag) wraps on its own lines
            if line.strip():
                out.append(line)
            *whole, line = wrap("    " + fact, width, "      ")
            out += whole
            continue
        candidate = fact if line.strip() == "" else line + " · " + fact
        if line.strip() and cell_len(candidate) > width:
            out.append(line)
            line = "    " + fact
        else:
            line = ("    " + fact) if line.strip() == "" else candidate
    out.append(line)
    return out


def plain_claims(view: TableView, width: int) -> list[str]:
    lines = [f"the paper's claims, at scale {view.scale}"]
    grid = claims_grid(view)
    if plain_width([grid.label] + grid.groups[0]) <= width:
        lines += plain_block(grid, [grid.groups[0]])
    else:
        for claim in view.claims:
            lines += claim_lines(view, claim, width)
    return lines + [""] + wrap(claims_caption(), width)


# --- rich -----------------------------------------------------------------------------------------


class RichView:
    """A table view as rich renderables, split into blocks of columns to fit the console's width."""

    def __init__(self, view: TableView, verbose: bool = True):
        self.view, self.verbose = view, verbose

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        grid = table_grid(self.view, verbose=self.verbose)
        parts = blocks(grid, options.max_width, rich_width)
        notes = "\n".join(footnotes(self.view) if self.verbose else compact_footnotes(self.view)) or None
        for i, block in enumerate(parts):
            yield rich_table(
                grid,
                block,
                title=caption(self.view) if i == 0 else None,
                caption=notes if i == len(parts) - 1 else None,
                caption_justify="left",
            )


class RichClaims:
    """The claims as a table when it fits the console, else one claim per paragraph (not `verbose`: one line each)."""

    def __init__(self, view: TableView, verbose: bool = True):
        self.view, self.verbose = view, verbose

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        view, grid = self.view, claims_grid(self.view)
        title = f"the paper's claims, at scale {view.scale}"
        if not self.verbose:
            lines = short_claims(view, options.max_width)
            yield Text(lines[0], style="italic")
            yield Text("\n".join(lines[1:]))
            return
        if rich_width([grid.label] + grid.groups[0]) <= options.max_width:
            table = Table(title=title, title_justify="left", caption=claims_caption(), caption_justify="left")
            for key in claim_keys(view.claims):
                table.add_column(
                    claim_header(view.scale, key),
                    no_wrap=True,
                    overflow="fold",
                    justify="left" if key in ("claim", "in the paper", "verdict") else "right",
                )
            for c in view.claims:
                cells = claim_cells(c)
                table.add_row(
                    *[
                        Text(cells[k], style=verdict_style(c.verdict)) if k == "verdict" else cells[k]
                        for k in claim_keys(view.claims)
                    ]
                )
            yield table
            return
        yield Text(title, style="italic")
        for claim in view.claims:
            text = "\n".join(claim_lines(view, claim, options.max_width))
            yield Text(text, style="")
        yield Text(claims_caption(), style="dim")


def verdict_style(verdict: str) -> str:
    kind = verdict.split(" ")[0]
    return {"holds": "green", "reversed": "bold red", "equivalent": "cyan", "underpowered": "yellow"}.get(kind, "dim")


def render_rich(view: TableView, verbose: bool = True) -> RichView:
    return RichView(view, verbose)


def render_claims_rich(view: TableView, verbose: bool = True) -> RichClaims | None:
    return RichClaims(view, verbose) if view.claims else None


# --- listings: one line per entry, an id never cut ------------------------------------------------


# --- repro check ------------------------------------------------------------------------------------


def check_lines(checks: list, width: int, verbose: bool = False) -> list[str]:
    """`repro check`'s values as plain lines that fit `width`: only the failed ones unless `verbose`,
    grouped by experiment, scale and what they are compared with (so no column is cut)."""
    shown = checks if verbose else [c for c in checks if not c.ok]
    groups: dict[tuple[str, str, str], list] = {}
    for c in shown:
        groups.setdefault((c.spec, c.scale, c.against), []).append(c)
    lines: list[str] = []
    for (spec, scale, against), members in groups.items():
        what = "the paper's number" if against == "reported" else "the reference its record carries"
        lines += ["", f"{spec} · scale {scale} · expected = {what}"]
        grid = listing_grid(
            Col("row", [c.row for c in members], justify="left"),
            [
                Col("column", [c.column for c in members], justify="left"),
                Col("expected", [f"{c.expected:.4g}" for c in members]),
                Col("got", [f"{c.actual:.4g}" for c in members]),
                Col("Δ", [f"{c.actual - c.expected:+.3g}" for c in members]),
                Col("tolerance", [f"±{c.tolerance:g}" for c in members]),
                Col("status", ["ok" if c.ok else "REGRESSION" for c in members], justify="left"),
            ],
            width,
            rich=False,
        )
        lines += plain_listing(grid, width)
    return lines
