"""The paper's claims about a table ("row beats over on column"), judged in the paper and at a scale.

At a scale with at least two seeds per row the per-seed values of the two rows are compared with
Welch's t-test (unequal variances), one-sided in the claimed direction, at level ALPHA, with the p-values
of a table's claims adjusted for multiplicity by Holm's step-down method (`judge_claims`): the verdict
uses the adjusted value. Three families per table, each Holm-adjusted: the claims in their claimed
direction ("holds"), the same claims in the other direction ("reversed"), and the equivalence tests
(TOST against the claim's margin δ: "equivalent"). A claim that is none of these is "underpowered", with
the smallest true difference its seeds would detect (80% power at the level Holm's first step uses, from
the exact noncentral t). An exact permutation test of the mean difference (n <= 10 per arm) is shown
beside Welch, and a verdict the two disagree on is flagged. Rows without spread give no verdict from a
difference below the metric's resolution.

Claims on a time column ("row trains faster than over") are judged from their interleaved timing record
(repro.timing: K ratios t_row / t_over, both rows' steps alternated in one process), never from the rows'
per-seed times: the statistic is the geometric mean ratio, with a CONFIDENCE interval from the t
distribution of the log ratios; the test is an exact sign-flip permutation test of the mean log ratio,
one-sided in the claimed direction (all 2^K sign patterns, K <= SIGN_FLIP_MAX_K; a t-test on the log ratios
above), Holm-adjusted with the table's other claims; "equivalent" is TOST by the same sign-flip test against
|log ratio| < log(1 + δ), δ the scale's `timing.equivalence` (default 5%). Without a record: not judged.

This module holds only the statistics: a claim is judged from the spec and the records of one scale, with
no table view involved; how the verdicts are shown is repro.report.layout's (text cells) and export's (JSON).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repro.metrics import METRICS
from repro.results import Result
from repro.specs import Claim, Spec

ALPHA = 0.05  # level of the one-sided tests a claim is judged with, Holm-adjusted within a table
# The interval printed around a claim's margin: two-sided at 1 - 2 * ALPHA, so that its lower end is the
# one-sided (1 - ALPHA) bound of the test (before Holm's adjustment).
CONFIDENCE = 1 - 2 * ALPHA
POWER = 0.8  # the power at which the smallest detectable effect of an underpowered claim is given
PERMUTATION_MAX_N = 10  # the exact permutation test is run up to this many seeds per row
SIGN_FLIP_MAX_K = 20  # time claims: the exact sign-flip test up to this many ratios, a t-test on the logs above

VERDICTS = ("holds", "reversed", "equivalent", "underpowered", "not judged")


@dataclass
class ClaimView:
    text: str
    paper: bool | None  # does the paper's own table support it
    # at the view's scale, the full text: holds, reversed, equivalent (within δ), underpowered (the smallest
    # effect these seeds could detect: X), not judged (1 seed | no results | below the resolution)
    verdict: str
    margin: float | None = None  # reproduced mean difference, in the column's better direction
    spread: float | None = None  # std of the two rows added (kept for readers of the JSON output)
    p_value: float | None = None  # one-sided Welch test, in the claimed direction (unadjusted)
    ci_low: float | None = None  # CONFIDENCE interval of the margin (Welch–Satterthwaite df)
    ci_high: float | None = None
    n: tuple[int, int] | None = None  # seeds of `row` and of `over`
    # claims on a time column are about speed, which only a ratio carries across hardware: row / over
    ratio: float | None = None
    ratio_paper: float | None = None
    kind: str = "not judged"  # one of VERDICTS
    p_adjusted: float | None = None  # Holm-adjusted p_value within the table: what "holds" is decided on
    p_reversed: float | None = None  # one-sided, the other direction (unadjusted); Holm-adjusted below
    p_reversed_adjusted: float | None = None
    delta: float | None = None  # the equivalence margin δ, in the column's units
    delta_source: str | None = None  # "claim" (the spec's margin for it) or "metric default"
    p_equivalence: float | None = None  # TOST: the larger of the two one-sided p-values (unadjusted)
    p_equivalence_adjusted: float | None = None
    detectable: float | None = None  # smallest true difference the seeds detect with POWER at Holm's first level
    p_permutation: float | None = None  # exact permutation test of the mean difference, claimed direction
    p_permutation_reversed: float | None = None
    flags: list[str] = field(default_factory=list)  # e.g. Welch and the permutation test disagree
    m: int = 1  # claims judged in the table (Holm's family size)
    resolution: float | None = None
    test: Welch | None = field(default=None, repr=False)
    # how it was judged: "welch" (two rows' seeds) or "interleaved ratio" (a time claim's timing record)
    method: str = "welch"
    pairs: int | None = None  # time claims: K, the interleaved ratios judged
    ratio_ci_low: float | None = None  # time claims: CONFIDENCE interval of the geometric mean ratio row / over
    ratio_ci_high: float | None = None


@dataclass(frozen=True)
class Sample:
    """One row's values of one column over its seeds: mean, sample std (ddof 1) and count."""

    mean: float
    std: float
    n: int
    values: tuple[float, ...] = ()  # the per-seed values, when the record carries them


