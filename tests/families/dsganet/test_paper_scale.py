"""DSGANet at paper scale on files in the real layouts (generated scenes standing in for VQA v2): the prepared
questions, object stores with depth added, BERT reading WordPiece ids; what is missing is named."""

from __future__ import annotations

import json
import shutil

import pytest

from repro import specs
from repro.cli import app
from repro.datasets.vqa import prepare_vqa
from repro.families.dsganet import build
from repro.families.dsganet import data as dsganet_data
from repro.families.dsganet.synthetic import GeneratorConfig, generate
from repro.paths import REPO_DIR

CFG = GeneratorConfig(seed=5, train_images=40, val_images=4, questions_per_image=4, feature_dim=8)
SPEC = "dsganet-table6-relations"
TINY = [
    "sizes.d_model=16",
    "sizes.layers=1",
    "sizes.heads=2",
    "sizes.ffn=16",
    "sizes.spatial_dim=8",
    "sizes.flat_out=16",
    "sizes.flat_mlp=8",
    "sizes.embed_dim=8",
    "sizes.feature_dim=8",
    "sizes.dropout=0.0",
    "sizes.bert_layers=1",
    "sizes.bert_hidden=16",
    "sizes.bert_heads=2",
    "sizes.bert_ffn=16",
    "recipe.epochs=1",
    "recipe.batch_size=8",
    "recipe.num_workers=0",
]


def _run(runner, *extra):
    return runner.invoke(app, ["run", SPEC, "--rows", "4", "--seeds", "0", *extra, *TINY], env={"COLUMNS": "200"})


@pytest.fixture
def release(sandbox):
    """The spec, and the generated files where a user's downloads and `repro prepare` put the real ones."""
    folder = sandbox / "experiments" / "dsganet"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "dsganet" / f"{SPEC}.yaml", folder)
    specs.clear_cache()
    paths = generate(sandbox / "generated", CFG)
    data = sandbox / "data"
    (data / "vqa2").mkdir()
    for key in ("train_questions", "train_annotations", "val_questions", "val_annotations"):
        shutil.copy(paths[key], data / "vqa2")
    stores = data / "prepared" / "features" / "openvqa-features"
    stores.mkdir(parents=True)
    shutil.copytree(paths["train_features"], stores / "train2014.store")
    shutil.copytree(paths["val_features"], stores / "val2014.store")
    return data


def test_paper_scale_names_what_is_missing_then_trains_with_wordpiece_ids(release, runner):
    out = _run(runner)
    assert out.exit_code == 2 and "repro prepare vqa2" in out.output and "Traceback" not in out.output

    prepare_vqa("vqa2", release / "vqa2", release / "prepared" / "vqa2", glove=None)
    meta = release / "prepared" / "features" / "openvqa-features" / "val2014.store" / "meta.json"
    with_depth = meta.read_text()
    meta.write_text(json.dumps({k: v for k, v in json.loads(with_depth).items() if k != "extras"}))
    out = _run(runner)
    assert out.exit_code == 2 and "no depth extras" in out.output and "repro prepare depth" in out.output
    meta.write_text(with_depth)

    out = _run(runner)
    assert out.exit_code == 2 and "repro download bert-base-uncased" in out.output

    questions = json.loads(next((release / "vqa2").glob("*train2014_questions.json")).read_text())["questions"]
    words = sorted({w for q in questions for w in q["question"].lower().rstrip("?").split()})
    (release / "bert-base-uncased").mkdir()
    (release / "bert-base-uncased" / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words]))

    out = _run(runner, "--limit", "12")
    assert out.exit_code == 0, out.output
    assert "partial: first 12 questions per split" in out.output
    record = json.loads(next((release.parent / "results" / "variants").rglob("seeds/4.*seed0.json")).read_text())
    assert 0.0 <= record["metrics"]["Overall"] <= 100.0 and record["training"]["steps"] == 2  # 12 in batches of 8

    # what BERT read: WordPiece ids of the question, [CLS] first and [SEP] last
    config = {"arch": "dsganet", "features": "objects", "question_encoder": "bert", "daa": ["bbox", "depth"]}
    paths = dsganet_data.paper_data(specs.resolve(SPEC))
    split = dsganet_data.questions(
        build.as_config(config),
        build.model_sizes(config),
        dsganet_data.dataset(paths["prepared"], "val", paths["val_features"]),
    )
    ids = split[0]["bert_ids"].tolist()
    assert ids[0] == 2 and 3 in ids and all(i < len(words) + 4 for i in ids)
