"""`repro run ID --rows ROW --weights FILE|released`: no training; the row's MCAN built from an mcan-vqa checkpoint
(the strict load, its key report printed), evaluated by the release protocol on data in the releases' layout; the
record (under results/weights/) names the source, checkpoint and sha256, and its test-set files pass
`repro submit --dry-run`. `repro table` shows the cell as its own source."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from repro import specs
from repro.cli import app
from repro.datasets.vqa_dataset import VQADataset
from repro.datasets.vqa_features import feature_store
from repro.families.mcan_pa import build
from repro.families.mcan_pa import data as mcan_data
from repro.families.mcan_pa.keymap import convert
from repro.paths import REPO_DIR

SPEC = "mcan-pa-table3-vqa2"

# this project's MCAN names -> mcan-vqa's (`core/model/net.py`): keymap.RULES read backwards
OFFICIAL = (
    (r"img_proj\.", "img_feat_linear."),
    (r"(enc|dec)oder\.(\d+)\.ffn\.net\.0\.", r"backbone.\1_list.\2.ffn.mlp.fc.linear."),
    (r"(enc|dec)oder\.(\d+)\.ffn\.net\.3\.", r"backbone.\1_list.\2.ffn.mlp.linear."),
    (r"(enc|dec)oder\.(\d+)\.(norm\d)\.weight", r"backbone.\1_list.\2.\3.a_2"),
    (r"(enc|dec)oder\.(\d+)\.(norm\d)\.bias", r"backbone.\1_list.\2.\3.b_2"),
    (r"encoder\.(\d+)\.att\.(q|k|v)\.", r"backbone.enc_list.\1.mhatt.linear_\2."),
    (r"encoder\.(\d+)\.att\.out\.", r"backbone.enc_list.\1.mhatt.linear_merge."),
    (r"decoder\.(\d+)\.self_att\.(q|k|v)\.", r"backbone.dec_list.\1.mhatt1.linear_\2."),
    (r"decoder\.(\d+)\.self_att\.out\.", r"backbone.dec_list.\1.mhatt1.linear_merge."),
    (r"decoder\.(\d+)\.guided_att\.(q|k|v)\.", r"backbone.dec_list.\1.mhatt2.linear_\2."),
    (r"decoder\.(\d+)\.guided_att\.out\.", r"backbone.dec_list.\1.mhatt2.linear_merge."),
    (r"flat_(lang|img)\.mlp\.0\.", r"attflat_\1.mlp.fc.linear."),
    (r"flat_(lang|img)\.mlp\.3\.", r"attflat_\1.mlp.linear."),
    (r"flat_(lang|img)\.merge\.", r"attflat_\1.linear_merge."),
    (r"norm\.weight", "proj_norm.a_2"),
    (r"norm\.bias", "proj_norm.b_2"),
    (r"classifier\.", "proj."),
)


def _official_name(key: str) -> str:
    for pattern, replacement in OFFICIAL:
        if re.match(pattern, key):
            return re.sub(pattern, replacement, key, count=1)
    return key  # embedding, lstm: the same names


def _fixture_checkpoint(sandbox, spec) -> tuple:
    """A random MCAN at the smoke sizes and the generated data's vocabularies, saved as mcan-vqa saves it."""
    settings = spec.scales["smoke"]
    data = mcan_data.prepare_data(spec, "smoke", settings)
    row = spec.row("MCAN+PA (ours)")  # only for the data view; the checkpoint is plain MCAN
    questions = VQADataset(data["prepared"], "train", feature_store("vqa2", "train", data["features"]))
    train = mcan_data.questions(row.config, questions, settings.get("sizes"))
    torch.manual_seed(7)
    model = build.build_model({"arch": "mcan"}, train.num_tokens, train.num_answers, sizes=settings.get("sizes"))
    official = {_official_name(k): v.clone() for k, v in model.state_dict().items()}
    assert set(convert(official).state()) == set(model.state_dict())  # the layout the key map reads
    path = sandbox / "ckpt_small.pkl"
    torch.save({"state_dict": official, "epoch": 13}, path)
    return path, model