@dataclass(frozen=True)
class Welch:
    margin: float  # mean difference in the claimed direction
    se: float
    df: float
    p_value: float  # one-sided: P(T >= t) under "no difference"
    ci_low: float
    ci_high: float


def judge_claims(
    spec: Spec, results: Mapping[str, Result | None], scale: str | None = None, root: Path | None = None
) -> list[ClaimView]:
    """Every claim of a table, with Holm's adjustment over the table's judged claims (see the module); `scale`
    (default: the records') and `root` say where time claims' timing records are read (repro.timing)."""
    views = [_measure(spec, claim, results, scale, root) for claim in spec.claims]
    judged = [v for v in views if v.p_value is not None]
    for key in ("p_value", "p_reversed", "p_equivalence"):
        adjusted = holm([getattr(v, key) for v in judged])
        for v, p in zip(judged, adjusted):
            setattr(v, "p_adjusted" if key == "p_value" else f"{key}_adjusted", p)
    for v in judged:
        v.m = len(judged)
        _decide(v)
    return views


def judge_claim(
    spec: Spec, claim: Claim, results: Mapping[str, Result | None], scale: str | None = None, root: Path | None = None
) -> ClaimView:
    """Does `claim.row` beat `claim.over` on `claim.column`? In the paper (the spec's reported values), and
    at a scale (`results`: row name -> that scale's record, None or absent when the row has none), judged
    alone (a family of one: no adjustment; `judge_claims` judges a table's claims together)."""
    view = _measure(spec, claim, results, scale, root)
    if view.p_value is not None:
        view.p_adjusted, view.p_reversed_adjusted = view.p_value, view.p_reversed
        view.p_equivalence_adjusted = view.p_equivalence
        _decide(view)
    return view


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest of m p-values times (m - i + 1), made monotone, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _measure(
    spec: Spec, claim: Claim, results: Mapping[str, Result | None], scale: str | None = None, root: Path | None = None
) -> ClaimView:
    """A claim's statistics before any verdict that depends on the other claims of its table."""
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
        if scale is None:
            scale = next((r.scale for r in (result_a, result_b) if r is not None), None)
        return _measure_time(spec, claim, scale, root, paper, sign, ratios)
    if reproduced_a is None or reproduced_b is None:
        return ClaimView(claim.text, paper, "not judged (no results)", **ratios)
    sample_a = seed_sample(result_a, claim.column)
    sample_b = seed_sample(result_b, claim.column)
    margin = sign * (reproduced_a - reproduced_b)
    spread = (result_a.std.get(column.name) or 0.0) + (result_b.std.get(column.name) or 0.0)
    n = (sample_a.n, sample_b.n)
    if min(n) < 2:
        return ClaimView(claim.text, paper, "not judged (1 seed)", margin, spread, n=n, **ratios)
    test = welch(sample_a, sample_b, sign)
    resolution = METRICS[column.metric].resolution
    if resolution is None:
        resolution = 1e-9 * max(abs(sample_a.mean), abs(sample_b.mean))
    view = ClaimView(claim.text, paper, "", test.margin, spread, test.p_value, test.ci_low, test.ci_high, n, **ratios)
    view.resolution = resolution
    if test.se == 0.0 and abs(test.margin) < resolution:
        view.verdict = f"not judged (no spread, and a difference below the metric's resolution {resolution:g})"
        view.p_value = None
        return view
    view.p_reversed = 1.0 - test.p_value if test.se > 0 else (0.0 if test.margin < 0 else 1.0)
    view.delta, view.delta_source = equivalence_margin(claim, column.metric, sample_b.mean)
    if view.delta is not None:
        view.p_equivalence = tost(test, view.delta)
    if sample_a.values and sample_b.values and max(n) <= PERMUTATION_MAX_N:
        view.p_permutation = permutation_p(sample_a.values, sample_b.values, sign)
        view.p_permutation_reversed = permutation_p(sample_a.values, sample_b.values, -sign)
    view.test = test
    return view


