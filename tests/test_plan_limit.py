"""`repro run ID --scale paper --limit N --dry-run`: the GPU-hours count the share of the questions a partial run
trains on where the family can say it (psac, sa-m4c, mcan-pa, dsganet: same epochs over the first N questions), and
say plainly that the estimate is for the whole splits where it cannot (ace-rpe)."""

from __future__ import annotations

import pytest

from repro.cli import app
from repro.families import by_paper, implementation
from repro.report.plan import cost_lines
from repro.run import make_plan
from repro.specs import resolve
from repro.variants import Variant


def _hours(spec_id: str, row: str, limit: int | None):
    plan = make_plan(resolve(spec_id), "paper", [row], [0], Variant(limit=limit))
    return plan, plan.steps[0].gpu_hours


def test_psac_counts_each_tasks_share_of_its_train_questions():
    from repro.families.psac.build import gpu_hours

    plan, full = _hours("psac-table2-sota", "PSAC(R)", None)
    config = plan.steps[0].row.config
    limited_plan, limited = _hours("psac-table2-sota", "PSAC(R)", 500)
    train = {"action": 20_475, "transition": 52_704, "frameqa": 39_392, "count": 26_843}  # Table 1, Train
    expected = sum(gpu_hours(config.model_copy(update={"task": t})) * 500 / n for t, n in train.items())
    assert limited == pytest.approx(expected) and limited < full / 40
    assert limited_plan.steps[0].limited and not plan.steps[0].limited
    assert "--limit 500: the first 500 questions of each split, the epochs unchanged" in cost_lines(limited_plan)[0]
    assert _hours("psac-table2-sota", "PSAC(R)", 60_000)[1] == pytest.approx(full)  # more than any split: all of it


def test_sa_m4c_counts_its_share_of_textvqa_train():
    _, full = _hours("sa-m4c-table1-textvqa", "11 SA-M4C (ours)", None)
    _, limited = _hours("sa-m4c-table1-textvqa", "11 SA-M4C (ours)", 3_460)
    assert limited == pytest.approx(full * 3_460 / 34_602)


def test_mcan_pa_counts_the_share_of_vqa_v2s_train_and_val_questions_of_its_three_splits():
    _, full = _hours("mcan-pa-table5-ablation", "MCAN", None)
    plan, limited = _hours("mcan-pa-table5-ablation", "MCAN", 500)
    assert limited == pytest.approx(full * 3 * 500 / (443_757 + 214_354)) and plan.steps[0].limited
    assert _hours("mcan-pa-table5-ablation", "MCAN", 500_000)[1] == pytest.approx(full)


def test_dsganet_counts_its_share_of_vqa_v2_train():
    _, full = _hours("dsganet-table6-relations", "1", None)
    _, limited = _hours("dsganet-table6-relations", "1", 4_437)
    assert full is not None and limited == pytest.approx(full * 4_437 / 443_757)


def test_a_family_without_a_share_says_the_estimate_is_for_the_whole_splits():
    assert implementation(by_paper("ace-rpe")).limited_hours is None  # pre-training and heads: several splits
    plan, limited = _hours("ace-rpe-table1-pe", "APE", 500)
    assert limited == _hours("ace-rpe-table1-pe", "APE", None)[1]
    assert "--limit 500 not counted for APE: the estimate is for the whole splits" in cost_lines(plan)[0]


def test_the_dry_run_prints_the_limited_estimate(runner):
    out = runner.invoke(
        app, ["run", "psac-table2-sota", "--rows", "PSAC(R)", "--limit", "500", "--dry-run"], env={"COLUMNS": "300"}
    )
    assert out.exit_code == 0, out.output
    _, limited = _hours("psac-table2-sota", "PSAC(R)", 500)
    assert f"estimated GPU-hours (paper schedule): {limited:.1f} for 1 seed(s) per row; --limit 500" in out.output
