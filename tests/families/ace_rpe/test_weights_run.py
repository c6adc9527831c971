"""`repro run ace-rpe-table3-sota --rows 'ALBEF (14M)' --weights released|PART=FILE`: no training; each retrieval
data set evaluated at paper scale from its own checkpoint in ALBEF's retrieval layout (`flickr30k.pth`,
`mscoco.pth`), on data in ALBEF's layout (`test_paper_scale.write_albef_files`); the record (under
results/weights/) names each checkpoint with its sha256; a data set without one keeps its columns empty, and the
plan says so. `repro table` shows the row as its own source. Table 4's ALBEF (14M) row likewise from `vqa.pth`
(ALBEF's VQA layout, `task_fixtures.write_task_files`): the test2015 answers written for `repro submit`, the SNLI-VE
and NLVR2 columns empty (ALBEF released no such checkpoint)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import torch

from repro import specs
from repro.cli import app
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.keymap import convert, sizes_from_state
from repro.paths import REPO_DIR
from repro.weights import released_named, released_path
from tests.families.ace_rpe.test_paper_scale import write_albef_files

SPEC = "ace-rpe-table3-sota"
ROW = "ALBEF (14M)"
# a tiny ALBEF: 12 heads as ALBEF's (the head count is not in the shapes: the row's config gives it)
SIZES = {
    "hidden_size": 24,
    "heads": 12,
    "intermediate_size": 48,
    "image_layers": 1,
    "text_layers": 1,
    "fusion_layers": 1,
    "image_size": 32,
    "patch_size": 8,
    "max_positions": 32,
    "embed_dim": 16,
    "queue_size": 8,
}
_VIT = {  # this project's ViT names -> ALBEF's (timm's VisionTransformer, models/vit.py)
    "embeddings.cls_token": "cls_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
}
_BLOCK = {"layernorm_before": "norm1", "layernorm_after": "norm2", "attention.o_proj": "attn.proj", "mlp": "mlp"}


def albef_layout(model, text_layers: int) -> dict[str, torch.Tensor]:
    """Our retrieval (or VQA) model's state dict as ALBEF's Retrieval.py (VQA.py) saves it: keymap.py's map read
    backwards (the ViT's q, k, v joined into qkv, the fusion layers numbered on from the text layers, the
    position_ids buffer; the answer decoder has transformers' names already)."""
    out: dict[str, torch.Tensor] = {}
    qkv: dict[str, list] = {}
    for key, value in model.state_dict().items():
        head, _, rest = key.partition(".")
        if head.startswith("visual_encoder"):
            block = re.fullmatch(r"layers\.(\d+)\.(.+)\.(weight|bias)", rest)
            if block is None:
                out[f"{head}.{_VIT[rest]}"] = value
                continue
            index, part, kind = block.groups()
            proj = re.fullmatch(r"attention\.([qkv])_proj", part)
            if proj:
                qkv.setdefault(f"{head}.blocks.{index}.attn.qkv.{kind}", [None] * 3)["qkv".index(proj.group(1))] = value
            else:
                name = next(ours for ours in _BLOCK if part.startswith(ours))
                out[f"{head}.blocks.{index}.{_BLOCK[name]}{part[len(name) :]}.{kind}"] = value
        elif head.startswith("fusion"):
            layer = re.fullmatch(r"layer\.(\d+)\.(.+)", rest)
            momentum = head[len("fusion") :]
            out[f"text_encoder{momentum}.encoder.layer.{int(layer.group(1)) + text_layers}.{layer.group(2)}"] = value
        else:
            out[key] = value
    out.update({key: torch.cat(parts) for key, parts in qkv.items()})
    for momentum in ("", "_m"):
        out[f"text_encoder{momentum}.embeddings.position_ids"] = torch.arange(SIZES["max_positions"])[None]
    return out


def _checkpoint(path, vocab: int, seed: int, task: str = "retrieval") -> None:
    torch.manual_seed(seed)
    model = build_model({"arch": "albef", "position_embedding": "none"}, {**SIZES, "vocab_size": vocab}, task)
    state = albef_layout(model, SIZES["text_layers"])
    assert set(convert(state, model.state_dict(), SIZES["text_layers"]).state()) == set(model.state_dict())
    shapes = {**SIZES, "vocab_size": vocab}
    if task != "retrieval":  # no ITC projections or queues in ALBEF's VQA and SNLI-VE models
        shapes = {k: v for k, v in shapes.items() if k not in ("embed_dim", "queue_size")}
    assert sizes_from_state(state, 12) == shapes  # the network its shapes define
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state, "epoch": 9}, path)  # ALBEF's save_obj keeps the state dict under "model"


