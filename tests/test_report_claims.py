"""Claims judged under the spec's design: one Holm family per table, two-sided Welch floored at the exact permutation
test, TOST where the paper's effect exceeds δ, the design's seeds and looks only (repro.report.claims, repro.design).

Every statistic is checked against scipy or statsmodels computed here from the raw seeds, so that a wrong line in
claims.py (Holm off a family, a verdict on the raw p, the detectable effect at α, TOST's min) fails a test that
names the statistic."""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind

from repro import results
from repro.cli import app
from repro.report import build_view, render_markdown
from repro.report.claims import permutation_floor
from repro.specs import resolve
from tests.conftest import SPEC_TEXT, write_spec

SEEDS = [0, 1, 2, 3, 4, 5]
DESIGN = """design:
  fixed: "2026-11-28"
  alpha: 0.05
  test: welch
  delta:
    Num: {value: 1.0, source: reason, why: "one accuracy point"}
    All: {value: 1.0, source: reason, why: "one accuracy point"}
  seeds: {synthetic: [0, 1, 2, 3, 4, 5]}
"""
CLAIMS = """claims:
  - {text: "ours beats cited on Num", row: Ours*, over: Cited, column: Num}
"""
TWO_CLAIMS = """claims:
  - {text: "ours beats cited on Num", row: Ours*, over: Cited, column: Num}
  - {text: "ours beats cited on All", row: Ours*, over: Cited, column: All}
"""


def _record(spec, row: str, num: list[float], all_: list[float] | None = None, seeds=None, design: str | None = None):
    all_ = all_ if all_ is not None else [1.0] * len(num)
    seeds = seeds if seeds is not None else list(range(len(num)))
    digest = spec.design_hash("synthetic") if design is None else design
    per_seed = [{"Num": a, "All": b} for a, b in zip(num, all_)]
    result = results.Result(
        spec=spec.id,
        paper=spec.paper,
        row=row,
        scale="synthetic",
        split="val",
        metrics={"Num": statistics.fmean(num), "All": statistics.fmean(all_)},
        std={"Num": statistics.stdev(num), "All": statistics.stdev(all_)} if len(num) > 1 else {},
        seeds=seeds,
        extra={"per_seed": per_seed},
        design_hashes=[digest] * len(num),
        config_hash="0123abcd",
    )
    results.write_result(result, spec)


@pytest.fixture
def claim_spec(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS + DESIGN)
    return resolve("t1-demo")


@pytest.fixture
def two_claims(sandbox):
    write_spec(sandbox, SPEC_TEXT + TWO_CLAIMS + DESIGN)
    return resolve("t1-demo")


def _claims(spec):
    return build_view(spec, "synthetic").claims


OURS = [60.0, 62.0, 64.0, 61.0, 63.0, 59.0]
CITED = [57.0, 58.5, 56.0, 59.0, 58.0, 57.5]


def test_welch_two_sided_matches_scipy_and_holds(claim_spec):
    _record(claim_spec, "Ours*", OURS)
    _record(claim_spec, "Cited", CITED)
    claim = _claims(claim_spec)[0]
    reference = stats.ttest_ind(OURS, CITED, equal_var=False)
    assert claim.p_value == pytest.approx(max(reference.pvalue, permutation_floor(6, 6)))
    assert claim.p_one_sided == pytest.approx(
        stats.ttest_ind(OURS, CITED, equal_var=False, alternative="greater").pvalue
    )
    assert claim.margin == pytest.approx(statistics.fmean(OURS) - statistics.fmean(CITED))
    assert claim.n == (6, 6) and claim.seeds_used == {"Ours*": SEEDS, "Cited": SEEDS}
    # one claim, its difference and equivalence tests (the paper's effect 4.86 > δ 1): a family of two
    assert claim.m == 2 and claim.p_adjusted == pytest.approx(min(1.0, 2 * claim.p_value))
    assert claim.kind == "holds" and claim.verdict == "holds"
    assert claim.design_hash == claim_spec.design_hash("synthetic") and claim.alpha == 0.05


