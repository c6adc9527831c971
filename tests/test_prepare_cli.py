"""`repro prepare` end to end on fixture files laid out as the downloads leave them."""

from __future__ import annotations

import base64
import json

import numpy as np
from typer.testing import CliRunner

from repro.cli import app
from repro.data.store import FeatureStore
from repro.datasets.prepare import prepare
from tests._vqa_fixtures import write_glove, write_vqa2


def test_prepare_vqa2_from_data_dir_with_glove(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    write_vqa2(tmp_path / "vqa2" / "nested")
    (tmp_path / "glove-840b").mkdir()
    write_glove(tmp_path / "glove-840b" / "glove.840B.300d.txt", ["cat", "there"])
    result = CliRunner().invoke(app, ["prepare", "vqa2"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "prepared" / "vqa2"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"]["glove"] is True and manifest["stats"]["tokens_with_vectors"] == 2
    assert (out / "embeddings.npy").is_file()


def test_prepare_missing_download_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["prepare", "coco-qa"])
    assert result.exit_code == 2 and "repro download coco-qa" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(app, ["prepare", "nonsense"])
    assert result.exit_code == 2 and "cannot prepare 'nonsense'" in result.output


def test_prepare_feature_stores_and_skip_when_current(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    tsv_dir = tmp_path / "bottom-up-36" / "trainval_36"
    tsv_dir.mkdir(parents=True)
    rows = []
    for image_id in (9, 25):
        feats = rng.standard_normal((36, 8)).astype(np.float32)
        boxes = np.tile(np.array([[1, 2, 30, 40]], np.float32), (36, 1))
        rows.append(
            "\t".join(
                [
                    str(image_id),
                    "640",
                    "480",
                    "36",
                    base64.b64encode(boxes.tobytes()).decode(),
                    base64.b64encode(feats.tobytes()).decode(),
                ]
            )
        )
    (tsv_dir / "trainval_resnet101_faster_rcnn_genome_36.tsv").write_text("\n".join(rows) + "\n")
    [out] = prepare("bottom-up-36", dim=8)
    assert out == tmp_path / "prepared" / "features" / "bottom-up-36" / "trainval.store"
    assert list(FeatureStore.open(out).image_ids) == [9, 25]
    stamp = (out / "meta.json").stat().st_mtime_ns
    prepare("bottom-up-36", dim=8)
    assert (out / "meta.json").stat().st_mtime_ns == stamp  # current: not rebuilt

    npz_dir = tmp_path / "openvqa-features" / "val2014"
    npz_dir.mkdir(parents=True)
    np.savez(
        npz_dir / "COCO_val2014_000000000042.jpg.npz",
        x=rng.standard_normal((8, 12)).astype(np.float32),
        bbox=np.ones((12, 4), np.float32),
        num_bbox=12,
        image_h=300,
        image_w=500,
    )
    [store] = prepare("openvqa-features", dim=8)
    assert store.name == "val2014.store" and FeatureStore.open(store).get(42)["count"] == 12


def test_a_new_prepare_target_is_one_entry_of_the_table(tmp_path, monkeypatch):
    from repro.datasets import prepare as preparing

    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    (tmp_path / "toy-set").mkdir()

    def toy(request: preparing.Request) -> list:
        out = preparing.prepared_dir(request.name, request.root)
        out.mkdir(parents=True)
        return [out] if request.folder.is_dir() else []

    monkeypatch.setitem(preparing.TARGETS, "toy-set", toy)
    result = CliRunner().invoke(app, ["prepare", "toy-set"])
    assert result.exit_code == 0, result.output
    assert "prepared" in result.output and (tmp_path / "prepared" / "toy-set").is_dir()
