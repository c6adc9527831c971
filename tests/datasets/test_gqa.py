"""`repro prepare gqa` / `gqa-features` on tiny files in GQA's released layouts."""

import json

import h5py
import numpy as np
import pytest

from repro.cli import app
from repro.data.store import FeatureStore
from repro.datasets import gqa


def _q(image, text, answer=None, structural="query"):
    r = {"imageId": image, "question": text, "isBalanced": True, "types": {"structural": structural}}
    if answer is not None:
        r.update(answer=answer, fullAnswer=f"{answer}.")
    return r


def _questions(root):
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "train_balanced_questions.json": {
            "05451384": _q("2370799", "Is the cup red?", "yes", "verify"),
            "201307251": _q("2370799", "What is on the table?", "cup"),
            "201307252": _q("2354786", "What is under the cup?", "table"),
        },
        "val_balanced_questions.json": {"30001": _q("2354786", "Is the table-cloth blue?", "no", "verify")},
        "testdev_balanced_questions.json": {"20968379": _q("n161313", "What is the man holding?", "bat")},
    }
    for name, data in files.items():
        (root / name).write_text(json.dumps(data))


def test_prepare_questions_keeps_string_ids_and_splits_binary_open(runner, sandbox):
    _questions(sandbox / "data" / "gqa")
    result = runner.invoke(app, ["prepare", "gqa"])
    assert result.exit_code == 0, result.output
    out = sandbox / "data" / "prepared" / "gqa"
    train = np.load(out / "train.questions.npz")
    assert train["question_key"].tolist() == ["05451384", "201307251", "201307252"]  # leading zero kept
    assert train["question_id"].tolist() == [5451384, 201307251, 201307252]
    assert train["answer_type"].tolist() == ["binary", "open", "open"]
    dev = np.load(out / "test-dev.questions.npz")
    assert dev["image_id"].tolist() == [gqa.N_OFFSET + 161313]
    answers = json.loads((out / "answer_vocab.json").read_text())
    assert sorted(answers) == ["cup", "no", "table", "yes"]  # train + val answers, not test-dev's "bat"
    assert train["target_index"][:, 0].tolist() == [answers.index("yes"), answers.index("cup"), answers.index("table")]
    assert "table" in json.loads((out / "token_vocab.json").read_text())


def test_prepare_features_from_h5(runner, sandbox):
    root = sandbox / "data" / "gqa-features"
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with h5py.File(root / "gqa_objects_0.h5", "w") as f:
        f["features"] = rng.random((2, 100, 2048), dtype=np.float32)
        f["bboxes"] = np.tile(np.array([10, 20, 50, 60], np.float32), (2, 100, 1))
    with h5py.File(root / "gqa_spatial_0.h5", "w") as f:
        f["features"] = rng.random((2, 2048, 7, 7), dtype=np.float32)
    objects = {
        "2370799": {"file": 0, "idx": 1, "width": 500, "height": 333, "objectsNum": 3},
        "n161313": {"file": 0, "idx": 0, "width": 640, "height": 480, "objectsNum": 5},
    }
    (root / "gqa_objects_info.json").write_text(json.dumps(objects))
    (root / "gqa_spatial_info.json").write_text(json.dumps({"n161313": {"file": 0, "idx": 0}}))
    result = runner.invoke(app, ["prepare", "gqa-features"])
    assert result.exit_code == 0, result.output
    stores = sandbox / "data" / "prepared" / "features" / "gqa-features"
    obj = FeatureStore.open(stores / "objects.store").get(2370799)
    assert obj["count"] == 3 and obj["boxes"][0].tolist() == [10, 20, 50, 60] and not obj["boxes"][3].any()
    with h5py.File(root / "gqa_spatial_0.h5") as f:
        cell = f["features"][0][:, 1, 2]  # row 1, column 2 of the 7 x 7 grid
    grid = FeatureStore.open(stores / "spatial.store").get(gqa.N_OFFSET + 161313)
    assert grid["count"] == 49 and (grid["width"], grid["height"]) == (640, 480)
    assert np.allclose(grid["features"][1 * 7 + 2], cell, atol=1e-3)
    assert grid["boxes"][-1].tolist() == [549, 411, 640, 480]  # the last cell ends at the image corner


def test_bad_image_id_is_one_error(tmp_path):
    with pytest.raises(Exception, match="neither a Visual Genome number"):
        gqa.image_number("x12")
