"""`repro run` end to end on generated data: every Table V row trains, is scored and lands in the table."""

from __future__ import annotations

import json
import shutil

import pytest

from repro import specs
from repro.cli import app
from repro.paths import REPO_DIR


@pytest.fixture
def table5_sandbox(sandbox):
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    specs._load_all.cache_clear()
    return sandbox


@pytest.mark.slow
def test_smoke_run_fills_all_ten_rows(table5_sandbox, runner):
    out = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    files = sorted(p.name for p in (table5_sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation").glob("*.json"))
    assert len(files) == 10 and all(f.endswith(".smoke.json") for f in files)

    record = json.loads(
        (table5_sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation" / "MCAN+PA_ours.smoke.json").read_text()
    )
    assert record["scale"] == "smoke" and record["split"] == "val" and record["seeds"] == [0]
    assert set(record["metrics"]) == {"Y/N", "Num", "Other", "All"}
    assert all(0.0 <= v <= 100.0 for v in record["metrics"].values())
    assert record["reference"] == record["metrics"]
    assert record["extra"]["train"][0]["steps"] > 0 and record["git_commit"]

    table = json.loads(runner.invoke(app, ["table", "table5-ablation", "--scale", "smoke", "--format", "json"]).output)
    assert all(row["reproduced"] is not None for row in table["rows"])
    assert runner.invoke(app, ["check", "table5-ablation"]).exit_code == 0


def test_smoke_run_is_deterministic_and_check_sees_a_moved_number(table5_sandbox, runner):
    args = ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN+POA"]
    assert runner.invoke(app, args).exit_code == 0
    path = table5_sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation" / "MCAN+POA.smoke.json"
    first = json.loads(path.read_text())["metrics"]
    again = runner.invoke(app, args + ["--workdir", str(table5_sandbox / "again")])
    assert again.exit_code == 2 and "already has results for MCAN+POA seed 0" in again.output
    assert runner.invoke(app, args + ["--workdir", str(table5_sandbox / "again"), "--force"]).exit_code == 0
    assert json.loads(path.read_text())["metrics"] == first

    record = json.loads(path.read_text())
    record["metrics"]["All"] += 1.0  # what a change that moves the number would leave behind
    path.write_text(json.dumps(record))
    out = runner.invoke(app, ["check", "table5-ablation"], env={"COLUMNS": "200"})
    assert out.exit_code == 1 and "REGRESSION" in out.output


@pytest.mark.slow
def test_two_jobs_give_the_same_numbers_as_one(table5_sandbox, runner):
    base = ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN,MCAN+PMA"]
    assert runner.invoke(app, base + ["--jobs", "1", "--workdir", str(table5_sandbox / "w1")]).exit_code == 0
    folder = table5_sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation"
    serial = {p.name: json.loads(p.read_text())["metrics"] for p in folder.glob("*.json")}
    shutil.rmtree(folder)
    out = runner.invoke(app, base + ["--jobs", "2", "--workdir", str(table5_sandbox / "w2")])
    assert out.exit_code == 0, out.output
    parallel = {p.name: json.loads(p.read_text())["metrics"] for p in folder.glob("*.json")}
    assert parallel.keys() == serial.keys()
    for name in serial:
        assert parallel[name] == pytest.approx(serial[name], abs=1e-6)


def test_paper_scale_says_what_data_to_fetch(table5_sandbox, runner):
    out = runner.invoke(app, ["run", "table5-ablation", "--rows", "MCAN"])
    assert out.exit_code == 2
    assert "repro download vqa2" in out.output and "Traceback" not in out.output


@pytest.mark.slow
def test_table6_complexity_runs_without_data(sandbox, runner):
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table6-complexity.yaml", folder)
    specs._load_all.cache_clear()
    out = runner.invoke(app, ["run", "table6-complexity", "--rows", "MCAN (baseline)"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    record = json.loads(
        (sandbox / "results" / "mcan-pa" / "mcan-pa-table6-complexity" / "MCAN_baseline.json").read_text()
    )
    assert record["metrics"]["Params"] == pytest.approx(57.8, rel=0.005)
    assert record["metrics"]["FLOPs"] == pytest.approx(5.35, rel=0.05)
    assert record["extra"]["params"] == 57_812_491


def _bottom_up_tsv(path, image_ids, dim=2048, boxes=10, seed=0):
    import base64

    import numpy as np

    rng = np.random.default_rng(seed)
    lines = []
    for image_id in image_ids:
        feats = rng.random((boxes, dim), dtype=np.float32)
        xy = rng.random((boxes, 2), dtype=np.float32) * 400
        box = np.concatenate([xy, xy + 50], axis=1).astype(np.float32)
        lines.append(
            "\t".join(
                [
                    str(image_id),
                    "640",
                    "480",
                    str(boxes),
                    base64.b64encode(box.tobytes()).decode(),
                    base64.b64encode(feats.tobytes()).decode(),
                ]
            )
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_paper_scale_trains_on_prepared_data_and_writes_server_predictions(table5_sandbox, runner, monkeypatch):
    """The paper's protocol on tiny files in the official layouts: train + val + VG, then predictions for
    every test2015 question, in the array format the server takes, and no local metric claimed.
    (The model is shrunk and trained one epoch so that the test takes seconds; the protocol is the paper's.)"""
    from repro import families
    from repro.families.mcan_pa import model as mcan
    from tests._vqa_fixtures import write_vg, write_vqa2

    monkeypatch.setitem(mcan.PAPER_SIZES, "d_model", 32)
    monkeypatch.setitem(mcan.PAPER_SIZES, "layers", 1)
    monkeypatch.setitem(mcan.PAPER_SIZES, "ffn", 64)
    monkeypatch.setitem(mcan.PAPER_SIZES, "geometry_dim", 32)
    real_load = families.load_recipe
    monkeypatch.setattr(families, "load_recipe", lambda name: real_load(name).replace(epochs=1))

    data = table5_sandbox / "data"
    fixture = write_vqa2(data / "vqa2")
    write_vg(data / "vg-qa")
    _bottom_up_tsv(data / "bottom-up-36" / "trainval_resnet101_faster_rcnn_genome_36.tsv", range(1, 7))
    _bottom_up_tsv(data / "bottom-up-36" / "test2015_resnet101_faster_rcnn_genome_36.tsv", range(1, 4))
    for name in ("vqa2", "bottom-up-36"):
        assert runner.invoke(app, ["prepare", name]).exit_code == 0

    out = runner.invoke(app, ["run", "table5-ablation", "--rows", "MCAN"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    predictions = (
        table5_sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation" / "predictions" / "MCAN.seed0.test2015.json"
    )
    answers = json.loads(predictions.read_text())
    assert sorted(a["question_id"] for a in answers) == sorted(q for q, _, _ in fixture["test"])
    assert all(isinstance(a["answer"], str) for a in answers)
    assert "repro submit vqa2-test-dev --predictions" in out.output
    record = json.loads((table5_sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation" / "MCAN.json").read_text())
    assert record["metrics"] == {} and record["split"] == "test-dev"
    assert record["extra"]["train"][0]["global_batch"] == 64