def test_the_json_carries_the_design_the_family_and_one_verdict(claim_spec, runner):
    _record(claim_spec, "Ours*", OURS)
    _record(claim_spec, "Cited", CITED)
    out = runner.invoke(app, ["table", "t1-demo", "--scale", "synthetic", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    claim = data["claims"][0]
    for key in ("design_hash", "alpha", "delta", "delta_source", "seeds_used", "p_value", "p_adjusted", "verdict"):
        assert claim[key] is not None, key
    assert claim["delta_source"] == "a stated reason: one accuracy point"
    assert claim["control"] is None and claim["verdict_kind"] == "holds"
    assert data["family"] == ["claim 1 difference", "claim 1 equivalence"]
    assert data["design_hash"] == claim["design_hash"] and data["alpha"] == 0.05
    # the contract's older keys are still there
    assert {"text", "paper", "margin", "spread", "ci_low", "ci_high", "n", "p_equivalence", "detectable"} <= set(claim)


def test_results_from_before_the_design_judge_nothing(claim_spec):
    _record(claim_spec, "Ours*", OURS, design="")
    _record(claim_spec, "Cited", CITED, design="")
    claim = _claims(claim_spec)[0]
    assert claim.kind == "not judged" and "pre-design results" in claim.verdict and claim.p_value is None


def test_fewer_seeds_than_the_design_judge_nothing(claim_spec):
    _record(claim_spec, "Ours*", OURS[:4])
    _record(claim_spec, "Cited", CITED)
    claim = _claims(claim_spec)[0]
    assert claim.kind == "not judged" and "4 of 6 design seeds" in claim.verdict


def test_a_seed_beyond_the_design_changes_no_verdict(claim_spec):
    _record(claim_spec, "Ours*", OURS)
    _record(claim_spec, "Cited", CITED)
    before = _claims(claim_spec)[0]
    _record(claim_spec, "Ours*", OURS + [10.0, 11.0], seeds=SEEDS + [6, 7])  # two wild extra seeds
    _record(claim_spec, "Cited", CITED + [90.0, 95.0], seeds=SEEDS + [6, 7])
    after = _claims(claim_spec)[0]
    assert (after.verdict, after.p_value, after.p_adjusted, after.n) == (
        before.verdict,
        before.p_value,
        before.p_adjusted,
        before.n,
    )
    view = build_view(claim_spec, "synthetic")
    assert next(r for r in view.rows if r.name == "Ours*").n == 8  # shown in the table, never judged


def test_significant_the_other_way_is_reversed(claim_spec):
    _record(claim_spec, "Ours*", CITED)
    _record(claim_spec, "Cited", OURS)
    claim = _claims(claim_spec)[0]
    assert claim.verdict == "reversed" and claim.margin < 0 and claim.ci_high < 0


def test_lower_is_better_turns_the_test_around(sandbox):
    write_spec(
        sandbox, SPEC_TEXT.replace("key: number, better: higher", "key: number, better: lower") + CLAIMS + DESIGN
    )
    spec = resolve("t1-demo")
    _record(spec, "Ours*", CITED)
    _record(spec, "Cited", OURS)
    claim = _claims(spec)[0]
    assert claim.verdict == "holds" and claim.margin > 0


# --- the four statistics a planted one-line bug would break ----------------------------------------------------


def _family(spec_claims, a_values, b_values, delta, testable):
    """The table's family from the raw seeds, with scipy and statsmodels only: (difference p, equivalence p)."""
    floor = permutation_floor(len(a_values[0]), len(b_values[0]))
    one_floor = 1 / math.comb(len(a_values[0]) + len(b_values[0]), len(a_values[0]))
    ps = []
    for a, b, test_eq in zip(a_values, b_values, testable):
        ps.append(max(stats.ttest_ind(a, b, equal_var=False).pvalue, floor))
        if test_eq:
            ps.append(max(ttost_ind(a, b, -delta, delta, usevar="unequal")[0], one_floor))
    return ps, list(multipletests(ps, method="holm")[1])


def test_holm_family_includes_the_equivalence_tests(two_claims):
    """TOST's p is Holm-adjusted in the table's one family: equivalent on a raw p that the family does not support
    would be a wrong verdict."""
    num_a = [60.2, 60.2, 60.0, 59.9, 59.8, 60.0]
    num_b = [59.8, 59.8, 60.0, 60.0, 60.1, 59.9]
    all_a = [70.0, 70.0, 69.2, 70.3, 70.2, 71.2]
    all_b = [70.4, 70.2, 70.9, 70.4, 70.8, 70.1]
    _record(two_claims, "Ours*", num_a, all_a)
    _record(two_claims, "Cited", num_b, all_b)
    num, all_ = _claims(two_claims)
    raw, adjusted = _family(None, [num_a, all_a], [num_b, all_b], 1.0, [True, True])
    assert num.p_equivalence == pytest.approx(raw[1]) and all_.p_equivalence == pytest.approx(raw[3])
    assert num.p_equivalence_adjusted == pytest.approx(adjusted[1])
    assert all_.p_equivalence_adjusted == pytest.approx(adjusted[3])
    assert num.m == all_.m == 4
    # All: TOST alone would say equivalent (raw p < α), the family does not
    assert raw[3] < 0.05 <= adjusted[3] and all_.kind != "equivalent"
    assert num.kind == "equivalent" and num.verdict == "equivalent within δ = 1"


def test_reversed_is_decided_on_the_holm_adjusted_p(two_claims):
    """A wrong-direction verdict needs the adjusted p of the one family, not the raw one."""
    num_a = [58.9, 59.9, 57.9, 58.8, 59.7, 59.4]
    num_b = [59.7, 61.1, 59.1, 61.8, 60.2, 59.9]
    all_a = [70.1, 70.4, 70.9, 69.9, 69.8, 70.3]
    all_b = [69.6, 69.2, 70.4, 69.8, 70.6, 69.5]
    _record(two_claims, "Ours*", num_a, all_a)
    _record(two_claims, "Cited", num_b, all_b)
    num = _claims(two_claims)[0]
    raw, adjusted = _family(None, [num_a, all_a], [num_b, all_b], 1.0, [True, True])
    assert num.margin < 0 and num.p_value == pytest.approx(raw[0]) and num.p_adjusted == pytest.approx(adjusted[0])
    assert raw[0] < 0.05 <= adjusted[0]
    assert num.kind != "reversed"


def test_detectable_effect_is_at_holms_first_level_not_alpha(two_claims):
    num_a = [55.0, 58.0, 61.0, 57.0, 60.0, 56.0]
    num_b = [54.0, 56.0, 60.0, 57.5, 58.0, 55.0]
    _record(two_claims, "Ours*", num_a, [70.0, 71.0, 72.0, 70.5, 71.5, 71.0])
    _record(two_claims, "Cited", num_b, [70.0, 71.2, 72.0, 70.5, 71.5, 71.1])
    num = _claims(two_claims)[0]
    assert num.kind == "underpowered"
    va, vb = statistics.variance(num_a) / 6, statistics.variance(num_b) / 6
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 5 + vb**2 / 5)

    def detectable(level):  # two-sided at `level`, 80% power, noncentral t
        from scipy import optimize

        critical = stats.t.ppf(1 - level / 2, df)
        return optimize.brentq(lambda nc: stats.nct.sf(critical, df, nc) - 0.8, 0, 200) * se

    assert num.detectable == pytest.approx(detectable(0.05 / 4), rel=1e-6)  # m = 4: Holm's first level α/m
    assert num.detectable != pytest.approx(detectable(0.05), rel=1e-3)
    assert f"{num.detectable:.3g}" in num.verdict


def test_tost_takes_the_larger_of_its_two_one_sided_p_values(claim_spec):
    a = [59.7, 60.7, 60.6, 61.1, 60.8, 60.7]
    b = [60.2, 59.9, 60.0, 59.6, 60.2, 59.8]
    _record(claim_spec, "Ours*", a)
    _record(claim_spec, "Cited", b)
    claim = _claims(claim_spec)[0]
    p, lower, upper = ttost_ind(a, b, -1.0, 1.0, usevar="unequal")
    assert min(lower[1], upper[1]) < 0.01 < 0.05 < max(lower[1], upper[1])  # min would call it equivalent
    assert claim.p_equivalence == pytest.approx(max(lower[1], upper[1]))
    assert claim.kind != "equivalent"


def test_holm_matches_statsmodels():
    from repro.report.claims import holm

    for ps in ([0.01, 0.04, 0.03], [0.5, 0.001], [0.2, 0.2, 0.01, 0.049, 0.7]):
        assert holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))