def test_weights_file_is_evaluated_recorded_apart_and_submittable(sandbox, runner):
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{SPEC}.yaml", folder)
    specs.clear_cache()
    spec = specs.resolve(SPEC)
    path, _ = _fixture_checkpoint(sandbox, spec)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()

    plan = runner.invoke(app, ["run", SPEC, "--rows", "MCAN", "--scale", "smoke", "--weights", str(path), "--dry-run"])
    assert plan.exit_code == 0, plan.output
    assert "no training" in plan.output and "GPU-hours of evaluation" in plan.output
    assert not (sandbox / "results" / "weights").exists()

    out = runner.invoke(
        app, ["run", SPEC, "--rows", "MCAN", "--scale", "smoke", "--weights", str(path)], env={"COLUMNS": "400"}
    )
    assert out.exit_code == 0, out.output
    assert "key report" in out.output and "0 missing, 0 unexpected" in out.output
    # nothing beside the numbers trained here; the record names the source, the checkpoint and its digest
    assert not (sandbox / "results" / "mcan-pa").exists()
    results = sandbox / "results" / "weights" / f"ckpt_small@{digest[:8]}" / "mcan-pa" / SPEC
    record = json.loads((results / "MCAN.smoke.json").read_text())
    assert record["weights"] == {"weights": str(path), "checkpoint": "ckpt_small.pkl", "sha256": digest}
    seed = json.loads((results / "seeds" / "MCAN.smoke.seed0.json").read_text())
    assert seed["training"] is None and seed["weights"]["sha256"] == digest
    assert len(record["metrics"]) == 5 and all(0.0 <= v <= 100.0 for v in record["metrics"].values())

    commands = re.findall(r"`(repro submit [^`]+)`", out.output)
    assert sorted(c.split()[2] for c in commands) == ["vqa2-test-dev", "vqa2-test-std"]
    for command in commands:
        assert (results / "predictions").samefile(Path(command.split()[4]).parent)
        done = runner.invoke(app, [*command.split()[1:], "--dry-run"])
        assert done.exit_code == 0 and "passed every check" in done.output, done.output

    table = runner.invoke(app, ["table", SPEC, "--scale", "smoke"], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    source = f"weights {path} (ckpt_small.pkl, sha256 {digest[:12]}…)"
    assert f"MCAN from {source}, not trained here: test-dev" in table.output  # its own source, not a cell

    again = runner.invoke(app, ["run", SPEC, "--rows", "MCAN", "--scale", "smoke", "--weights", str(path)])
    assert again.exit_code == 2 and "--force" in again.output


TABLE4 = "mcan-pa-table4-pretraining"


def _vlbert_file(sandbox, spec, classifier: str, name: str = "vl-bert_vqa-best.model"):
    """A random VL-BERT at the smoke sizes and the generated data's vocabularies, saved as VL-BERT's Checkpoint
    callback saves it (`module.` keys of ResNetVLBERT)."""
    from tests.families.mcan_pa.test_vlbert_keymap import official_state

    settings = spec.scales["smoke"]
    data = mcan_data.prepare_data(spec, "smoke", settings)
    questions = VQADataset(data["prepared"], "train", feature_store("vqa2", "train", data["features"]))
    model = build.build_model(
        {"arch": "vl-bert", "classifier": classifier},
        questions.num_tokens,
        questions.num_answers,
        sizes=settings["sizes"],
    )
    path = sandbox / name
    torch.save({"state_dict": official_state(model)}, path)
    return path


@pytest.mark.slow
def test_a_vl_bert_vqa_checkpoint_is_evaluated_and_the_plan_refuses_what_the_run_refuses(sandbox, runner):
    """VL-BERT is its code's network: a VQA checkpoint of its layout ("2fc" here; the row's own classifier is
    "mlm") is evaluated on the baseline row. The PA row, and MCAN+PA, are refused by the plan as by the run."""
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    for spec_id in (TABLE4, SPEC):
        shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{spec_id}.yaml", folder)
    specs.clear_cache()
    path = _vlbert_file(sandbox, specs.resolve(TABLE4), "2fc")
    smoke = ["--scale", "smoke", "--weights", str(path)]
    for spec_id, row, why in (
        (TABLE4, "VL-BERT_BASE+PA†", "VL-BERT's released layouts are VL-BERT without PA"),
        (SPEC, "MCAN+PA (ours)", "mcan-vqa's released layout is MCAN without PE/PA"),
    ):
        for dry in (["--dry-run"], []):
            out = runner.invoke(app, ["run", spec_id, "--rows", row, *smoke, *dry], env={"COLUMNS": "300"})
            assert out.exit_code == 2 and "Traceback" not in out.output, out.output
            assert why in out.output and "no training" not in out.output
    assert not (sandbox / "results" / "weights").exists()

    row = "VL-BERT_BASE† (baseline)"
    plan = runner.invoke(app, ["run", TABLE4, "--rows", row, *smoke, "--dry-run"])
    assert plan.exit_code == 0 and "no training" in plan.output, plan.output
    out = runner.invoke(app, ["run", TABLE4, "--rows", row, *smoke], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "key report" in out.output and "0 missing, 0 unexpected" in out.output
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    results = sandbox / "results" / "weights" / f"vl-bert_vqa-best@{digest[:8]}" / "mcan-pa" / TABLE4
    record = json.loads((results / "VL-BERT_BASE-dagger_baseline.smoke.json").read_text())
    assert record["weights"]["sha256"] == digest and 0.0 <= record["metrics"]["test-dev All"] <= 100.0


def test_a_pretraining_checkpoint_is_a_start_not_weights_to_evaluate(sandbox, runner, tmp_path):
    from repro.families.mcan_pa.vlbert_pretraining import VLBertPretraining
    from tests.families.mcan_pa.test_vlbert_keymap import FULL, official_state

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{TABLE4}.yaml", folder)
    specs.clear_cache()
    path = tmp_path / "vl-bert-base-prec.model"
    torch.save({"state_dict": official_state(VLBertPretraining(FULL, region_classes=3))}, path)
    out = runner.invoke(
        app, ["run", TABLE4, "--rows", "VL-BERT_BASE† (baseline)", "--scale", "smoke", "--weights", str(path)]
    )
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "pre-training has no VQA classifier" in " ".join(out.output.split())
