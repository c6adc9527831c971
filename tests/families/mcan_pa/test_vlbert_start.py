"""Table IV's VL-BERT_BASE row starts from VL-BERT's released pre-training (`init: vl-bert-base`): `repro weights ls`
lists the file (share links only: put in place by hand, its sha256 then recorded), the paper-scale plan lists it as a
data step of that row only, the generated scales leave the row out (refused when named), and the file loads as the
row's start by the key map, strictly, with its key report and its digest for the record."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from repro import specs
from repro.cli import app
from repro.families.mcan_pa import build, vlbert_keymap
from repro.families.mcan_pa.config import VlBertConfig
from repro.families.mcan_pa.vlbert import VLBERT_SIZES
from repro.paths import REPO_DIR
from repro.weights import released_named, released_path
from tests.golden import config, fixture, tensors

SPEC = "mcan-pa-table4-pretraining"
ROW = "VL-BERT_BASE"


@pytest.fixture
def table4(sandbox):
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{SPEC}.yaml", folder)
    specs.clear_cache()
    return sandbox


def _place(sandbox, source) -> None:
    path = released_path(released_named("vl-bert-base-prec.model"))
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, path)


@pytest.mark.slow
def test_the_paper_plan_lists_the_pre_training_as_a_data_step_of_its_row(table4, runner):
    out = runner.invoke(app, ["run", SPEC, "--dry-run"], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    step = next(line for line in lines if "`repro download vl-bert-base-prec`" in line)
    number = step.split("data: ")[1].split(".")[0]
    assert step.endswith("missing")
    rows = {line.split("  ")[0]: line for line in lines if line.startswith(("VL-BERT", "MCAN"))}
    assert f"data 1–{number}" in rows[ROW] and "init=vl-bert-base" in rows[ROW]
    assert f"–{number}" not in rows["VL-BERT_BASE† (baseline)"] and f"–{number}" not in rows["VL-BERT_BASE+PA†"]
    _place(table4, fixture("vlbert-pretrain") / "checkpoint.pth")
    again = runner.invoke(app, ["run", SPEC, "--dry-run", "--rows", ROW], env={"COLUMNS": "300"})
    step = next(line for line in again.output.splitlines() if "`repro download vl-bert-base-prec`" in line)
    assert step.endswith("ready")


def test_generated_scales_leave_the_row_out_and_refuse_it_by_name(table4, runner):
    out = runner.invoke(app, ["run", SPEC, "--dry-run", "--scale", "synthetic"], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert f"{ROW}: not run at scale synthetic: init vl-bert-base" in out.output
    assert not any(line.startswith(f"{ROW} ") for line in out.output.splitlines())
    out = runner.invoke(app, ["run", SPEC, "--dry-run", "--scale", "smoke", "--rows", ROW])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "does not run at scale smoke" in out.output and "paper scale only" in out.output


def test_weights_ls_lists_it_and_its_digest_is_recorded_not_verified(table4, runner):
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["weights", "ls", "-f", "json"]).output)}
    entry = rows["vl-bert-base-prec.model"]
    assert entry["family"] == "mcan-pa" and entry["layout"] == "vl-bert" and entry["on_disk"] == "missing"
    assert entry["url"] is None and entry["sha256"] is None and "drive.google.com" in entry["manual"]
    assert "init: vl-bert-base" in entry["rows"] and entry["cells"] == []
    out = runner.invoke(app, ["weights", "download", "vl-bert-base-prec.model"], env={"COLUMNS": "300"})
    assert out.exit_code == 2 and "put vl-bert-base-prec.model in" in out.output
    _place(table4, fixture("vlbert-pretrain") / "checkpoint.pth")
    out = runner.invoke(app, ["weights", "download", "vl-bert-base-prec.model"], env={"COLUMNS": "300"})
    assert out.exit_code == 0 and "recorded (none is published to check it)" in out.output, out.output
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["weights", "ls", "-f", "json"]).output)}
    assert rows["vl-bert-base-prec.model"]["on_disk"] == "recorded"


def test_a_pre_trained_vl_bert_loads_as_the_rows_start(table4, monkeypatch):
    """The released file's layout (the golden `vlbert-pretrain` fixture, VL-BERT's own pre-training model) as
    VL-BERT_BASE's start, its sizes standing in for VL-BERT_BASE's."""
    folder = fixture("vlbert-pretrain")
    v = config(folder)["config"]["NETWORK.VLBERT"]
    boxes = tensors(folder, "inputs.pt")["boxes"]
    released = {
        "vocab": v["vocab_size"],
        "hidden": v["hidden_size"],
        "layers": v["num_hidden_layers"],
        "heads": v["num_attention_heads"],
        "ffn": v["intermediate_size"],
        "max_positions": v["max_position_embeddings"],
        "feature_dim": boxes.shape[-1] - 4,
        "dropout": 0.0,
    }
    monkeypatch.setitem(VLBERT_SIZES, "base", {**VLBERT_SIZES["base"], **released})
    row = VlBertConfig(arch="vl-bert", init="vl-bert-base")
    sizes = build.model_sizes(row, None)
    model = build.build_model(row, 2, 9, sizes=sizes)
    with pytest.raises(Exception, match="get it with `repro weights download vl-bert-base-prec.model`"):
        vlbert_keymap.load_start(model, row, sizes)
    _place(table4, folder / "checkpoint.pth")
    report, checkpoint = vlbert_keymap.load_start(model, row, sizes)
    assert report.missing == ["head.2.weight", "head.2.bias"] and len(report.unexpected) == 9
    assert checkpoint.record()["checkpoint"] == "vl-bert-base-prec.model" and len(checkpoint.sha256) == 64
    official = torch.load(folder / "checkpoint.pth", weights_only=True)["state_dict"]
    assert torch.equal(
        model.layers[0].output.dense.weight, official["module.vlbert.encoder.layer.0.output.dense.weight"]
    )
    transform = official["module.vlbert.mlm_head.predictions.transform.LayerNorm.weight"]
    assert torch.equal(model.head[0].LayerNorm.weight, transform)


def test_the_tables_baseline_at_a_generated_scale_is_a_row_that_runs_there(table4):
    from repro.report import build_view

    spec = specs.resolve(SPEC)
    assert build_view(spec, "paper").baseline.name == ROW
    assert build_view(spec, "synthetic").baseline.name == "VL-BERT_BASE† (baseline)"
