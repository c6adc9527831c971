"""`repro run sa-m4c-table1-textvqa --rows ROW --weights FILE|released`: no training; Table 1's M4C (an mmf
checkpoint) and SA-M4C (a sam-textvqa checkpoint) built from the checkpoint through keymap.py (the strict load, its
key report printed), val scored and the test answers written; the record (under results/weights/) names the source,
checkpoint and sha256, and the test-set file passes `repro submit textvqa-test --dry-run`."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from repro import families, specs
from repro.cli import app
from repro.families import sa_m4c  # noqa: F401
from repro.families.sa_m4c.keymap import build_official, convert, sizes_from_state
from repro.families.sa_m4c.model import layer_stack
from repro.families.sa_m4c.splits import read_splits
from repro.launch.units import prepare_data
from repro.paths import REPO_DIR
from repro.run import make_plan
from repro.weights import with_weights_rows

SPEC = "sa-m4c-table1-textvqa"

# this project's names -> the official ones: keymap.RULES and keymap._LAYER read backwards
OFFICIAL = (
    (r"text_bert\.bert\.", "text_bert."),
    (r"text_out\.", "text_bert_out_linear."),
    (r"(obj|ocr)_fc7\.lc\.", r"\1_faster_rcnn_fc7.lc."),
    (r"(obj|ocr)_encoder\.feat_proj\.", r"linear_\1_feat_to_mmt_in."),
    (r"(obj|ocr)_encoder\.box_proj\.", r"linear_\1_bbox_to_mmt_in."),
    (r"(obj|ocr)_encoder\.feat_norm\.", r"\1_feat_layer_norm."),
    (r"(obj|ocr)_encoder\.box_norm\.", r"\1_bbox_layer_norm."),
    (r"prev_pred\.position\.", "mmt.prev_pred_embeddings.position_embeddings."),
    (r"prev_pred\.token_type\.", "mmt.prev_pred_embeddings.token_type_embeddings."),
    (r"prev_pred\.(ans|ocr|emb)_norm\.", r"mmt.prev_pred_embeddings.\1_layer_norm."),
    (r"ocr_ptr\.", "ocr_ptr_net."),
)
LAYER = (
    (r"attention\.(query|key|value)\.", r"attention.self.\1."),
    (r"attention\.out\.", "attention.output.dense."),
    (r"attn_norm\.", "attention.output.LayerNorm."),
    (r"ff_in\.", "intermediate.dense."),
    (r"ff_out\.", "output.dense."),
    (r"ff_norm\.", "output.LayerNorm."),
)


def _official_name(key: str, layout: str, normal: int) -> str:
    layer = re.fullmatch(r"mmt\.(\d+)\.(.+)", key)
    if layer:
        index, rest = int(layer.group(1)), layer.group(2)
        rest = next(re.sub(p, r, rest, count=1) for p, r in LAYER if re.match(p, rest))
        if layout == "mmf":
            return f"mmt.encoder.layer.{index}.{rest}"
        kind = "normal_layers" if index < normal else "spatial_layers"
        return f"mmt.encoder.{kind}.{index if index < normal else index - normal}.{rest}"
    if key.startswith("classifier."):
        return key.replace("classifier.", "classifier.module." if layout == "mmf" else "classifier.", 1)
    return next((re.sub(p, r, key, count=1) for p, r in OFFICIAL if re.match(p, key)), key)


def _fixture_checkpoint(sandbox, row: str, layout: str) -> Path:
    """A random network of the row at the smoke data's sizes, built as the checkpoint's code builds it, saved in
    the official layout (mmf: {"model": ...}; sam-textvqa: {"model_state_dict": ..., "epoch_id": ...})."""
    spec = specs.resolve(SPEC)
    spec = with_weights_rows(spec, [row], "released")
    plan = make_plan(spec, "smoke", [row], [0], None, workdir=sandbox / "fixture-runs")
    step = plan.steps[0]
    data = prepare_data(plan)[step.row.name]
    ctx = step.units[0].context(progress=False, data=data)
    splits = read_splits(ctx)
    kinds = layer_stack(step.row.config)
    torch.manual_seed(11)
    model = build_official(splits.sizes, len(splits.vocab), kinds, layout)
    normal = kinds.count("normal")
    official = {_official_name(k, layout, normal): v.clone() for k, v in model.state_dict().items()}
    assert set(convert(official, layout).state()) == set(model.state_dict())  # the layout the key map reads
    assert sizes_from_state(official, layout, base=splits.sizes)[1:] == (len(splits.vocab), kinds)
    path = sandbox / f"{layout}.ckpt"
    torch.save({"model": official} if layout == "mmf" else {"model_state_dict": official, "epoch_id": 99}, path)
    return path


@pytest.fixture
def t1_sandbox(sandbox):
    folder = sandbox / "experiments" / "sa-m4c"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "sa-m4c" / f"{SPEC}.yaml", folder)
    specs.clear_cache()
    return sandbox


@pytest.mark.parametrize(("row", "layout"), [("4 M4C", "mmf"), ("12 SA-M4C (ours)", "sam-textvqa")])
def test_weights_file_is_evaluated_recorded_apart_and_submittable(t1_sandbox, runner, row, layout):
    sandbox = t1_sandbox
    path = _fixture_checkpoint(sandbox, row, layout)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    args = ["run", SPEC, "--rows", row, "--scale", "smoke"]

    plan = runner.invoke(app, [*args, "--weights", str(path), "--dry-run"], env={"COLUMNS": "400"})
    assert plan.exit_code == 0, plan.output
    assert "no training" in plan.output and "GPU-hours of evaluation" in plan.output
    cited = with_weights_rows(specs.resolve(SPEC), [row], "released").row(row)
    hooks, config = families.for_row(cited), cited.config
    hours = hooks.evaluation_hours(config, specs.resolve(SPEC))
    assert 0 < hours < hooks.gpu_hours(config) / 50  # decoding val and test, not a training run
    assert f"evaluation ~{hours:.1f} GPU-hours" in plan.output
    assert not (sandbox / "results" / "weights").exists()

    out = runner.invoke(app, [*args, "--weights", str(path)], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "key report" in out.output and "0 missing, 0 unexpected" in out.output
    assert not (sandbox / "results" / "sa-m4c").exists()  # nothing beside the numbers trained here
    results = sandbox / "results" / "weights" / f"{path.stem}@{digest[:8]}" / "sa-m4c" / SPEC
    records = list(results.glob("*.smoke.json"))
    assert len(records) == 1, records
    record = json.loads(records[0].read_text())
    assert record["weights"] == {"weights": str(path), "checkpoint": path.name, "sha256": digest}
    assert set(record["metrics"]) == {"Accu. on val"} and 0.0 <= record["metrics"]["Accu. on val"] <= 100.0
    seed = json.loads(next((results / "seeds").glob("*.smoke.seed0.json")).read_text())
    assert seed["training"] is None and seed["weights"]["sha256"] == digest

    commands = re.findall(r"`(repro submit [^`]+)`", out.output)
    assert [c.split()[2] for c in commands] == ["textvqa-test"], out.output
    assert (results / "predictions").samefile(Path(commands[0].split()[4]).parent)
    # `repro submit` checks the file against the test questions: the generated ones, where the download puts them
    raw = next((sandbox / "data" / "synthetic").glob("textvqa-*"))
    (sandbox / "data" / "textvqa").mkdir(parents=True)
    shutil.copy(raw / "TextVQA_0.5.1_test.json", sandbox / "data" / "textvqa")
    done = runner.invoke(app, [*commands[0].split()[1:], "--dry-run"])
    assert done.exit_code == 0 and "passed every check" in done.output, done.output


def test_a_checkpoint_of_another_network_is_one_line(t1_sandbox, runner):
    args = ["run", SPEC, "--rows", "12 SA-M4C (ours)", "--scale", "smoke", "--weights"]
    mmf = _fixture_checkpoint(t1_sandbox, "4 M4C", "mmf")  # M4C's layout, not sam-textvqa's
    out = runner.invoke(app, [*args, str(mmf)], env={"COLUMNS": "400"})
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "no state dict of tensors (expected under 'model_state_dict')" in out.output
    four = _fixture_checkpoint(t1_sandbox, "4 M4C", "sam-textvqa")  # 4 normal layers: not SA-M4C's 2N->4S
    out = runner.invoke(app, [*args, str(four)], env={"COLUMNS": "400"})
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "MMT layers normal+normal+normal+normal are not row '12 SA-M4C (ours)'" in out.output
    assert not list(t1_sandbox.glob("results/**/*.json"))  # nothing loaded half, nothing recorded


def test_released_cells_of_table1():
    from repro.weights import released_for

    assert released_for(SPEC, "4 M4C").name == "m4c" and released_for(SPEC, "12 SA-M4C (ours)").name == "sa-m4c"
    spec = with_weights_rows(specs.resolve(SPEC), ["4 M4C"], "released")
    config = spec.row("4 M4C").config
    assert (config.arch, config.normal_layers, config.ocr, config.input_norm_eps) == ("m4c", 4, "rosetta-en", 1e-5)


def test_the_released_sa_m4c_row_reads_textvqa_alone_at_paper_scale(tmp_path):
    """Row 12 was trained with ST-VQA, which a paper-scale run cannot read yet; evaluating its weights needs only
    TextVQA's val and test, so the row's converted TextVQA folder is read, not refused."""
    from repro.errors import ReproError
    from repro.families.sa_m4c.prepare import evaluated_on, row_root

    spec = specs.parse_spec(REPO_DIR / "experiments" / "sa-m4c" / f"{SPEC}.yaml")
    config = spec.row("12 SA-M4C (ours)").config
    data = {"roots": {f"{config.ocr}-{config.det_backbone}": tmp_path / "google-resnext"}}
    with pytest.raises(ReproError, match="ST-VQA"):
        row_root(spec, config, data)  # training it would read ST-VQA
    assert row_root(spec, evaluated_on(spec, config), data) == tmp_path / "google-resnext"
    assert evaluated_on(spec, config).model_dump(exclude={"with_stvqa"}) == config.model_dump(exclude={"with_stvqa"})