def _measure_time(
    spec: Spec, claim: Claim, scale: str | None, root: Path | None, paper: bool | None, sign: float, ratios: dict
) -> ClaimView:
    """A time claim from its interleaved ratios (see the module): margin = sign * mean log ratio (positive:
    `row` better, i.e. faster for a lower-is-better time), its test and interval, TOST against log(1 + δ)."""
    from scipy import stats

    from repro.timing import read_timing

    record = None if scale is None else read_timing(spec, claim, scale, root)
    if record is None:
        return ClaimView(
            claim.text,
            paper,
            f"not judged (no interleaved timing record: repro run {spec.id} --scale {scale or '…'} --timing)",
            method="interleaved ratio",
            **ratios,
        )
    logs = [math.log(r) for r in record["ratios"]]
    x = [sign * v for v in logs]
    k = len(x)
    mean = statistics.fmean(logs)
    margin = sign * mean
    sd = statistics.stdev(x) if k > 1 else 0.0
    se, df = sd / math.sqrt(k), k - 1
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se if se > 0 else 0.0
    test = Welch(margin, se, df, log_ratio_p(x), margin - half, margin + half)
    view = ClaimView(claim.text, paper, "", margin, None, test.p_value, test.ci_low, test.ci_high, (k, k))
    view.ratio, view.ratio_paper = math.exp(mean), ratios["ratio_paper"]
    view.ratio_ci_low, view.ratio_ci_high = math.exp(mean - half), math.exp(mean + half)
    view.method, view.pairs, view.test = "interleaved ratio", k, test
    view.p_reversed = log_ratio_p([-v for v in x])
    equivalence = float(record.get("equivalence", 0.05))
    view.delta, view.delta_source = math.log1p(equivalence), f"timing.equivalence ({equivalence:.0%}, log ratio)"
    view.p_equivalence = max(log_ratio_p([v + view.delta for v in x]), log_ratio_p([view.delta - v for v in x]))
    return view


def log_ratio_p(x: Sequence[float]) -> float:
    """One-sided p of "mean(x) > 0" for log ratios `x`: the exact sign-flip permutation test (the share of the 2^K
    sign patterns whose mean is at least the observed one, the observed included) up to SIGN_FLIP_MAX_K values,
    a one-sample t-test above."""
    import numpy as np
    from scipy import stats

    values = np.asarray(x, dtype=float)
    k = len(values)
    if k > SIGN_FLIP_MAX_K:
        sd = float(values.std(ddof=1))
        if sd == 0.0:
            return 0.0 if values.mean() > 0 else 1.0
        return float(stats.t.sf(values.mean() / (sd / math.sqrt(k)), k - 1))
    signs = 1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)) & 1)  # every sign pattern, the observed first
    means = (signs * values).mean(axis=1)
    tolerance = 1e-12 * max(1.0, float(np.abs(values).max()))
    return float(np.mean(means >= values.mean() - tolerance))


