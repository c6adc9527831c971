"""Paper-scale inputs: the released imdb and LMDB layouts, FastText vectors, and the missing-file message."""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pytest

from repro import specs
from repro.cli import app
from repro.data.store import FeatureStore
from repro.errors import ReproError
from repro.families.sa_m4c.data import image_key, read_ocr
from repro.families.sa_m4c.prepare import imdb_ocr, missing_input, read_imdb, store_from_lmdb, write_ocr_json
from repro.paths import REPO_DIR
from tests.families.sa_m4c.paper_fixtures import write_fasttext_model

RECORD = {
    "image_id": "003a8ae2ef43b901",
    "question_id": 34602,
    "question": "what is written on the sign?",
    "ocr_tokens": ["STOP", "here"],
    "ocr_normalized_boxes": np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.9, 0.6]], dtype=np.float32),
    "feature_path": "train/003a8ae2ef43b901.npy",
}


@pytest.mark.parametrize("layout", ["header-array", "dict"])
def test_imdb_files_of_both_layouts_give_ocr_in_the_rosetta_layout(tmp_path, layout):
    path = tmp_path / "imdb_val_ocr_en.npy"
    if layout == "dict":
        np.save(path, np.array({"metadata": {"version": 1}, "data": [RECORD, {**RECORD, "question_id": 1}]}))
    else:
        np.save(path, np.array([{"create_time": "x", "version": 1}, RECORD], dtype=object))
    ocr = imdb_ocr(read_imdb(path), path)
    assert list(ocr) == ["003a8ae2ef43b901"] and ocr["003a8ae2ef43b901"][0] == ["STOP", "here"]
    write_ocr_json(ocr, tmp_path / "ocr.json")
    tokens, boxes = read_ocr(tmp_path / "ocr.json")["003a8ae2ef43b901"]
    assert tokens == ["STOP", "here"] and np.allclose(boxes, RECORD["ocr_normalized_boxes"], atol=1e-6)


def test_bad_imdb_is_one_clear_error(tmp_path):
    path = tmp_path / "imdb.npy"
    path.write_bytes(b"not numpy")
    with pytest.raises(ReproError, match="unreadable imdb"):
        read_imdb(path)
    np.save(path, np.array([{**RECORD, "ocr_tokens": ["a"]}], dtype=object))
    with pytest.raises(ReproError, match="1 OCR tokens but 2 boxes"):
        imdb_ocr(read_imdb(path), path)


def test_lmdb_features_become_a_feature_store(tmp_path):
    lmdb = pytest.importorskip("lmdb")
    path = tmp_path / "detectron.lmdb"
    env = lmdb.open(str(path), map_size=1 << 24)
    keys = [b"train/aaa.npy", b"train/bbb.npy"]
    with env.begin(write=True) as txn:
        txn.put(b"keys", pickle.dumps(keys))
        for n, key in enumerate(keys):
            item = {
                "features": np.full((3 + n, 8), n + 1, dtype=np.float32),
                "bbox": np.tile(np.array([[1, 2, 30, 40]], dtype=np.float32), (3 + n, 1)),
                "image_width": 640,
                "image_height": 480,
            }
            txn.put(key, pickle.dumps(item))
    env.close()
    store = FeatureStore.open(store_from_lmdb(path, tmp_path / "val.store", {"bbb"}, max_boxes=5))
    assert len(store) == 1
    got = store.get(image_key("bbb"))
    assert got["count"] == 4 and got["width"] == 640 and got["features"][0, 0] == 2
    assert np.allclose(got["boxes"][0], [1, 2, 30, 40])


def test_fasttext_vectors_from_a_model_in_the_official_binary_format(tmp_path):
    pytest.importorskip("fasttext")
    from repro.families.sa_m4c.data import FastTextVectors

    vectors = FastTextVectors(write_fasttext_model(tmp_path, "stop sign exit door open closed".split(), dim=8))
    assert vectors.dim == 8 and vectors("stop").shape == (8,)
    rows = vectors.model.get_input_matrix()
    assert rows.shape == (7 + 2000, 8) and vectors.model.get_words()[:2] == ["stop", "sign"]
    _, ids = vectors.model.get_subwords("stop")
    assert len(ids) > 1 and np.allclose(vectors("stop"), rows[ids].mean(0))  # the word's row and its n-grams'
    assert np.abs(vectors("stopp")).sum() > 0  # subwords give unseen OCR tokens a vector, as FastText does
    with pytest.raises(ReproError, match="missing"):
        FastTextVectors(tmp_path / "absent.bin")