# --- edge cases are verdicts -------------------------------------------------------------------------------------


def test_two_constant_rows_of_two_seeds_cannot_go_below_the_exact_floor(sandbox):
    design = DESIGN.replace("[0, 1, 2, 3, 4, 5]", "[0, 1]")
    write_spec(sandbox, SPEC_TEXT + CLAIMS + design)
    spec = resolve("t1-demo")
    _record(spec, "Ours*", [61.0, 61.0])
    _record(spec, "Cited", [60.0, 60.0])
    claim = _claims(spec)[0]
    assert claim.p_value == pytest.approx(1 / 3)  # 2 / C(4, 2), where Welch's se of 0 would say p = 0
    assert claim.kind == "underpowered" and "cannot reach" in claim.verdict


def test_a_column_without_delta_is_not_judged_and_nothing_else_breaks(sandbox):
    design = DESIGN.replace('    All: {value: 1.0, source: reason, why: "one accuracy point"}\n', "")
    write_spec(sandbox, SPEC_TEXT + TWO_CLAIMS + design)
    spec = resolve("t1-demo")
    _record(spec, "Ours*", OURS, [70.0, 71.0, 72.0, 70.5, 71.5, 71.0])
    _record(spec, "Cited", CITED, [70.0, 71.2, 72.0, 70.5, 71.5, 71.1])
    num, all_ = _claims(spec)
    assert all_.verdict == "not judged: no δ for vqa (set one in design.delta.All)"
    assert num.kind == "holds" and num.m == 2


