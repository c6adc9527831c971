"""Time claims judged from interleaved ratios in one process (repro.timing, repro.nn.paired_timing, claims.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from repro.nn.paired_timing import TimedStep, balanced_order, interleaved_ratios
from repro.report.claims import judge_claims, log_ratio_p
from repro.report.export import claim_to_json
from repro.specs import resolve as load_spec
from repro.timing import timed_claims, timing_path
from repro.utils import write_json_atomic

SPEC = "psac-table4-bilstm"


def test_sign_flip_p_by_hand():
    # 8 sign patterns of (1, 2, 0.5); sums >= the observed 2.5: (+1 +2 +0.5) = 3.5 and (+1 +2 -0.5) = 2.5
    assert log_ratio_p([1.0, 2.0, -0.5]) == pytest.approx(2 / 8)
    assert log_ratio_p([0.1] * 8) == pytest.approx(1 / 256)  # every ratio one way: the smallest p at K = 8
    assert log_ratio_p([-0.1] * 8) == pytest.approx(1.0)


class FakeClock:
    """`time.perf_counter` for repro.nn.paired_timing: time moves only when a step says how long it took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    import repro.nn.paired_timing as paired

    fake = FakeClock()
    monkeypatch.setattr(paired.time, "perf_counter", fake)
    return fake


def test_balanced_order_and_the_ratio_of_a_step_taking_four_times_as_long(clock):
    assert balanced_order(4) == ["AB", "BA", "AB", "BA"]
    calls = []

    def slow():
        calls.append("A")
        clock.spend(0.004)

    def fast():
        calls.append("B")
        clock.spend(0.001)

    out = interleaved_ratios(slow, fast, pairs=4, warmup=1)
    assert calls == ["A", "B", "A", "B", "B", "A", "A", "B", "B", "A"]
    assert out["ratios"] == pytest.approx([4.0] * 4)


def _write(spec, claim, root, ratios, equivalence=0.05, design=None):
    digest = spec.design_hash("synthetic") if design is None else design
    record = {"ratios": ratios, "equivalence": equivalence, "design_hash": digest}
    write_json_atomic(timing_path(spec, claim, "synthetic", root), record)


def _views(spec, root):
    import shutil

    from repro.paths import REPO_DIR

    # the time claims' positive control (psac-control-vpsa-cost) is judged from its committed records, copied beside
    control = Path("results/psac/psac-control-vpsa-cost")
    shutil.copytree(REPO_DIR / control, root / control.relative_to("results"), dirs_exist_ok=True)
    return {v.text: v for v in judge_claims(spec, {}, "synthetic", root)}


def test_tiny_models_k_times_the_work_judged_slower(tmp_path, clock):
    """A model doing 16x the work of the other is judged slower; the claim that it is faster: reversed. The clock
    counts each step's multiply-adds (1 ns each), so the test says nothing about this machine's speed."""
    torch.manual_seed(0)

    def step(width):
        model = torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))
        batch = {"x": torch.randn(256, 64)}
        work = 256 * (64 * width + width)

        def loss(m, b):
            clock.spend(work * 1e-9)
            return m(b["x"]).pow(2).mean()

        return TimedStep(model, batch, loss, torch.optim.SGD(model.parameters(), 0.01))

    out = interleaved_ratios(step(4096), step(256), pairs=16, warmup=2)
    assert out["ratios"] == pytest.approx([16.0] * 16)
    spec = load_spec(SPEC)
    claim = timed_claims(spec)[0]
    _write(spec, claim, tmp_path, out["ratios"])
    view = _views(spec, tmp_path)[claim.text]
    assert view.kind == "reversed" and view.ratio > 1 and view.method == "interleaved ratio"


FASTER = [0.8, 0.85, 0.75, 0.82, 0.79, 0.81, 0.78, 0.8, 0.83, 0.77, 0.8, 0.81]
EQUAL = [1.001, 0.999, 1.002, 0.998, 1.0, 1.001, 0.999, 1.0, 1.0005, 0.9995, 1.0, 1.001]


def test_ratio_statistics_verdicts_and_json(tmp_path):
    spec = load_spec(SPEC)
    faster, equal, noisy, missing = timed_claims(spec)
    _write(spec, faster, tmp_path, FASTER)
    _write(spec, equal, tmp_path, EQUAL)
    _write(spec, noisy, tmp_path, [1.3, 0.7, 1.2, 0.8])
    views = _views(spec, tmp_path)
    v = views[faster.text]
    logs = [math.log(r) for r in FASTER]
    assert v.ratio == pytest.approx(math.exp(sum(logs) / 12))  # the geometric mean
    assert v.margin == pytest.approx(-sum(logs) / 12)  # lower is better: positive when the row is faster
    assert v.ratio_ci_low < v.ratio < v.ratio_ci_high < 1
    # every ratio one way: the exact sign-flip test's smallest two-sided p, 2 / 2^12
    assert v.p_value == pytest.approx(2 / 2**12) and v.kind == "holds" and v.n == (12, 12)
    assert v.m == 16 and v.p_adjusted <= 16 * v.p_value  # one Holm family over the table's 8 claims
    assert views[equal.text].kind == "equivalent" and "5%" in views[equal.text].verdict
    noisy_view = views[noisy.text]
    assert noisy_view.kind == "underpowered" and "4 ratios cannot reach" in noisy_view.verdict
    assert views[missing.text].kind == "not judged" and "--timing" in views[missing.text].verdict
    assert views[missing.text].p_value is None and views[missing.text].ratio_paper == pytest.approx(74 / 83)
    data = claim_to_json(v)
    assert data["test"] == "interleaved ratio" and data["pairs"] == 12
    for key in ("ratio", "ratio_paper", "p_value", "p_adjusted", "ratio_ci_low", "ratio_ci_high", "verdict_kind"):
        assert data[key] is not None
    accuracy = claim_to_json(views[spec.claims[0].text])
    assert accuracy["test"] == "welch" and accuracy["pairs"] is None


def test_a_timing_record_of_no_or_another_design_judges_nothing(tmp_path):
    spec = load_spec(SPEC)
    claim = timed_claims(spec)[0]
    for made, words in (("", "pre-design timing record"), ("0123456789ab", "another design 0123456789ab")):
        _write(spec, claim, tmp_path, FASTER, design=made)
        view = _views(spec, tmp_path)[claim.text]
        assert view.kind == "not judged" and words in view.verdict


def test_equal_models_never_hold(tmp_path):
    """Ratios of equal models, spread both ways around 1: equivalent when tight, underpowered when noisy, never
    holds nor reversed."""
    import random

    spec = load_spec(SPEC)
    claim = timed_claims(spec)[0]
    rng = random.Random(0)
    for spread in (0.005, 0.02, 0.1, 0.3):
        noise = [abs(rng.gauss(0.0, spread)) for _ in range(5)]
        _write(spec, claim, tmp_path, [math.exp(e * s) for e in noise for s in (1, -1)])
        kind = _views(spec, tmp_path)[claim.text].kind
        assert kind in ("equivalent", "underpowered"), spread
    assert kind == "underpowered"  # the noisiest


def test_unreadable_record_not_judged(tmp_path):
    spec = load_spec(SPEC)
    claim = timed_claims(spec)[0]
    _write(spec, claim, tmp_path, [0.9, -1.0])
    with pytest.warns(UserWarning, match="unreadable timing record"):
        view = _views(spec, tmp_path)[claim.text]
    assert view.kind == "not judged"