def test_paper_scale_names_the_missing_file_and_its_command(sandbox, runner):
    folder = sandbox / "experiments" / "sa-m4c"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "sa-m4c" / "sa-m4c-table1-textvqa.yaml", folder)
    specs.clear_cache()
    path, command = missing_input("google", "resnext-152")
    assert path.name == "TextVQA_0.5.1_train.json" and command == "repro download textvqa"
    raw = sandbox / "data" / "textvqa"
    raw.mkdir(parents=True)
    for split in ("train", "val", "test"):
        (raw / f"TextVQA_0.5.1_{split}.json").write_text('{"data": []}')
    out = runner.invoke(app, ["run", "sa-m4c-table1-textvqa"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "bert-base-uncased" in out.output and "repro download bert-base-uncased" in out.output
    dry = runner.invoke(app, ["run", "sa-m4c-table1-textvqa", "--dry-run"], env={"COLUMNS": "200"})
    assert dry.exit_code == 0 and "estimated GPU-hours" in dry.output


def _lmdb(path, images: dict[str, int], dim: int = 8):
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(str(path), map_size=1 << 24)
    keys = [f"train/{i}.npy".encode() for i in images]
    with env.begin(write=True) as txn:
        txn.put(b"keys", pickle.dumps(keys))
        for key, n in zip(keys, images.values()):
            item = {
                "features": np.ones((n, dim), dtype=np.float32),
                "bbox": np.tile(np.array([[0, 0, 10, 10]], dtype=np.float32), (n, 1)),
                "image_width": 100,
                "image_height": 50,
            }
            txn.put(key, pickle.dumps(item))
    env.close()


def test_google_ocr_and_resnext_features_are_converted_once(sandbox):
    import json

    from repro.families.sa_m4c.data import OCR_FILES
    from repro.families.sa_m4c.prepare import prepare_paper

    data = sandbox / "data"
    (data / "textvqa").mkdir()
    (data / "textvqa-sam").mkdir()
    images = {"train": "aaa", "val": "bbb", "test": "ccc"}
    for split, image in images.items():
        question = {"question": "what?", "question_id": len(split), "image_id": image}
        (data / "textvqa" / f"TextVQA_0.5.1_{split}.json").write_text(json.dumps({"data": [question]}))
        np.save(data / "textvqa-sam" / f"tvqa_{split}_imdb.npy", np.array([{**RECORD, "image_id": image}]))
    for kind in ("obj", "ocr"):
        _lmdb(data / "textvqa-sam" / f"tvqa_trainval_{kind}.lmdb", {"aaa": 3, "bbb": 2})
        _lmdb(data / "textvqa-sam" / f"tvqa_test_{kind}.lmdb", {"ccc": 4})
    out = prepare_paper("google", "resnext-152")
    for split, image in images.items():
        assert read_ocr(out / OCR_FILES["google"].format(split=split))[image][0] == ["STOP", "here"]
        objects = FeatureStore.open(out / f"{split}.objects.store")
        assert len(objects) == 1 and image_key(image) in objects
    assert FeatureStore.open(out / "test.ocr.store").get(image_key("ccc"))["count"] == 4
    assert (out / "done.json").is_file() and prepare_paper("google", "resnext-152") == out


def test_a_paper_scale_row_reads_the_folder_of_its_ocr_and_detector_and_st_vqa_rows_are_refused(tmp_path):
    from repro.families.sa_m4c.prepare import row_root

    spec = specs.parse_spec(REPO_DIR / "experiments" / "sa-m4c" / "sa-m4c-table1-textvqa.yaml")
    rows = [r for r in spec.rows if r.config is not None]
    data = {"roots": {f"{r.config.ocr}-{r.config.det_backbone}": tmp_path / r.slug for r in rows}}
    textvqa = next(r for r in rows if not r.config.with_stvqa and r.config.ocr == "google")
    root = row_root(spec, textvqa.config, data)
    assert root == data["roots"][f"google-{textvqa.config.det_backbone}"]
    stvqa = next(r for r in rows if r.config.with_stvqa)
    with pytest.raises(ReproError, match="ST-VQA"):
        row_root(spec, stvqa.config, data)