def test_equivalent_only_where_the_paper_effect_exceeds_delta(sandbox):
    # the paper: Ours* 54.86 vs Cited 54.5 on Num, an effect of 0.36 < δ 1
    text = SPEC_TEXT.replace("reported: {Num: 50.0, All: 70.0}", "reported: {Num: 54.5, All: 70.0}")
    write_spec(sandbox, text + CLAIMS + DESIGN)
    spec = resolve("t1-demo")
    _record(spec, "Ours*", [60.0, 60.1, 59.9, 60.0, 60.05, 59.95])
    _record(spec, "Cited", [60.02, 60.12, 59.92, 60.02, 60.07, 59.97])
    claim = _claims(spec)[0]
    assert claim.kind == "not testable" and claim.verdict == "not testable at this δ (the paper's effect 0.36 < δ = 1)"
    assert claim.p_equivalence is None and claim.m == 1


@pytest.mark.parametrize("ours, cited", [(64.4, 63.4), (64.1, 63.1)])  # 1 + 7e-15 and 1 - 7e-15 in floats
def test_a_paper_effect_equal_to_delta_is_not_testable_whichever_way_the_floats_round(sandbox, ours, cited):
    text = SPEC_TEXT.replace("reported: {Num: 50.0, All: 70.0}", f"reported: {{Num: {cited}, All: 70.0}}")
    write_spec(sandbox, text.replace("reported: {Num: 54.86,", f"reported: {{Num: {ours},") + CLAIMS + DESIGN)
    spec = resolve("t1-demo")
    _record(spec, "Ours*", [60.0, 60.1, 59.9, 60.0, 60.05, 59.95])
    _record(spec, "Cited", [60.02, 60.12, 59.92, 60.02, 60.07, 59.97])
    claim = _claims(spec)[0]
    assert claim.paper_effect == 1.0 and claim.p_equivalence is None
    assert claim.verdict == "not testable at this δ (the paper's effect 1 is not above δ = 1)"


def test_no_verdict_from_a_difference_below_the_resolution_of_rows_without_spread(claim_spec):
    _record(claim_spec, "Ours*", [60.0 + 1e-12] * 6)
    _record(claim_spec, "Cited", [60.0] * 6)
    claim = _claims(claim_spec)[0]
    assert claim.kind == "not judged" and "below the metric's resolution" in claim.verdict


def test_without_a_design_nothing_is_judged(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS)
    spec = resolve("t1-demo")
    _record(spec, "Ours*", OURS, design="")
    _record(spec, "Cited", CITED, design="")
    claim = _claims(spec)[0]
    assert claim.kind == "not judged" and "no design block" in claim.verdict


def test_welch_and_permutation_disagreeing_is_flagged(sandbox):
    design = DESIGN.replace("[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 3, 4]")
    write_spec(sandbox, SPEC_TEXT + CLAIMS + design)
    spec = resolve("t1-demo")
    # 5 against 5, far apart: the exact test's smallest p is 2/252 = 0.0079, within the family's level 0.025
    _record(spec, "Ours*", [60.0, 62.0, 64.0, 61.0, 63.0])
    _record(spec, "Cited", [55.0, 56.0, 57.0, 55.5, 56.5])
    claim = _claims(spec)[0]
    assert claim.kind == "holds" and not claim.flags
    assert claim.p_permutation == pytest.approx(2 / 252)


def test_the_exact_permutation_test_matches_scipy():
    from repro.report.claims import permutation_p

    assert permutation_p([3.0, 4.0, 5.0], [0.0, 1.0, 2.0]) == pytest.approx(1 / 20)
    a, b = [55.0, 71.0, 56.0, 70.0, 54.0], [50.0, 51.0, 52.0, 53.0, 54.5, 49.0]
    for sign, alternative in ((1.0, "greater"), (-1.0, "less")):
        reference = stats.permutation_test(
            (a, b),
            lambda x, y: sum(x) / len(x) - sum(y) / len(y),
            permutation_type="independent",
            alternative=alternative,
            n_resamples=10**6,
        )
        assert permutation_p(a, b, sign) == pytest.approx(reference.pvalue)


def test_the_caption_states_the_verdict_order_and_the_design(claim_spec):
    _record(claim_spec, "Ours*", OURS)
    _record(claim_spec, "Cited", CITED)
    md = re.sub(r" +", " ", render_markdown(build_view(claim_spec, "synthetic")))
    assert "not judged (why) > uninformative" in md and "holds | reversed > equivalent" in md
    assert "design" in md and "Holm" in md
