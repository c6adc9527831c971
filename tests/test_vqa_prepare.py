"""VQA-family preparation from fixtures in the official layouts, and the torch Dataset over it."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from repro.data.store import FeatureStore, FeatureStoreWriter
from repro.datasets.vqa import load_split, prepare_vqa
from repro.datasets.vqa_dataset import VQADataset
from repro.datasets.vqa_text import encode, normalize_answer, soft_score, tokenize
from repro.errors import ReproError
from tests._vqa_fixtures import write_cocoqa, write_glove, write_vg, write_vqa2


def test_tokenize_as_mcan():
    assert tokenize("What's the man's-shirt color?") == ["whats", "the", "mans", "shirt", "color"]
    assert tokenize('Is the "sign" (red/white)?') == ["is", "the", "sign", "red", "white"]


def test_encode_pads_truncates_and_marks_unknown():
    vocab = {"PAD": 0, "UNK": 1, "a": 2, "b": 3}
    ids = encode(["a", "zzz", "b"], vocab, 14)
    assert ids.tolist() == [2, 1, 3] + [0] * 11
    assert encode(["a"] * 20, vocab, 14).tolist() == [2] * 14


@pytest.mark.parametrize(
    "raw, norm",
    [
        ("Two", "2"),
        ("a dog", "dog"),
        ("dont", "don't"),
        ("1,000", "1000"),
        ("yes.", "yes"),
        ("the red-white bus", "red white bus"),
        ("3.5", "3.5"),
    ],
)
def test_answer_normalisation(raw, norm):
    assert normalize_answer(raw) == norm


def test_soft_scores():
    assert [soft_score(c) for c in range(6)] == [0.0, 0.3, 0.6, 0.9, 1.0, 1.0]


@pytest.fixture
def vqa2(tmp_path):
    src = tmp_path / "vqa2"
    items = write_vqa2(src)
    words = ["what", "the", "is", "there", "a", "cat", "color", "shirt"]
    vectors = write_glove(tmp_path / "glove.txt", words)
    return src, items, tmp_path / "glove.txt", vectors


def test_prepare_vqa2_vocabularies_tokens_targets(tmp_path, vqa2):
    src, items, glove, vectors = vqa2
    out = prepare_vqa("vqa2", src, tmp_path / "prepared" / "vqa2", glove)
    answers = json.loads((out / "answer_vocab.json").read_text())
    assert answers == ["yes"]  # 'yes' 9x kept; '2' (two + 2) 8x dropped by MCAN's > 8 rule
    assert json.loads(
        (prepare_vqa("vqa2", src, tmp_path / "p8", None, answer_min_count=8) / "answer_vocab.json").read_text()
    ) == ["yes", "2"]
    vocab = json.loads((out / "token_vocab.json").read_text())
    assert vocab["PAD"] == 0 and vocab["UNK"] == 1 and vocab["whats"] == 2
    assert "zebras" in vocab  # MCAN's vocabulary covers the test questions too
    train = load_split(out, "train")
    assert train["tokens"].shape == (12, 14)
    assert train["tokens"][0].tolist()[:6] == [vocab[w] for w in ["whats", "the", "mans", "shirt", "color"]] + [0]
    test = load_split(out, "test")
    assert "target_index" not in test and (test["tokens"][0] != 0).sum() == 14  # truncated at 14
    assert set(load_split(out, "test-dev")["question_id"]) == {9000, 9001}
    # soft scores: 'yes' given by 4 of 10 -> 1.0 for the 'yes' questions
    assert train["target_score"][0].max() == pytest.approx(1.0)
    emb = np.load(out / "embeddings.npy")
    assert emb.shape == (len(vocab), 300) and emb.dtype == np.float32
    np.testing.assert_allclose(emb[vocab["cat"]], vectors["cat"], atol=1e-5)
    assert not emb[vocab["PAD"]].any() and not emb[vocab["whats"]].any()  # no GloVe vector -> zeros
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"]["answer_min_count"] == 9 and manifest["toolkit_version"]
    assert {os.path.basename(s["path"]) for s in manifest["sources"]} >= {
        "v2_OpenEnded_mscoco_train2014_questions.json",
        "v2_mscoco_val2014_annotations.json",
        "glove.txt",
    }
    assert all(len(s["sha256"]) == 64 for s in manifest["sources"])


def test_targets_count_normalised_answers(tmp_path, vqa2):
    src, items, _, _ = vqa2
    out = prepare_vqa("vqa2", src, tmp_path / "p", None, answer_min_count=1)
    answers = json.loads((out / "answer_vocab.json").read_text())
    train = load_split(out, "train")
    # question 0 answers: 4x yes, 2x no, 1x maybe, 3x 'a dog' (normalised to 'dog'); vocab has yes, 2, red
    row = {answers[i]: s for i, s in zip(train["target_index"][0], train["target_score"][0]) if i >= 0}
    assert row == {"yes": pytest.approx(1.0)}
    q9 = list(train["question_id"]).index(1009)  # mc 'two' x4 -> normalised '2'
    row = {answers[i]: s for i, s in zip(train["target_index"][q9], train["target_score"][q9]) if i >= 0}
    assert row == {"2": pytest.approx(1.0)}


def test_prepared_folder_is_reused_then_rebuilt_when_a_source_changes(tmp_path, vqa2):
    src, _, glove, _ = vqa2
    out = prepare_vqa("vqa2", src, tmp_path / "p", glove)
    stamp = (out / "manifest.json").stat().st_mtime_ns
    prepare_vqa("vqa2", src, out, glove)
    assert (out / "manifest.json").stat().st_mtime_ns == stamp
    qfile = src / "v2_OpenEnded_mscoco_val2014_questions.json"
    data = json.loads(qfile.read_text())
    data["questions"] = data["questions"][:2]
    qfile.write_text(json.dumps(data))
    prepare_vqa("vqa2", src, out, glove)
    assert len(load_split(out, "val")["question_id"]) == 2
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_vg_split_joins_vqa2(tmp_path, vqa2):
    src, _, _, _ = vqa2
    write_vg(tmp_path / "vg-qa")
    out = prepare_vqa("vqa2", src, tmp_path / "p", None, vg_dir=tmp_path / "vg-qa")
    vg = load_split(out, "vg")
    assert vg["question_id"].tolist() == [7000001] and vg["image_id"].tolist() == [2]
    assert "giraffe" in json.loads((out / "token_vocab.json").read_text())
    assert json.loads((out / "answer_vocab.json").read_text()) == ["yes"]  # VG does not vote on answers


def test_vqa1_file_names(tmp_path):
    write_vqa2(tmp_path / "vqa1", prefix="")
    out = prepare_vqa("vqa1", tmp_path / "vqa1", tmp_path / "p", None)
    assert len(load_split(out, "train")["question_id"]) == 12


def test_cocoqa(tmp_path):
    write_cocoqa(tmp_path / "coco-qa")
    out = prepare_vqa("coco-qa", tmp_path / "coco-qa", tmp_path / "p", None)
    answers = json.loads((out / "answer_vocab.json").read_text())
    assert answers == sorted(["skateboard", "two", "red", "couch", "umbrella"])
    test = load_split(out, "test")
    assert test["image_id"].tolist() == [42, 9] and test["question_id"].tolist() == [0, 1]
    assert test["answer_type"].tolist() == ["location", "object"]
    assert [answers[i] for i in test["target_index"][:, 0]] == ["couch", "umbrella"]
    assert test["target_score"][:, 0].tolist() == [1.0, 1.0]


def test_bad_inputs_are_one_line_errors(tmp_path, vqa2):
    src, _, _, _ = vqa2
    with pytest.raises(ReproError, match="run repro download vqa2"):
        prepare_vqa("vqa2", tmp_path / "nowhere", tmp_path / "p", None)
    (src / "v2_mscoco_train2014_annotations.json").write_text('{"annotations": [\n{"question_id": 1,,}]}')
    with pytest.raises(ReproError, match=r"v2_mscoco_train2014_annotations\.json:2: not valid JSON"):
        prepare_vqa("vqa2", src, tmp_path / "p", None)
    assert not (tmp_path / "p").exists()
    with pytest.raises(ReproError, match="unknown VQA dataset"):
        prepare_vqa("gqa", src, tmp_path / "p", None)


def test_dataset_items_and_default_collate(tmp_path, vqa2):
    src, items, glove, _ = vqa2
    out = prepare_vqa("vqa2", src, tmp_path / "p", glove, answer_min_count=1)
    rng = np.random.default_rng(0)
    with FeatureStoreWriter(tmp_path / "train2014.store", 6, max_boxes=10, dim=32) as w:
        for image_id in range(1, 7):
            n = 3 + image_id
            boxes = np.tile(np.array([[10, 20, 110, 220]], np.float32), (n, 1))
            w.add(image_id, rng.standard_normal((n, 32)).astype(np.float32), boxes, 640, 480)
    store = FeatureStore.open(tmp_path / "train2014.store")
    ds = VQADataset(out, "train", store)
    assert len(ds) == 12 and ds.num_answers == len(ds.answer_vocab) and ds.embeddings.shape[1] == 300
    item = ds[1]
    assert item["question_id"] == 1001 and item["box_count"] == 3 + 2
    assert item["features"].dtype == torch.float32 and item["features"].shape == (10, 32)
    assert item["image_size"].tolist() == [640.0, 480.0] and item["boxes"][0].tolist() == [10, 20, 110, 220]
    assert item["target"].shape == (ds.num_answers,) and item["target"].max() == pytest.approx(1.0)
    batch = next(iter(DataLoader(ds, batch_size=4)))
    assert batch["tokens"].shape == (4, 14) and batch["tokens"].dtype == torch.int64
    assert batch["features"].shape == (4, 10, 32) and batch["target"].shape == (4, ds.num_answers)
    test_item = VQADataset(out, "test", store)[0]
    assert "target" not in test_item and test_item["question_id"] == 9000
    with pytest.raises(ReproError, match="no features for 1 image"):
        small = tmp_path / "small.store"
        with FeatureStoreWriter(small, 5, max_boxes=2, dim=4) as w:
            for image_id in range(1, 6):
                w.add(image_id, np.ones((1, 4), np.float32), np.ones((1, 4), np.float32), 5, 5)
        VQADataset(out, "train", FeatureStore.open(small))
