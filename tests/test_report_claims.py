"""Claims judged with Welch's t-test over the seeds of the two rows a claim compares."""

from __future__ import annotations

import json
import math

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


def test_overlapping_seeds_are_not_decided(claim_spec):
    _write(claim_spec, "Ours*", [55.0, 58.0, 61.0])
    _write(claim_spec, "Cited", [54.0, 56.0, 60.0])
    claim = build_view(claim_spec, "synthetic").claims[0]
    assert claim.verdict.startswith("not decided (p = 0.")
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
    assert claim["spread"] == pytest.approx(2.0 + 1.0)


def test_alpha_is_printed_with_the_claims(claim_spec):
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    md = render_markdown(build_view(claim_spec, "synthetic"))
    assert f"α = {ALPHA:g}" in md
    assert "| ours beats cited on Num | yes | holds | +6.00 | [+2.94, +9.06] | 0.010 | 3, 3 |" in md


def test_a_time_claim_shows_the_ratio_beside_the_papers(sandbox):
    text = SPEC_TEXT.replace("metric: vqa, key: number, better: higher", "metric: time, key: action, better: lower")
    write_spec(sandbox, text.replace("reported: {Num: 50.0", "reported: {Num: 80.0") + CLAIMS)
    spec = resolve("t1-demo")
    _write(spec, "Ours*", [30.0])
    _write(spec, "Cited", [40.0])
    claim = build_view(spec, "synthetic").claims[0]
    assert claim.verdict == "not judged (1 seed)" and claim.margin == pytest.approx(10.0)
    assert claim.ratio == pytest.approx(0.75) and claim.ratio_paper == pytest.approx(54.86 / 80.0)
    md = render_markdown(build_view(spec, "synthetic"))
    assert "| ratio |" in md and "0.75 (paper 0.69)" in md


def test_claims_on_scores_have_no_ratio_column(claim_spec):
    _write(claim_spec, "Ours*", [60.0, 62.0, 64.0])
    _write(claim_spec, "Cited", [55.0, 56.0, 57.0])
    view = build_view(claim_spec, "synthetic")
    assert view.claims[0].ratio is None and "| ratio |" not in render_markdown(view)
