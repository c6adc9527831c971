"""The paper's claims about a table ("row beats over on column"), judged in the paper and at a scale, under the
spec's design (repro.design), which was fixed before the runs.

The design names α, δ per claim column, the seeds per scale and, optionally, the looks of a group-sequential plan.
A claim is judged from the design's seeds only (the first `at[j]` of them at look j), and only from seeds whose
record carries the design's hash: seeds beyond the design are shown in the table and never judge; seeds from
before any design ("pre-design") or from another design judge nothing.

**One family per table.** Every claim contributes its two-sided difference test and, where it can say something,
its equivalence test, to one Holm family over the table (`family`), tested at α (or at a look's share of α): the
probability of any wrong verdict in the table — a false "holds", a wrong direction, a false "equivalent" — is at
most α. A sequential plan spends α over its looks (Lan-DeMets O'Brien-Fleming or Pocock spending functions); look
j tests at alpha(t_j) - alpha(t_{j-1}), a union bound over the looks, and a claim keeps the verdict of the first
look that decided it.

- The difference test: Welch's t-test (unequal variances, Welch–Satterthwaite df), two-sided, its p floored at the
  smallest p the exact permutation test of the same seeds can reach (two constant rows of two seeds each cannot
  give less than 1/3). The exact permutation test itself is shown beside Welch (its own Holm adjustment), and a
  verdict the two disagree on is flagged. It enumerates every relabelling and compares with a relative tolerance,
  so that float ties count as ties (scipy.stats.permutation_test 1.17 misses some of them).
- The equivalence test: TOST against δ (statsmodels' `ttost_ind`, Welch), floored like the difference test. It
  enters the family only where the paper's own effect exceeds δ: where it does not, "equivalent" could not
  contradict the paper, and the claim is "not testable at this δ" unless the difference test decides it.
- Holm's adjustment: `holm` (the numbers of statsmodels' `multipletests(method="holm")`, see there).
- The detectable effect of an undecided claim: the smallest true difference the two-sided Welch test at Holm's
  first level (α of the look / the family's size) detects with 80% power, with these seeds' standard error and df,
  from the exact noncentral t (statsmodels' power classes assume a pooled df, so scipy's `nct` is used directly).

One verdict per claim, the first that applies (VERDICT_ORDER): not judged (why) > uninformative (its positive
control failed or has not run) > holds | reversed > equivalent > not testable at this δ > underpowered.

Claims on a time column ("row trains faster than over") are judged from their interleaved timing record
(repro.timing: K ratios t_row / t_over of both rows' steps alternated in one process), never from the rows'
per-seed times: the statistic is the geometric mean ratio, the test the exact sign-flip test of the mean log ratio
(two-sided; a t-test on the logs above SIGN_FLIP_MAX_K ratios), in the same Holm family; δ is relative
(|log ratio| < log(1 + δ)).

This module holds only the statistics; how the verdicts are shown is repro.report.layout's and export's.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repro.design import Design
from repro.metrics import METRICS
from repro.results import Result
from repro.specs import Claim, Spec

ALPHA = 0.05  # the level when a caller gives none (a spec's design names its own)
# The interval printed around a claim's margin: two-sided at 1 - 2 * ALPHA (its ends are one-sided 95% bounds).
CONFIDENCE = 1 - 2 * ALPHA
POWER = 0.8  # the power at which the smallest detectable effect of an undecided claim is given
PERMUTATION_MAX_N = 8  # the exact permutation test beside Welch up to this many seeds per row (C(16, 8) = 12,870)
SIGN_FLIP_MAX_K = 20  # time claims: the exact sign-flip test up to this many ratios, a t-test on the logs above

VERDICTS = ("holds", "reversed", "equivalent", "not testable", "underpowered", "uninformative", "not judged")
VERDICT_ORDER = (
    "not judged (why)",
    "uninformative (control failed or not run)",
    "holds | reversed",
    "equivalent",
    "not testable at this δ",
    "underpowered",
)


@dataclass
class ClaimView:
    text: str
    paper: bool | None  # does the paper's own table support it
    verdict: str  # the full text: holds, reversed, equivalent within δ = X, underpowered (…), not judged (why), …
    margin: float | None = None  # reproduced mean difference, in the column's better direction
    spread: float | None = None  # std of the two rows added (kept for readers of the JSON output)
    p_value: float | None = None  # two-sided difference test (Welch, floored at the exact test's smallest p)
    ci_low: float | None = None  # CONFIDENCE interval of the margin (Welch–Satterthwaite df)
    ci_high: float | None = None
    n: tuple[int, int] | None = None  # design seeds used, of `row` and of `over`
    ratio: float | None = None  # time claims: row / over
    ratio_paper: float | None = None
    kind: str = "not judged"  # one of VERDICTS
    p_adjusted: float | None = None  # Holm-adjusted p_value within the table's family: what the verdict uses
    p_reversed: float | None = None  # one-sided p in the other direction (unadjusted), for readers
    p_reversed_adjusted: float | None = None  # kept for readers of older output: one family now, see p_adjusted
    delta: float | None = None  # the equivalence margin δ, in the column's units (time claims: relative)
    delta_source: str | None = None  # where δ comes from: the paper's own margin, the resolution, a stated reason
    p_equivalence: float | None = None  # TOST: the larger of the two one-sided p-values (unadjusted, floored)
    p_equivalence_adjusted: float | None = None  # Holm-adjusted in the same family
    detectable: float | None = None  # smallest true difference the seeds detect with POWER at Holm's first level
    p_permutation: float | None = None  # exact permutation test of the mean difference, two-sided
    p_permutation_reversed: float | None = None  # kept for readers of older output (one-sided, other direction)
    flags: list[str] = field(default_factory=list)  # e.g. Welch and the permutation test disagree
    m: int = 1  # hypotheses in the table's Holm family
    resolution: float | None = None
    test: Welch | None = field(default=None, repr=False)
    method: str = "welch"  # "welch" (two rows' seeds) or "interleaved ratio" (a time claim's timing record)
    pairs: int | None = None  # time claims: K, the interleaved ratios judged
    ratio_ci_low: float | None = None
    ratio_ci_high: float | None = None
    # the design
    design_hash: str | None = None
    alpha: float | None = None  # the table's family-wise level
    level: float | None = None  # the level of the look that decided (or last judged) the claim
    look: int | None = None  # 1-based look of the sequential plan that decided (or last judged) it
    looks: int | None = None  # how many looks the design has at this scale
    seeds_used: dict[str, list[int]] | None = None  # row -> the design seeds the verdict used
    p_one_sided: float | None = None  # Welch, in the claimed direction, unadjusted
    control: str | None = None  # passed | failed | not run (None: the claim names no control)
    control_spec: str | None = None
    paper_effect: float | None = None  # the paper's own difference, in the column's better direction
    snapshots: dict[int, dict] = field(default_factory=dict, repr=False)  # look index -> its statistics


def _show_look(view: ClaimView, j: int) -> None:
    """The claim's statistics as they were at look j (the look that decided it, or the last it reached)."""
    for key, value in view.snapshots[j].items():
        setattr(view, key, value)