def _decide(v: ClaimView) -> None:
    """The verdict from the Holm-adjusted p-values (v.m claims in the family)."""
    if v.p_adjusted < ALPHA and v.margin > 0:
        v.kind, v.verdict = "holds", "holds"
    elif v.p_reversed_adjusted < ALPHA and v.margin < 0:
        v.kind, v.verdict = "reversed", "reversed"
    elif v.p_equivalence_adjusted is not None and v.p_equivalence_adjusted < ALPHA:
        within = f"±{math.expm1(v.delta):.0%} (ratio)" if v.method == "interleaved ratio" else f"δ = {v.delta:.3g}"
        v.kind, v.verdict = "equivalent", f"equivalent within {within}"
    else:
        v.detectable = None if v.test is None else detectable_effect(v.test, ALPHA / v.m)
        words = "–" if v.detectable is None else f"{v.detectable:.3g}"
        what = "seeds"
        if v.method == "interleaved ratio":  # the detectable log ratio, as a relative difference
            words, what = ("–" if v.detectable is None else f"{math.expm1(v.detectable):.1%}"), f"{v.pairs} ratios"
        v.kind, v.verdict = "underpowered", f"underpowered (the smallest effect these {what} could detect: {words})"
    if v.p_permutation is not None:
        welch_says = min(v.p_value, v.p_reversed) < ALPHA
        permutation_says = min(v.p_permutation, v.p_permutation_reversed) < ALPHA
        if welch_says != permutation_says:
            v.flags.append(
                f"Welch and the exact permutation test disagree (one-sided p {fmt_p(v.p_value)} vs "
                f"{fmt_p(v.p_permutation)}, unadjusted)"
            )


def equivalence_margin(claim: Claim, metric: str, over_mean: float) -> tuple[float | None, str | None]:
    """δ for a claim: its own `margin` (the paper's, or fixed in the spec before the runs), else its metric's."""
    if claim.margin is not None:
        return claim.margin, "claim"
    default = METRICS[metric].margin  # fixed before any result was looked at (repro.metrics.METRICS)
    if default is None:
        return None, None
    kind, value = default
    return (value if kind == "points" else value * abs(over_mean)), "metric default"


def tost(test: Welch, delta: float) -> float:
    """Two one-sided tests of |difference| < delta (Welch's se and df): the larger of the two p-values."""
    from scipy import stats

    if test.se == 0.0:
        return 0.0 if abs(test.margin) < delta else 1.0
    lower = float(stats.t.sf((test.margin + delta) / test.se, test.df))  # H0: difference <= -delta
    upper = float(stats.t.cdf((test.margin - delta) / test.se, test.df))  # H0: difference >= delta
    return max(lower, upper)


def detectable_effect(test: Welch, level: float, power: float = POWER) -> float | None:
    """The smallest true difference a one-sided Welch test at `level` detects with `power`, with these
    seeds' standard error and df: the exact noncentral t (scipy.stats.nct), solved for the noncentrality."""
    from scipy import optimize, stats

    if test.se == 0.0 or not math.isfinite(test.df):
        return None
    critical = float(stats.t.ppf(1 - level, test.df))

    def short(nc: float) -> float:
        return float(stats.nct.sf(critical, test.df, nc)) - power

    nc = optimize.brentq(short, 0.0, 100.0 + 10 * critical)
    return nc * test.se


def permutation_p(a: Sequence[float], b: Sequence[float], sign: float = 1.0) -> float:
    """Exact one-sided permutation test of `sign * (mean(a) - mean(b))`: the share of the relabellings of the
    pooled seeds whose difference is at least the observed one (the observed labelling included)."""
    import numpy as np

    pooled = np.asarray([*a, *b], dtype=float)
    na, nb, total = len(a), len(b), float(pooled.sum())
    observed = sign * (statistics.fmean(a) - statistics.fmean(b))
    picks = np.asarray(list(itertools.combinations(range(len(pooled)), na)), dtype=np.int64)
    sums = pooled[picks].sum(axis=1)
    diffs = sign * (sums / na - (total - sums) / nb)
    tolerance = 1e-9 * max(1.0, float(np.abs(pooled).max()))
    return float(np.mean(diffs >= observed - tolerance))


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
            return Sample(statistics.fmean(values), std, len(values), tuple(values))
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