@pytest.fixture
def table3(sandbox):
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    (folder / f"{SPEC}.yaml").write_text((REPO_DIR / "experiments" / "ace-rpe" / f"{SPEC}.yaml").read_text())
    specs.clear_cache()
    write_albef_files(sandbox / "data")
    return sandbox


def _vocab(sandbox) -> int:
    return len((sandbox / "data" / "bert-base-uncased" / "vocab.txt").read_text().split())


def test_released_retrieval_checkpoints_fill_table3_albef_row(table3, runner):
    args = ["run", SPEC, "--rows", ROW, "--weights", "released"]
    plan = runner.invoke(app, [*args, "--dry-run"], env={"COLUMNS": "400"})
    assert plan.exit_code == 0, plan.output
    text = " ".join(plan.output.split())
    for name in ("flickr30k.pth", "mscoco.pth"):
        assert f"download: `repro weights download {name}` (https://storage.googleapis.com/" in text
    assert "for the flickr30k columns" in text and "for the coco-retrieval columns" in text
    assert re.search(r"no training; evaluation ~[\d.]+ GPU-hours", text)
    assert "then: nothing to submit: the test split is scored here" in text
    assert not (table3 / "results" / "weights").exists()

    digests = {}
    for name, seed in (("flickr30k.pth", 1), ("mscoco.pth", 2)):
        path = released_path(released_named(name))
        _checkpoint(path, _vocab(table3), seed)
        digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    out = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert out.output.count("key report") == 2 and "0 missing, 0 unexpected" not in out.output  # position_ids
    assert "0 missing, 2 unexpected" in out.output
    results = table3 / "results" / "weights" / "released" / "ace-rpe" / SPEC
    record = json.loads(next(results.glob("*.json")).read_text())
    assert record["weights"] == {
        "weights": "released",
        "checkpoints": [
            {"columns": "flickr30k", "checkpoint": "flickr30k.pth", "sha256": digests["flickr30k.pth"]},
            {"columns": "coco-retrieval", "checkpoint": "mscoco.pth", "sha256": digests["mscoco.pth"]},
        ],
        "empty": [],
    }
    assert len(record["metrics"]) == 12 and all(0.0 <= v <= 100.0 for v in record["metrics"].values())
    assert record["split"] == "test"
    seed = json.loads(next((results / "seeds").glob("*.json")).read_text())
    assert seed["training"] is None and set(seed["info"]["weights_keys"]) == {"flickr30k", "coco"}
    assert not (table3 / "results" / "ace-rpe").exists()  # nothing beside the numbers trained here

    table = runner.invoke(app, ["table", SPEC], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    words = " ".join(table.output.split())
    assert f"{ROW} from released weights (flickr30k.pth for flickr30k, sha256 {digests['flickr30k.pth'][:12]}…" in words


def test_one_file_for_one_data_set_leaves_the_other_columns_empty(table3, runner):
    path = table3 / "mine" / "albef_flickr.pth"
    _checkpoint(path, _vocab(table3), 3)
    args = ["run", SPEC, "--rows", ROW, "--weights", f"flickr={path}"]  # a unique start of the data set's name
    plan = runner.invoke(app, [*args, "--dry-run"], env={"COLUMNS": "400"})
    assert plan.exit_code == 0, plan.output
    text = " ".join(plan.output.split())
    assert f"weights file albef_flickr.pth for the flickr30k columns: {path} (present)" in text
    assert "no checkpoint for the coco-retrieval columns: they stay empty" in text
    out = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    results = table3 / "results" / "weights" / f"albef_flickr@{digest[:8]}" / "ace-rpe" / SPEC
    record = json.loads(next(results.glob("*.json")).read_text())
    assert record["weights"]["empty"] == ["coco-retrieval"]
    assert sorted(record["metrics"]) == sorted(c for c in record["metrics"] if c.startswith("Flickr30K"))
    assert len(record["metrics"]) == 6


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (["model.pth"], "has columns of several data sets (flickr30k, coco-retrieval); give a file per data set"),
        (["flickr30k=a.pth", "flickr30k=b.pth"], "--weights: flickr30k given twice"),
        (["released", "coco=a.pth"], "--weights released names every checkpoint of the row: give it alone"),
    ],
)
def test_bad_weights_options_are_one_line(table3, runner, weights, message):
    args = ["run", SPEC, "--rows", ROW, "--dry-run"]
    out = runner.invoke(app, [*args, *[w for option in weights for w in ("--weights", option)]], env={"COLUMNS": "400"})
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert message in " ".join(out.output.split())