@dataclass(frozen=True)
class Sample:
    """One row's values of one column over its seeds: mean, sample std (ddof 1) and count."""

    mean: float
    std: float
    n: int
    values: tuple[float, ...] = ()


@dataclass(frozen=True)
class Welch:
    margin: float  # mean difference in the claimed direction
    se: float
    df: float
    p_value: float  # one-sided: P(T >= t) under "no difference"
    ci_low: float
    ci_high: float


@dataclass
class Hypothesis:
    """One member of a table's Holm family: a claim's difference test or its equivalence test, at each look."""

    claim: int  # index into the table's claims
    kind: str  # "difference" or "equivalence"
    p: dict[int, float] = field(default_factory=dict)  # look index -> p (absent: no data at that look: 1)
    p_permutation: dict[int, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"claim {self.claim + 1} {self.kind}"


@dataclass
class Judgement:
    """The verdicts of one table at one scale, and the family they were adjusted over."""

    claims: list[ClaimView]
    family: list[str]  # "claim N difference" / "claim N equivalence", the Holm family
    alpha: float | None
    design_hash: str | None
    levels: tuple[float, ...] = ()  # the level of each look


# --- one table ---------------------------------------------------------------------------------------------------


def judge_claims(
    spec: Spec, results: Mapping[str, Result | None], scale: str | None = None, root: Path | None = None
) -> list[ClaimView]:
    """Every claim of a table, judged under the spec's design at `scale` (see the module)."""
    return judge_table(spec, results, scale, root).claims


def judge_table(
    spec: Spec,
    results: Mapping[str, Result | None],
    scale: str | None = None,
    root: Path | None = None,
    controls: bool = True,
) -> Judgement:
    """`judge_claims` with the family the Holm adjustment ran over. `controls=False`: the claims' positive controls
    are not looked up (a control's own table is judged so)."""
    if scale is None:
        scale = next((r.scale for r in results.values() if r is not None), None)
    design = spec.design
    looks = None if design is None or scale is None else design.looks_for(scale)
    views = [_base_view(spec, claim, results) for claim in spec.claims]
    if design is None or looks is None:
        why = "no design block in the spec" if design is None else f"the design names no seeds at scale {scale}"
        for v in views:
            v.verdict = f"not judged ({why}: claims are judged under a design fixed before the runs)"
        return Judgement(views, [], None if design is None else design.alpha, None)
    digest = spec.design_hash(scale)
    levels = looks.levels(design.alpha)
    hypotheses: list[Hypothesis] = []
    for i, (claim, v) in enumerate(zip(spec.claims, views)):
        v.design_hash, v.alpha, v.looks = digest, design.alpha, len(levels)
        hypotheses += _prepare(spec, claim, v, i, results, scale, root, design, digest, looks.at)
    _decide(views, hypotheses, levels)
    if controls:
        for claim, v in zip(spec.claims, views):
            _apply_control(claim, v, scale, root)
    return Judgement(views, [h.label for h in hypotheses], design.alpha, digest, levels)


def judge_claim(
    spec: Spec, claim: Claim, results: Mapping[str, Result | None], scale: str | None = None, root: Path | None = None
) -> ClaimView:
    """One claim judged alone (a family of its own), under the spec's design."""
    import dataclasses

    alone = dataclasses.replace(spec, claims=(claim,))
    return judge_table(alone, results, scale, root).claims[0]


def _base_view(spec: Spec, claim: Claim, results: Mapping[str, Result | None]) -> ClaimView:
    """What holds without any statistics: the paper's side, the reproduced means."""
    column = spec.column(claim.column)
    sign = -1.0 if column.better == "lower" else 1.0
    rows = {r.name: r for r in spec.rows}
    reported_a, reported_b = (rows[name].reported.get(column.name) for name in (claim.row, claim.over))
    paper = None if reported_a is None or reported_b is None else sign * (reported_a - reported_b) > 0
    view = ClaimView(claim.text, paper, "not judged")
    if reported_a is not None and reported_b is not None:
        # rounded as the printed numbers are, so that 64.4 - 63.4 and 64.1 - 63.1 are both an effect of 1, not one
        # 1 + 7e-15 (above a δ of 1) and the other 1 - 7e-15
        view.paper_effect = round(sign * (reported_a - reported_b), 9)
    result_a, result_b = results.get(claim.row), results.get(claim.over)
    a, b = (None if r is None else r.metrics.get(column.name) for r in (result_a, result_b))
    if column.metric == "time":
        view.method = "interleaved ratio"
        view.ratio_paper = _ratio(reported_a, reported_b)
        view.ratio = _ratio(a, b)
    elif a is not None and b is not None:
        view.margin = sign * (a - b)
        view.spread = (result_a.std.get(column.name) or 0.0) + (result_b.std.get(column.name) or 0.0)
    view.control_spec = claim.control
    return view


def _delta(spec: Spec, claim: Claim, design: Design) -> tuple[float | None, str | None]:
    if claim.margin is not None:
        return claim.margin, "the paper's own margin for this claim"
    given = design.delta.get(claim.column)
    return (None, None) if given is None else (given.value, given.words)


def _prepare(
    spec: Spec,
    claim: Claim,
    view: ClaimView,
    index: int,
    results: Mapping[str, Result | None],
    scale: str,
    root: Path | None,
    design: Design,
    digest: str,
    looks: tuple[int, ...],
) -> list[Hypothesis]:
    """A claim's statistics at each look it reached; its members of the family (none when it cannot be judged)."""
    column = spec.column(claim.column)
    sign = -1.0 if column.better == "lower" else 1.0
    view.delta, view.delta_source = _delta(spec, claim, design)
    if view.delta is None:
        view.verdict = f"not judged: no δ for {column.metric} (set one in design.delta.{column.name})"
        return []
    if column.metric == "time":
        return _prepare_time(spec, claim, view, index, scale, root, digest, sign)
    difference = Hypothesis(index, "difference")
    testable = view.paper_effect is not None and abs(view.paper_effect) > view.delta
    equivalence = Hypothesis(index, "equivalence") if testable else None
    members = [difference] + ([equivalence] if equivalence else [])
    samples, why = _design_samples(results, claim, column.name, design.seeds[scale], digest)
    if why:
        view.verdict = f"not judged ({why})"
        return members
    resolution = METRICS[column.metric].resolution
    for j, at in enumerate(looks):
        if min(len(samples[0]), len(samples[1])) < at:
            break
        a, b = (_sample(values[:at]) for values in samples)
        test = welch(a, b, sign)
        floor = permutation_floor(a.n, b.n)
        look = {
            "test": test,
            "look": j + 1,
            "margin": test.margin,
            "ci_low": test.ci_low,
            "ci_high": test.ci_high,
            "n": (a.n, b.n),
            "seeds_used": {claim.row: list(design.seeds[scale][:at]), claim.over: list(design.seeds[scale][:at])},
            "p_one_sided": test.p_value,
            "p_reversed": _other_side(test),
            "resolution": resolution if resolution is not None else 1e-9 * max(abs(a.mean), abs(b.mean)),
            "p_value": None,
            "p_permutation": None,
            "p_permutation_reversed": None,
            "p_equivalence": None,
        }
        view.snapshots[j] = look
        if test.se == 0.0 and abs(test.margin) < look["resolution"]:
            look["verdict"] = (
                f"not judged (no spread, and a difference below the metric's resolution {look['resolution']:g})"
            )
            continue  # p 1 at this look: no evidence either way
        difference.p[j] = look["p_value"] = max(two_sided(test), floor)
        if max(a.n, b.n) <= PERMUTATION_MAX_N:
            up, down = (permutation_p(a.values, b.values, s * sign) for s in (1.0, -1.0))
            look["p_permutation"], look["p_permutation_reversed"] = min(1.0, 2 * min(up, down)), down
            difference.p_permutation[j] = look["p_permutation"]
        if equivalence is not None:
            one_sided_floor = 1.0 / math.comb(a.n + b.n, a.n)
            equivalence.p[j] = look["p_equivalence"] = max(tost(a, b, view.delta), one_sided_floor)
    if view.snapshots:
        _show_look(view, max(view.snapshots))
    else:
        have = min(len(samples[0]), len(samples[1]))
        view.verdict = (
            f"not judged ({have} of {looks[0]} design seeds run at the first look; the design names {looks[-1]})"
        )
    return members


def _prepare_time(
    spec: Spec, claim: Claim, view: ClaimView, index: int, scale: str, root: Path | None, digest: str, sign: float
) -> list[Hypothesis]:
    """A time claim from its interleaved ratios (see the module): margin = sign * mean log ratio (positive: `row`
    better), the sign-flip test two-sided, TOST against log(1 + δ) where the paper's ratio exceeds it."""
    from scipy import stats

    from repro.timing import read_timing

    difference = Hypothesis(index, "difference")
    relative = math.log1p(view.delta)
    testable = view.ratio_paper is not None and view.ratio_paper > 0 and abs(math.log(view.ratio_paper)) > relative
    if view.ratio_paper is not None and view.ratio_paper > 0:
        view.paper_effect = sign * math.log(view.ratio_paper)
    equivalence = Hypothesis(index, "equivalence") if testable else None
    members = [difference] + ([equivalence] if equivalence else [])
    record = read_timing(spec, claim, scale, root)
    if record is None:
        view.verdict = f"not judged (no interleaved timing record: repro run {spec.id} --scale {scale} --timing)"
        return members
    if record.get("design_hash", "") != digest:
        made = record.get("design_hash") or ""
        view.verdict = (
            "not judged (pre-design timing record: measure it again under the design)"
            if not made
            else f"not judged (timing record of another design {made}: measure it again)"
        )
        return members
    logs = [math.log(r) for r in record["ratios"]]
    x = [sign * v for v in logs]
    k = len(x)
    mean = statistics.fmean(logs)
    margin = sign * mean
    sd = statistics.stdev(x) if k > 1 else 0.0
    se, df = sd / math.sqrt(k), k - 1
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se if se > 0 else 0.0
    test = Welch(margin, se, df, log_ratio_p(x), margin - half, margin + half)
    last = (view.looks or 1) - 1  # one measurement, judged at the design's last look
    view.test, view.look, view.margin, view.n, view.pairs = test, last + 1, margin, (k, k), k
    view.ci_low, view.ci_high = margin - half, margin + half
    view.ratio = math.exp(mean)
    view.ratio_ci_low, view.ratio_ci_high = math.exp(mean - half), math.exp(mean + half)
    view.p_one_sided, view.p_reversed = test.p_value, log_ratio_p([-v for v in x])
    difference.p[last] = view.p_value = min(1.0, 2 * min(view.p_one_sided, view.p_reversed))
    if equivalence is not None:
        equivalence.p[last] = view.p_equivalence = max(
            log_ratio_p([v + relative for v in x]), log_ratio_p([relative - v for v in x])
        )
    return members


def _design_samples(
    results: Mapping[str, Result | None], claim: Claim, column: str, seeds: tuple[int, ...], digest: str
) -> tuple[tuple[list[float], list[float]], str | None]:
    """Each row's values at the design's seeds, in the design's order, as far as the prefix is complete and made
    under the design; or why none can judge."""
    out = []
    for name in (claim.row, claim.over):
        result = results.get(name)
        if result is None or column not in result.metrics:
            return ([], []), "no results"
        per_seed = _per_seed(result, column)
        made = {s: result.design_hash_of(s) for s in result.seeds}
        if not any(h == digest for h in made.values()):
            others = sorted({h for h in made.values() if h and h != digest})
            if others:
                return ([], []), f"{name}: results of another design ({', '.join(others)}); `repro check` names them"
            return ([], []), f"pre-design results of {name}: run them again under the design"
        values = []
        for seed in seeds:
            if seed not in per_seed or made.get(seed) != digest:
                break
            values.append(per_seed[seed])
        out.append(values)
    return (out[0], out[1]), None


def _per_seed(result: Result, column: str) -> dict[int, float]:
    per_seed = result.extra.get("per_seed") if isinstance(result.extra, dict) else None
    if not isinstance(per_seed, list) or len(per_seed) != len(result.seeds):
        return {}
    out = {}
    for seed, run in zip(result.seeds, per_seed):
        value = run.get(column) if isinstance(run, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[seed] = float(value)
    return out


def _sample(values: Sequence[float]) -> Sample:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Sample(statistics.fmean(values), std, len(values), tuple(values))


# --- the family -------------------------------------------------------------------------------------------------


def _decide(views: list[ClaimView], hypotheses: list[Hypothesis], levels: tuple[float, ...]) -> None:
    """Holm over the whole family at each look's level; a claim keeps the verdict of the first look that decided it."""
    m = len(hypotheses)
    for v in views:
        v.m = m
    decided: dict[int, int] = {}  # claim -> the look that decided it
    for j, level in enumerate(levels):
        if not any(j in h.p for h in hypotheses):
            continue
        adjusted = holm([h.p.get(j, 1.0) for h in hypotheses])
        exact = holm([h.p_permutation.get(j, h.p.get(j, 1.0)) for h in hypotheses])
        for h, p_adj, p_exact in zip(hypotheses, adjusted, exact):
            v = views[h.claim]
            if h.claim in decided or j not in h.p:
                continue
            if j in v.snapshots:
                _show_look(v, j)
            v.m, v.level, v.look = m, level, j + 1
            if h.kind == "difference":
                v.p_adjusted = p_adj
            else:
                v.p_equivalence_adjusted = p_adj
            if h.kind == "difference" and p_adj < level and v.margin:
                v.kind, v.verdict = ("holds", "holds") if v.margin > 0 else ("reversed", "reversed")
                if h.p_permutation and p_exact >= level:
                    v.flags.append(
                        f"Welch and the exact permutation test disagree (two-sided p {fmt_p(v.p_value)} vs "
                        f"{fmt_p(v.p_permutation)}; Holm {fmt_p(p_adj)} vs {fmt_p(p_exact)} at level {level:.3g})"
                    )
                decided[h.claim] = j
        for h in hypotheses:  # equivalence only where the difference test did not decide the claim at this look
            v = views[h.claim]
            if h.kind != "equivalence" or h.claim in decided or j not in h.p:
                continue
            if v.p_equivalence_adjusted < level:
                within = f"±{v.delta:.0%} (ratio)" if v.method == "interleaved ratio" else f"δ = {v.delta:.3g}"
                v.kind, v.verdict = "equivalent", f"equivalent within {within}"
                decided[h.claim] = j
    for i, v in enumerate(views):
        if i in decided or v.p_value is None:
            continue
        testable = any(h.claim == i and h.kind == "equivalence" for h in hypotheses)
        level = v.level if v.level is not None else levels[-1]
        v.detectable = None if v.test is None else detectable_effect(v.test, level / max(m, 1))
        if not testable and v.paper_effect is not None and v.delta is not None:
            effect = v.paper_effect if v.method != "interleaved ratio" else math.expm1(abs(v.paper_effect))
            v.kind = "not testable"
            below = "<" if abs(effect) < v.delta else "is not above"  # the rule: an effect that exceeds δ
            v.verdict = f"not testable at this δ (the paper's effect {abs(effect):.3g} {below} δ = {v.delta:.3g})"
            continue
        v.kind = "underpowered"
        # before the design's last look the claim is undecided so far: its next look adds seeds
        so_far = f" at look {v.look} of {v.looks}" if v.look and v.looks and v.look < v.looks else ""
        floor = _floor(v)
        if floor is not None and floor >= level / max(m, 1):
            what = f"{v.pairs} ratios" if v.method == "interleaved ratio" else f"{v.n[0]}, {v.n[1]} seeds"
            v.verdict = (
                f"underpowered{so_far} ({what} cannot reach p < {level / max(m, 1):.2g}: the exact test's smallest "
                f"p is {floor:.2g})"
            )
        elif v.method == "interleaved ratio":
            words = "–" if v.detectable is None else f"{math.expm1(v.detectable):.1%}"
            v.verdict = f"underpowered{so_far} (the smallest effect these {v.pairs} ratios could detect: {words})"
        else:
            words = "–" if v.detectable is None else f"{v.detectable:.3g}"
            v.verdict = f"underpowered{so_far} (the smallest effect these seeds could detect: {words})"


def _floor(v: ClaimView) -> float | None:
    """The smallest two-sided p the claim's exact test can give: permutations of its seeds, or sign flips of its
    K ratios (up to SIGN_FLIP_MAX_K; a t-test above has none)."""
    if v.method == "interleaved ratio":
        return None if v.pairs is None or v.pairs > SIGN_FLIP_MAX_K else min(1.0, 2.0 / 2**v.pairs)
    return None if v.n is None else permutation_floor(*v.n)


def _apply_control(claim: Claim, view: ClaimView, scale: str | None, root: Path | None) -> None:
    """A claim whose positive control did not pass says nothing about the mechanism, whatever its p."""
    if claim.control is None:
        return
    view.control = control_status(claim.control, scale, root)
    if view.control != "passed" and not view.verdict.startswith("not judged"):
        how = "failed" if view.control == "failed" else "not run"
        view.kind, view.verdict = "uninformative", f"uninformative (control {how}: {claim.control})"


def control_status(ident: str, scale: str | None, root: Path | None = None) -> str:
    """passed (every claim of the control's spec holds at `scale`), failed (one is decided otherwise, or cannot be
    decided by its design's seeds), or not run (one has no judgeable results yet)."""
    from repro.errors import ReproError
    from repro.results import read_results
    from repro.specs import resolve

    try:
        control = resolve(ident)
    except ReproError:
        return "not run"
    if scale is None or not control.claims:
        return "not run"
    records = read_results(control, root=root)
    judged = judge_table(control, {r.name: records.get((r.name, scale)) for r in control.rows}, scale, root, False)
    kinds = [v.kind for v in judged.claims]
    if all(k == "holds" for k in kinds):
        return "passed"
    if any(k == "not judged" for k in kinds):
        return "not run"
    return "failed"


# --- the statistics ---------------------------------------------------------------------------------------------


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: the i-th smallest of m p-values times (m - i + 1), made monotone, capped at 1.
    The same numbers as statsmodels' `multipletests(method="holm")` (the tests compare them); written out here
    because that function runs a full garbage collection on every call (about 0.1 s), once per look of a table."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def two_sided(test: Welch) -> float:
    """The two-sided p of Welch's test from its one-sided p in the claimed direction."""
    if test.se == 0.0:
        return 0.0 if test.margin != 0 else 1.0
    return min(1.0, 2 * min(test.p_value, 1.0 - test.p_value))


def _other_side(test: Welch) -> float:
    if test.se == 0.0:
        return 0.0 if test.margin < 0 else 1.0
    return 1.0 - test.p_value


def permutation_floor(na: int, nb: int) -> float:
    """The smallest two-sided p the exact permutation test of na and nb seeds can give: 1 / C(na + nb, na), twice
    that when na == nb (a relabelling and its mirror give the same |difference|)."""
    return min(1.0, (2.0 if na == nb else 1.0) / math.comb(na + nb, na))


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


def tost(a: Sample, b: Sample, delta: float) -> float:
    """Two one-sided tests of |mean(a) - mean(b)| < delta, Welch (statsmodels' ttost_ind, usevar="unequal"): the
    larger of the two one-sided p-values. Rows without spread: 0 inside the margin, 1 outside."""
    difference = a.mean - b.mean
    if a.std == 0.0 and b.std == 0.0:
        return 0.0 if abs(difference) < delta else 1.0
    from statsmodels.stats.weightstats import ttost_ind

    return float(ttost_ind(list(a.values), list(b.values), -delta, delta, usevar="unequal")[0])


def detectable_effect(test: Welch, level: float, power: float = POWER) -> float | None:
    """The smallest true difference a two-sided Welch test at `level` detects (in the claimed direction) with
    `power`, with these seeds' standard error and df: the exact noncentral t (scipy.stats.nct), solved for the
    noncentrality."""
    from statistics import NormalDist

    from scipy import optimize, special  # scipy.stats.t.ppf and nct.sf call these

    if test.se == 0.0 or not math.isfinite(test.df):
        return None
    critical = float(special.stdtrit(test.df, 1 - level / 2))

    def short(nc: float) -> float:
        return 1.0 - float(special.nctdtr(test.df, nc, critical)) - power

    guess = critical + NormalDist().inv_cdf(power)  # the normal approximation, to bracket the root
    low, high = 0.5 * guess, 1.5 * guess + 1.0
    while short(high) < 0:
        low, high = high, 2 * high
    while low > 0 and short(low) > 0:
        low = low / 2 if low > 1e-3 else 0.0
    return optimize.brentq(short, low, high, xtol=1e-10) * test.se


def permutation_p(a: Sequence[float], b: Sequence[float], sign: float = 1.0) -> float:
    """Exact one-sided permutation test of `sign * (mean(a) - mean(b))`: the share of the relabellings of the
    pooled seeds whose difference is at least the observed one (the observed labelling included), with a relative
    tolerance so that float ties count as ties."""
    import numpy as np

    pooled = np.asarray([*a, *b], dtype=float)
    na, nb, total = len(a), len(b), float(pooled.sum())
    observed = sign * (statistics.fmean(a) - statistics.fmean(b))
    sums = pooled[_relabellings(na + nb, na)].sum(axis=1)
    diffs = sign * (sums / na - (total - sums) / nb)
    tolerance = 1e-9 * max(1.0, float(np.abs(pooled).max()))
    return float(np.mean(diffs >= observed - tolerance))


@functools.lru_cache(maxsize=64)
def _relabellings(total: int, na: int):
    """Every choice of `na` of `total` pooled seeds as the first row's, as an index array (read-only, shared)."""
    import numpy as np

    picks = np.asarray(list(itertools.combinations(range(total), na)), dtype=np.int64)
    picks.setflags(write=False)
    return picks


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def seed_sample(result: Result | None, column: str) -> Sample:
    """The per-seed values a record carries (`extra.per_seed`), or its mean, std and seed count."""
    if result is None or column not in result.metrics:
        return Sample(math.nan, math.nan, 0)
    values = list(_per_seed(result, column).values())
    if values:
        return _sample(values)
    n = max(len(result.seeds), 1)
    std = result.std.get(column) if result.std else None
    if n > 1 and std is None:
        n = 1
    return Sample(float(result.metrics[column]), float(std or 0.0), n)


def welch(a: Sample, b: Sample, sign: float = 1.0, confidence: float | None = None) -> Welch:
    """Welch's unequal-variance t-test of `sign * (a - b) > 0` from two rows' summary statistics (one-sided p).

    df is the Welch–Satterthwaite approximation; the interval is two-sided at `confidence`.
    """
    from scipy import special  # the functions scipy.stats.t calls, without its per-call argument checks

    confidence = CONFIDENCE if confidence is None else confidence
    margin = sign * (a.mean - b.mean)
    va, vb = a.std**2 / a.n, b.std**2 / b.n
    se = math.sqrt(va + vb)
    if se == 0.0:  # every seed gave the same value on both rows: the difference is exact
        p = 0.0 if margin > 0 else 1.0 if margin < 0 else 0.5
        return Welch(margin, 0.0, math.inf, p, margin, margin)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    p = float(special.stdtr(df, -margin / se))  # t.sf(margin / se, df)
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se  # t.ppf
    return Welch(margin, se, df, p, margin - half, margin + half)


def fmt_p(p: float | None) -> str:
    if p is None or math.isnan(p):
        return "–"
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}" if p < 0.1 else f"{p:.2f}"
