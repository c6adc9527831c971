"""Claims judged with Welch's t-test over the seeds of the two rows a claim compares."""

from __future__ import annotations

import json
import math
import re

import pytest

from repro import results
from repro.cli import app
from repro.report import ALPHA, build_view, render_markdown
from repro.specs import resolve
from tests.conftest import SPEC_TEXT, write_spec

CLAIMS = """claims:
  - {text: "ours beats cited on Num", row: Ours*, over: Cited, column: Num}
"""


def _write(spec, row: str, values: list[float], scale: str = "synthetic") -> None:
    per_seed = [{"Num": v, "All": 1.0} for v in values]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else None
    result = results.Result(
        spec=spec.id,
        paper=spec.paper,
        row=row,
        scale=scale,
        split="val",
        metrics={"Num": mean, "All": 1.0},
        std={"Num": std, "All": 0.0} if std else {},
        seeds=list(range(len(values))),
        extra={"per_seed": per_seed},
    )
    results.write_result(result, spec)


@pytest.fixture
def claim_spec(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS)
    return resolve("t1-demo")


def test_welch_matches_a_hand_computed_example(claim_spec):
    # Ours* 60, 62, 64: mean 62, variance 4. Cited 55, 56, 57: mean 56, variance 1.
    # se = sqrt(4/3 + 1/3) = sqrt(5/3); t = 6 / se = 4.6476
    # df = (5/3)^2 / ((4/3)^2 / 2 + (1/3)^2 / 2) = (25/9) / (17/18) = 50/17 = 2.941
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    se, df = math.sqrt(5 / 3), 50 / 17
    assert claim.margin == pytest.approx(6.0)
    assert claim.n == (3, 3)
    # p = P(T_df >= 4.6476), one-sided; the 90% interval is 6 ± t_{0.95, df} * se, t_{0.95, 2.941} = 2.373:
    # its lower end is the one-sided 95% bound, above 0 as the claim holds at alpha = 0.05
    assert claim.p_value == pytest.approx(0.00981, abs=5e-5)
    assert claim.ci_low == pytest.approx(6 - 2.373 * se, abs=0.01)
    assert claim.ci_high == pytest.approx(6 + 2.373 * se, abs=0.01)
    assert claim.ci_low > 0
    from scipy import stats

    reference = stats.ttest_ind([60, 62, 64], [55, 56, 57], equal_var=False, alternative="greater")
    assert claim.p_value == pytest.approx(reference.pvalue)
    assert stats.t.sf(6 / se, df) == pytest.approx(claim.p_value)
    assert claim.p_value < ALPHA and claim.verdict == "holds"


