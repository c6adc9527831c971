"""The paper's claims about a table ("row beats over on column"), judged in the paper and at a scale.

At a scale with at least two seeds per row the per-seed values of the two rows are compared with
Welch's t-test (unequal variances), one-sided in the claimed direction, at level ALPHA. This module
holds only the statistics: a claim is judged from the spec and the records of one scale, with no table
view involved; how the verdicts are shown is repro.report.layout's (text cells) and export's (JSON).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from repro.results import Result
from repro.specs import Claim, Spec

ALPHA = 0.05  # level of the one-sided test a claim is judged with
# The interval printed around a claim's margin: two-sided at 1 - 2 * ALPHA, so that its lower end is the
# one-sided (1 - ALPHA) bound of the test and a claim holds exactly when that end is above zero.
CONFIDENCE = 1 - 2 * ALPHA


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
    # claims on a time column are about speed, which only a ratio carries across hardware: row / over
    ratio: float | None = None
    ratio_paper: float | None = None


@dataclass(frozen=True)
class Sample:
    """One row's values of one column over its seeds: mean, sample std (ddof 1) and count."""

    mean: float
    std: float
    n: int


@dataclass(frozen=True)
class Welch:
    margin: float  # mean difference in the claimed direction
    se: float
    df: float
    p_value: float  # one-sided: P(T >= t) under "no difference"
    ci_low: float
    ci_high: float


def judge_claim(spec: Spec, claim: Claim, results: Mapping[str, Result | None]) -> ClaimView:
    """Does `claim.row` beat `claim.over` on `claim.column`? In the paper (the spec's reported values), and
    at a scale (`results`: row name -> that scale's record, None or absent when the row has none).

    "holds" when the one-sided test in the claimed direction gives p < ALPHA, "reversed" when the
    test the other way does, "not decided (p = …)" otherwise; "not judged (1 seed)" when either row
    has a single seed.
    """
    column = spec.column(claim.column)
    sign = -1.0 if column.better == "lower" else 1.0
    rows = {r.name: r for r in spec.rows}
    result_a, result_b = results.get(claim.row), results.get(claim.over)
    reported_a, reported_b = (rows[name].reported.get(column.name) for name in (claim.row, claim.over))
    reproduced_a, reproduced_b = (_value(r, column.name) for r in (result_a, result_b))
    paper = None if reported_a is None or reported_b is None else sign * (reported_a - reported_b) > 0
    ratios = {}
    if column.metric == "time":
        ratios["ratio_paper"] = _ratio(reported_a, reported_b)
        ratios["ratio"] = _ratio(reproduced_a, reproduced_b)
    if reproduced_a is None or reproduced_b is None:
        return ClaimView(claim.text, paper, "no results", **ratios)
    sample_a = seed_sample(result_a, claim.column)
    sample_b = seed_sample(result_b, claim.column)
    margin = sign * (reproduced_a - reproduced_b)
    spread = (result_a.std.get(column.name) or 0.0) + (result_b.std.get(column.name) or 0.0)
    n = (sample_a.n, sample_b.n)
    if min(n) < 2:
        return ClaimView(claim.text, paper, "not judged (1 seed)", margin, spread, n=n, **ratios)
    test = welch(sample_a, sample_b, sign)
    if test.p_value < ALPHA and test.margin > 0:
        verdict = "holds"
    elif 1.0 - test.p_value < ALPHA and test.margin < 0:
        verdict = "reversed"
    else:
        verdict = f"not decided (p = {fmt_p(test.p_value)})"
    return ClaimView(
        claim.text, paper, verdict, test.margin, spread, test.p_value, test.ci_low, test.ci_high, n, **ratios
    )


def _value(result: Result | None, column: str) -> float | None:
    return None if result is None else result.metrics.get(column)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def seed_sample(result: Result | None, column: str) -> Sample:
    """The per-seed values a record carries (`extra.per_seed`), or its mean, std and seed count."""
    if result is None or column not in result.metrics:
        return Sample(math.nan, math.nan, 0)
    per_seed = result.extra.get("per_seed") if isinstance(result.extra, dict) else None
    if isinstance(per_seed, list):
        values = [
            float(run[column])
            for run in per_seed
            if isinstance(run, dict)
            and isinstance(run.get(column), (int, float))
            and not isinstance(run.get(column), bool)
        ]
        if values:
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            return Sample(statistics.fmean(values), std, len(values))
    n = max(len(result.seeds), 1)
    std = result.std.get(column) if result.std else None
    if n > 1 and std is None:  # several seeds but no spread recorded: nothing to test with
        n = 1
    return Sample(float(result.metrics[column]), float(std or 0.0), n)


def welch(a: Sample, b: Sample, sign: float = 1.0, confidence: float | None = None) -> Welch:
    """Welch's unequal-variance t-test of `sign * (a - b) > 0` from two rows' summary statistics.

    df is the Welch–Satterthwaite approximation; the interval is two-sided at `confidence`.
    """
    from scipy import stats

    confidence = CONFIDENCE if confidence is None else confidence
    margin = sign * (a.mean - b.mean)
    va, vb = a.std**2 / a.n, b.std**2 / b.n
    se = math.sqrt(va + vb)
    if se == 0.0:  # every seed gave the same value on both rows: the difference is exact
        p = 0.0 if margin > 0 else 1.0 if margin < 0 else 0.5
        return Welch(margin, 0.0, math.inf, p, margin, margin)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    p = float(stats.t.sf(margin / se, df))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    return Welch(margin, se, df, p, margin - half, margin + half)


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "–"
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}" if p < 0.1 else f"{p:.2f}"