def test_a_row_with_a_position_embedding_is_refused(table3, runner):
    path = table3 / "mine" / "albef_flickr.pth"
    _checkpoint(path, _vocab(table3), 3)
    out = runner.invoke(app, ["run", SPEC, "--rows", "Ours (4M)", "--weights", f"flickr30k={path}"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "ALBEF's released layout is ALBEF without a cross-modal position embedding" in " ".join(out.output.split())
    assert not list(table3.glob("results/**/*.json"))


def test_sizes_from_state_are_the_official_configs():
    """The network an official checkpoint's shapes define is the one its config.json builds (golden fixtures)."""
    from repro.errors import ReproError
    from repro.families.ace_rpe.keymap import read_checkpoint
    from tests.families.ace_rpe.test_golden import albef_sizes
    from tests.golden import config, fixture

    for name in ("albef-retrieval", "albef-vqa"):
        folder = fixture(name)
        cfg = config(folder)
        got = sizes_from_state(read_checkpoint(folder / "checkpoint.pth"), cfg["bert_config"]["num_attention_heads"])
        want = albef_sizes(cfg)
        assert got == {key: want[key] for key in got} and len(got) >= 10
    # NLVR2: model_nlvr.py fixes its text encoder at 18 layers; those above fusion_layer are (left, right) pairs,
    # one of our fusion layers each, read off the file whether the task is named or not
    folder = fixture("albef-nlvr2")
    cfg, state = config(folder), read_checkpoint(folder / "checkpoint.pth")
    heads, text = cfg["bert_config"]["num_attention_heads"], cfg["bert_config"]["fusion_layer"]
    layers = 1 + max(int(k.split(".")[3]) for k in state if k.startswith("text_encoder.encoder.layer."))
    assert layers == 18 and "18" in cfg["fixed_in_model_file"]
    want = albef_sizes(cfg) | {"fusion_layers": (18 - text) // 2}
    for task in ("nlvr2", None):
        got = sizes_from_state(state, heads, task)
        assert got == {key: want[key] for key in got}
    assert sizes_from_state(state, heads, "snli-ve")["fusion_layers"] == 18 - text  # another head: unpaired
    odd = {k: v for k, v in state.items() if not k.startswith("text_encoder.encoder.layer.17.")}
    with pytest.raises(ReproError, match="its layers come in pairs"):
        sizes_from_state(odd, heads)
    with pytest.raises(ReproError, match=r"^not an ALBEF checkpoint: no text_encoder\.embeddings\.word_embeddings"):
        sizes_from_state({"model.weight": torch.zeros(1)}, 12)


def test_released_vqa_checkpoint_fills_table4_vqa_columns_and_leaves_the_rest_empty(sandbox, runner):
    from tests.families.ace_rpe.task_fixtures import write_task_files

    spec_id = "ace-rpe-table4-sota"
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    (folder / f"{spec_id}.yaml").write_text((REPO_DIR / "experiments" / "ace-rpe" / f"{spec_id}.yaml").read_text())
    specs.clear_cache()
    write_albef_files(sandbox / "data")
    write_task_files(sandbox / "data")  # no NLVR2 or SNLI-VE checkpoint: their files are not asked for
    args = ["run", spec_id, "--rows", ROW, "--weights", "released"]
    plan = runner.invoke(app, [*args, "--dry-run"], env={"COLUMNS": "400"})
    assert plan.exit_code == 0, plan.output
    text = " ".join(plan.output.split())
    assert "weights released vqa.pth for the vqa2 columns: download: `repro weights download vqa.pth`" in text
    assert "no checkpoint for the snli-ve columns: they stay empty" in text
    assert "no checkpoint for the nlvr2 columns: they stay empty" in text
    assert re.search(r"no training; evaluation ~[\d.]+ GPU-hours", text) and "repro submit` of each" in text

    path = released_path(released_named("vqa.pth"))
    _checkpoint(path, _vocab(sandbox), 4, task="vqa")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    out = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "key report" in out.output
    results = sandbox / "results" / "weights" / "released" / "ace-rpe" / spec_id
    record = json.loads(next(results.glob("*.json")).read_text())
    assert record["weights"] == {
        "weights": "released",
        "checkpoints": [{"columns": "vqa2", "checkpoint": "vqa.pth", "sha256": digest}],
        "empty": ["snli-ve", "nlvr2"],
    }
    assert record["metrics"] == {}  # at paper scale only the server scores VQA test-dev and test-std
    commands = [c for c in re.findall(r"`(repro submit [^`]+)`", out.output) if "--predictions" in c]
    assert sorted(c.split()[2] for c in commands) == ["vqa2-test-dev", "vqa2-test-std"], out.output
    answers = json.loads(Path(commands[0].split()[4]).read_text())
    assert len(answers) == 3 and {a["question_id"] for a in answers} == {900001, 900002, 900003}
    done = runner.invoke(app, [*commands[0].split()[1:], "--dry-run"])
    assert done.exit_code == 0 and "passed every check" in done.output, done.output


def test_a_snli_ve_file_is_scored_and_an_nlvr2_file_refused(sandbox, runner):
    from tests.families.ace_rpe.task_fixtures import write_task_files

    spec_id = "ace-rpe-table4-sota"
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    (folder / f"{spec_id}.yaml").write_text((REPO_DIR / "experiments" / "ace-rpe" / f"{spec_id}.yaml").read_text())
    specs.clear_cache()
    write_albef_files(sandbox / "data")
    write_task_files(sandbox / "data")
    path = sandbox / "mine" / "ve.pth"
    _checkpoint(path, _vocab(sandbox), 5, task="snli-ve")
    args = ["run", spec_id, "--rows", ROW, "--weights"]
    out = runner.invoke(app, [*args, f"snli={path}"], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    results = sandbox / "results" / "weights" / f"ve@{digest[:8]}" / "ace-rpe" / spec_id
    record = json.loads(next(results.glob("*.json")).read_text())
    assert sorted(record["metrics"]) == ["SNLI-VE dev", "SNLI-VE test"], record["metrics"]
    assert all(0.0 <= v <= 100.0 for v in record["metrics"].values())
    assert record["weights"]["empty"] == ["vqa2", "nlvr2"]
    out = runner.invoke(app, [*args, f"nlvr2={path}", "--force"], env={"COLUMNS": "400"})
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "a nlvr2 checkpoint is not read here" in " ".join(out.output.split())