def test_one_seed_is_not_judged(claim_spec):
    _write(claim_spec, "Ours*", [90.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.verdict == "not judged (1 seed)"
    assert claim.margin == pytest.approx(34.0) and claim.p_value is None and claim.n == (1, 3)


def test_significant_the_other_way_is_reversed(claim_spec):
    _write(claim_spec, "Ours*", [50.0, 51.0, 52.0])
    _write(claim_spec, "Cited", [60.0, 61.0, 62.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.verdict == "reversed" and claim.margin == pytest.approx(-10.0)
    assert claim.p_value > 1 - ALPHA and claim.ci_high < 0


def test_overlapping_seeds_are_underpowered_with_the_detectable_effect(claim_spec):
    _write(claim_spec, "Ours*", [55.0, 58.0, 61.0])
    _write(claim_spec, "Cited", [54.0, 56.0, 60.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.kind == "underpowered" and claim.verdict.startswith("underpowered (the smallest effect these seeds")
    assert f"{claim.detectable:.3g}" in claim.verdict and claim.detectable > claim.delta
    assert claim.ci_low < 0 < claim.ci_high


def test_lower_is_better_turns_the_test_around(sandbox):
    write_spec(sandbox, SPEC_TEXT.replace("key: number, better: higher", "key: number, better: lower") + CLAIMS)
    spec = resolve("t1-demo")
    _write(spec, "Ours*", [50.0, 51.0, 52.0])
    _write(spec, "Cited", [60.0, 61.0, 62.0])
    claim = build_view(spec, "synthetic").claims[0]
    assert claim.verdict == "holds" and claim.margin == pytest.approx(10.0)


def test_claims_in_json_keep_their_keys_and_add_the_test(claim_spec, runner):
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    out = runner.invoke(app, ["table", "t1-demo", "--scale", "synthetic", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    claim = data["claims"][0]
    assert {"text", "paper", "verdict", "margin", "spread", "p_value", "ci_low", "ci_high", "n"} <= set(claim)
    assert claim["verdict"] == "holds" and claim["n"] == [3, 3] and data["alpha"] == ALPHA
    assert {"p_adjusted", "verdict_kind", "p_equivalence", "delta", "detectable", "p_permutation", "flags"} <= set(
        claim
    )
    assert claim["p_adjusted"] == pytest.approx(claim["p_value"]) and claim["verdict_kind"] == "holds"
    assert "holm" in data["multiplicity"]
    assert claim["spread"] == pytest.approx(2.0 + 1.0)


def test_alpha_is_printed_with_the_claims(claim_spec):
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    md = re.sub(r" +", " ", render_markdown(build_view(claim_spec, "synthetic")))
    assert f"α = {ALPHA:g}" in md
    # 3 seeds against 3: the exact permutation test cannot go below 1/20, so Welch's "holds" is flagged
    assert "| ours beats cited on Num | yes | holds ⚑ | +6.00 | [+2.94, +9.06] | 0.010 | 0.010 | 0.050 | 3, 3 |" in md
    assert "Holm" in md and "TOST" in md


def test_a_time_claim_shows_the_ratio_beside_the_papers(sandbox):
    text = SPEC_TEXT.replace("metric: vqa, key: number, better: higher", "metric: time, key: action, better: lower")
    write_spec(sandbox, text.replace("reported: {Num: 50.0", "reported: {Num: 80.0") + CLAIMS)
    spec = resolve("t1-demo")
    _write(spec, "Ours*", [30.0])
    _write(spec, "Cited", [40.0])
    claim = build_view(spec, "synthetic").claims[0]
    # judged from interleaved ratios (repro.timing), never from the rows' seeds: without a timing record, not judged
    assert claim.verdict.startswith("not judged (no interleaved timing record") and claim.margin is None
    assert claim.kind == "not judged" and claim.method == "interleaved ratio"
    assert claim.ratio == pytest.approx(0.75) and claim.ratio_paper == pytest.approx(54.86 / 80.0)
    md = re.sub(r" +", " ", render_markdown(build_view(spec, "synthetic")))
    assert "| ratio |" in md and "0.75 (paper 0.69)" in md


def test_claims_on_scores_have_no_ratio_column(claim_spec):
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    view = build_view(claim_spec, "synthetic")
    assert view.claims[0].ratio is None and "| ratio |" not in render_markdown(view)


# --- multiplicity, equivalence, power, small samples ------------------------------------------------


def _write_both(spec, row: str, num: list[float], all_: list[float]) -> None:
    per_seed = [{"Num": a, "All": b} for a, b in zip(num, all_)]
    import statistics

    result = results.Result(
        spec=spec.id,
        paper=spec.paper,
        row=row,
        scale="synthetic",
        split="val",
        metrics={"Num": statistics.fmean(num), "All": statistics.fmean(all_)},
        std={"Num": statistics.stdev(num), "All": statistics.stdev(all_)},
        seeds=list(range(len(num))),
        extra={"per_seed": per_seed},
    )
    results.write_result(result, spec)


TWO_CLAIMS = """claims:
  - {text: "ours beats cited on Num", row: Ours*, over: Cited, column: Num}
  - {text: "ours beats cited on All", row: Ours*, over: Cited, column: All}
"""


def test_holm_adjusts_within_the_table_and_the_verdict_uses_it(sandbox, runner):
    from repro.report.claims import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    write_spec(sandbox, SPEC_TEXT + TWO_CLAIMS)
    spec = resolve("t1-demo")
    # Num: raw one-sided p between 0.025 and 0.05 (holds alone); All: no difference (p about 0.5)
    _write_both(spec, "Ours*", [58.0, 60.0, 62.0, 61.0, 59.0, 63.0], [70.0, 71.0, 72.0, 70.5, 71.5, 71.0])
    _write_both(spec, "Cited", [58.0, 59.0, 58.0, 61.0, 56.0, 59.5], [70.0, 71.0, 72.0, 70.5, 71.5, 71.0])
    num, all_ = build_view(spec, "synthetic").claims
    assert 0.025 < num.p_value < ALPHA and num.p_adjusted == pytest.approx(2 * num.p_value)
    assert num.kind != "holds" and num.m == 2
    assert all_.p_adjusted == pytest.approx(all_.p_value)  # Holm: the larger p is kept (not below the smaller one's)
    from repro.report.claims import judge_claim

    assert (
        judge_claim(
            spec,
            spec.claims[0],
            {r: build_view(spec, "synthetic").rows[i].result for i, r in enumerate(["Cited", "Ours*"])},
        ).kind
        == "holds"
    )
    data = json.loads(runner.invoke(app, ["table", "t1-demo", "--scale", "synthetic", "--format", "json"]).output)
    assert [c["p_adjusted"] for c in data["claims"]] == pytest.approx([num.p_adjusted, all_.p_adjusted])
    assert "Holm" in render_markdown(build_view(spec, "synthetic"))


def test_equivalence_within_the_metric_default_margin(claim_spec):
    _write(claim_spec, "Ours*", [60.0, 60.1, 59.9, 60.0, 60.05, 59.95])
    _write(claim_spec, "Cited", [60.02, 60.12, 59.92, 60.02, 60.07, 59.97])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.delta == 1.0 and claim.delta_source == "metric default"
    assert claim.kind == "equivalent" and claim.verdict == "equivalent within δ = 1"
    assert claim.p_equivalence < ALPHA


def test_a_claims_own_margin_overrides_the_default(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS.replace("column: Num}", "column: Num, margin: 0.01}"))
    spec = resolve("t1-demo")
    assert spec.claims[0].margin == 0.01
    _write(spec, "Ours*", [60.0, 60.1, 59.9, 60.0, 60.05, 59.95])
    _write(spec, "Cited", [60.02, 60.12, 59.92, 60.02, 60.07, 59.97])
    claim = build_view(spec, "synthetic").claims[0]
    assert claim.delta == 0.01 and claim.delta_source == "claim" and claim.kind == "underpowered"


@pytest.mark.parametrize("margin", ["-1", "0", "nan", "yes", "[1]"])
def test_a_bad_margin_is_refused_naming_the_line(sandbox, margin):
    from repro.errors import ReproError

    write_spec(sandbox, SPEC_TEXT + CLAIMS.replace("column: Num}", f"column: Num, margin: {margin}}}"))
    with pytest.raises(ReproError, match="margin"):
        resolve("t1-demo")


def test_the_detectable_effect_comes_from_the_exact_noncentral_t():
    from scipy import stats

    from repro.report.claims import Sample, detectable_effect, welch

    test = welch(Sample(0.0, 1.0, 6), Sample(0.0, 1.0, 6))
    d = detectable_effect(test, ALPHA)
    # 6 seeds a row, sd 1: 1.54 sd (a normal approximation says 1.44)
    assert d == pytest.approx(1.5436, abs=1e-3)
    power = stats.nct.sf(stats.t.ppf(1 - ALPHA, 10), 10, d / math.sqrt(2 / 6))
    assert power == pytest.approx(0.8, abs=1e-6)


def test_the_exact_permutation_test_matches_scipy():
    from scipy import stats

    from repro.report.claims import permutation_p

    assert permutation_p([3.0, 4.0, 5.0], [0.0, 1.0, 2.0]) == pytest.approx(1 / 20)
    a, b = [55.0, 71.0, 56.0, 70.0, 54.0], [50.0, 51.0, 52.0, 53.0, 54.5, 49.0]
    reference = stats.permutation_test(
        (a, b),
        lambda x, y: sum(x) / len(x) - sum(y) / len(y),
        permutation_type="independent",
        alternative="greater",
        n_resamples=10**6,
    )
    assert permutation_p(a, b) == pytest.approx(reference.pvalue)
    assert permutation_p(a, b, -1.0) == pytest.approx(
        stats.permutation_test(
            (a, b),
            lambda x, y: sum(x) / len(x) - sum(y) / len(y),
            permutation_type="independent",
            alternative="less",
            n_resamples=10**6,
        ).pvalue
    )


def test_welch_and_permutation_disagreeing_is_flagged(claim_spec):
    # 3 seeds against 3: Welch gives p 0.010, the exact permutation test cannot go below 1/20
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.p_value < ALPHA and claim.p_permutation == pytest.approx(0.05)
    assert claim.kind == "holds" and claim.flags and "permutation" in claim.flags[0]
    assert "holds ⚑" in render_markdown(build_view(claim_spec, "synthetic"))
    # 6 against 6, well apart: both agree, no flag
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0, 61.0, 63.0, 62.5])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0, 55.5, 56.5, 54.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.kind == "holds" and not claim.flags


def test_no_verdict_from_a_difference_below_the_resolution_of_rows_without_spread(claim_spec):
    # every seed of both rows identical, a last-bit difference apart (psac Count at chance)
    _write(claim_spec, "Ours*", [60.0 + 1e-12] * 6)
    _write(claim_spec, "Cited", [60.0] * 6)
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.kind == "not judged" and "below the metric's resolution" in claim.verdict
    assert claim.p_value is None and claim.p_adjusted is None
