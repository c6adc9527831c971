"""Generated TGIF-QA data in the official layout, and `repro run` at smoke scale filling all four task columns."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from repro import specs
from repro.cli import app
from repro.datasets import tgif
from repro.errors import ReproError
from repro.families.psac.synthetic import GeneratorConfig, _count_video, _directions, generate
from repro.paths import REPO_DIR

SMALL = {
    "seed": 3,
    "train_videos": 12,
    "test_videos": 4,
    "frames": 8,
    "feature_dim": 8,
    "actions_per_video": 2,
    "max_count": 2,
}


def test_generator_writes_the_official_layout_with_order_dependent_answers(tmp_path):
    root = generate(tmp_path, GeneratorConfig.from_mapping(SMALL))
    for split in ("Train", "Test"):
        for task in tgif.TASKS:
            qs = tgif.read_questions(root / tgif.file_name(split, task))  # the real files' reader
            assert qs, (split, task)
    features = np.load(root / "features.npy")
    assert features.shape == (32, 8, 8)  # the other tasks' 16 videos, then Count's own 16
    trans = tgif.read_questions(root / "Train_transition_question.csv")
    assert all(len(q.candidates) == 5 and (" after " in q.question or " before " in q.question) for q in trans)
    counts = tgif.read_questions(root / "Train_count_question.csv")
    assert {q.label for q in counts} <= {1, 2} and all(16 <= q.key < 28 for q in counts)
    again = generate(tmp_path / "again", GeneratorConfig.from_mapping(SMALL))
    assert (again / "Train_action_question.csv").read_text() == (root / "Train_action_question.csv").read_text()


@pytest.mark.parametrize("fixed", [False, True])
def test_a_count_video_repeats_one_action_as_often_as_its_answer(fixed):
    cfg = GeneratorConfig.from_mapping(
        {**SMALL, "frames": 12, "noise": 0.0, "max_count": 3, "count_fixed_frames": fixed}
    )
    rng = np.random.default_rng(0)
    protos = {k: _directions(rng, n, 8) for k, n in (("subject", 8), ("action", 10), ("color", 6), ("rest", 1))}
    protos["rest"] = protos["rest"][0]
    posed_frames = set()
    for _ in range(30):
        features, action, count = _count_video(rng, cfg, protos)
        values = np.unique(features, axis=0).astype(np.float32)  # without noise: the posed frame and the rest frame
        assert len(values) == 2
        step = protos["action"][action] - protos["rest"]
        pose = values[0] if np.allclose(values[0] - values[1], step, atol=1e-2) else values[1]
        posed = np.all(features.astype(np.float32) == pose, axis=1)
        runs = int(posed[0]) + int(np.sum(posed[1:] & ~posed[:-1]))  # a run of pose frames = one repetition
        assert runs == count and 1 <= count <= 3
        posed_frames.add(int(posed.sum()))
    assert (posed_frames == {3 * cfg.rep_frames}) == fixed  # fixed: only the runs tell the count


def test_generator_rejects_settings_that_do_not_fit():
    with pytest.raises(ReproError, match="do not fit"):
        GeneratorConfig.from_mapping({"frames": 6, "actions_per_video": 3, "max_count": 3})
    with pytest.raises(ReproError, match="unknown synthetic generator setting"):
        GeneratorConfig.from_mapping({"videos": 3})


@pytest.mark.slow
def test_smoke_run_fills_every_task_column(sandbox, runner):
    folder = sandbox / "experiments" / "psac"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "psac" / "psac-table4-bilstm.yaml", folder)
    specs.clear_cache()
    out = runner.invoke(
        app, ["run", "psac-table4-bilstm", "--scale", "smoke", "--rows", "Bi-LSTM"], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    record = json.loads((sandbox / "results" / "psac" / "psac-table4-bilstm" / "Bi-LSTM.smoke.json").read_text())
    assert set(record["metrics"]) == {
        "Action",
        "Trans",
        "FrameQA",
        "Count",
        "Action s/epoch",
        "Trans s/epoch",
        "FrameQA s/epoch",
        "Count s/epoch",
    }
    assert all(0 <= record["metrics"][c] <= 100 for c in ("Action", "Trans", "FrameQA"))
    assert 0 <= record["metrics"]["Count"] <= 81
    per_task = record["extra"]["train"][0]["per_task"]
    assert sorted(per_task) == sorted(tgif.TASKS) and all(t["steps"] > 0 for t in per_task.values())
    # the unit's stage plan (what `repro run`'s progress reads): each task's planned steps, the steps it then trained
    (plan,) = (sandbox / "data").rglob("stages.json")
    stages = json.loads(plan.read_text())["stages"]
    assert [name for name, _ in stages] == ["action", "transition", "frameqa", "count"]
    assert {name: weight for name, weight in stages} == {t: float(v["steps"]) for t, v in per_task.items()}
    # s/epoch: timed steps extrapolated to an epoch of the real train split (the spec's counts)
    timed = record["extra"]["epoch_time"][0]
    assert timed["action"]["steps_per_epoch"] == 640 and timed["transition"]["steps_per_epoch"] == 1647
    for task, column in (("action", "Action s/epoch"), ("count", "Count s/epoch")):
        t = timed[task]
        assert record["metrics"][column] == pytest.approx(t["seconds_per_step"] * t["steps_per_epoch"])
        assert t["seconds_per_step"] > 0
