"""The memory-mapped feature store and the official feature layouts that feed it."""

from __future__ import annotations

import base64
import pickle

import numpy as np
import pytest

from repro.data.store import FeatureStore, FeatureStoreWriter
from repro.datasets.features import read_bottom_up_tsv, read_openvqa_npz, store_from_npz_dir, store_from_tsv
from repro.errors import ReproError

DIM = 16


def make_image(rng, image_id, n):
    w, h = int(rng.integers(200, 640)), int(rng.integers(200, 480))
    x1 = rng.uniform(0, w / 2, n)
    y1 = rng.uniform(0, h / 2, n)
    boxes = np.stack([x1, y1, x1 + rng.uniform(1, w / 2, n), y1 + rng.uniform(1, h / 2, n)], 1).astype(np.float32)
    return image_id, rng.standard_normal((n, DIM)).astype(np.float32), boxes, w, h


def test_roundtrip_padding_and_lookup(tmp_path):
    rng = np.random.default_rng(0)
    images = [make_image(rng, i * 7 + 3, n) for i, n in enumerate([1, 5, 10, 12])]
    with FeatureStoreWriter(tmp_path / "s.store", 6, max_boxes=10, dim=DIM) as w:
        for img in images:
            w.add(*img)
    store = FeatureStore.open(tmp_path / "s.store")
    assert len(store) == 4 and list(store.image_ids) == [3, 10, 17, 24]
    assert 17 in store and 4 not in store
    for image_id, feats, boxes, width, height in images:
        item = store.get(image_id)
        n = min(len(feats), 10)
        assert item["features"].dtype == np.float16 and item["features"].shape == (10, DIM)
        assert item["boxes"].dtype == np.float32 and item["boxes"].shape == (10, 4)
        assert item["count"] == n and (item["width"], item["height"]) == (width, height)
        np.testing.assert_allclose(item["features"][:n], feats[:n], rtol=1e-3, atol=1e-3)
        np.testing.assert_array_equal(item["boxes"][:n], boxes[:n])
        assert not item["features"][n:].any() and not item["boxes"][n:].any()
    with pytest.raises(ReproError, match="no features for image 4"):
        store.get(4)


def test_store_appears_only_when_complete(tmp_path):
    rng = np.random.default_rng(1)
    with pytest.raises(RuntimeError):
        with FeatureStoreWriter(tmp_path / "s.store", 3, max_boxes=4, dim=DIM) as w:
            w.add(*make_image(rng, 1, 2))
            raise RuntimeError("interrupted")
    assert not (tmp_path / "s.store").exists()
    assert list(tmp_path.iterdir()) == []


def test_rebuild_replaces_old_store(tmp_path):
    rng = np.random.default_rng(2)
    for ids in ([1, 2], [5]):
        with FeatureStoreWriter(tmp_path / "s.store", len(ids), max_boxes=4, dim=DIM) as w:
            for i in ids:
                w.add(*make_image(rng, i, 3))
    assert list(FeatureStore.open(tmp_path / "s.store").image_ids) == [5]
    assert [p.name for p in tmp_path.iterdir()] == ["s.store"]


def test_bad_input_is_a_clear_error(tmp_path):
    rng = np.random.default_rng(3)
    w = FeatureStoreWriter(tmp_path / "s.store", 1, max_boxes=4, dim=DIM)
    img = make_image(rng, 1, 2)
    with pytest.raises(ReproError, match="expected \\[n, 16\\]"):
        w.add(1, np.zeros((2, 8), np.float32), img[2], 10, 10)
    w.add(*img)
    with pytest.raises(ReproError, match="more than the 1 images"):
        w.add(*make_image(rng, 2, 2))
    w.abort()
    with pytest.raises(ReproError, match="not a feature store"):
        FeatureStore.open(tmp_path / "missing.store")


def test_store_pickles_without_copying_the_data(tmp_path):
    rng = np.random.default_rng(4)
    with FeatureStoreWriter(tmp_path / "s.store", 2, max_boxes=4, dim=DIM) as w:
        w.add(*make_image(rng, 1, 2))
        w.add(*make_image(rng, 2, 3))
    store = FeatureStore.open(tmp_path / "s.store")
    blob = pickle.dumps(store)
    assert len(blob) < 4096
    again = pickle.loads(blob)
    np.testing.assert_array_equal(again.get(2)["features"], store.get(2)["features"])


def tsv_row(image_id, feats, boxes, w, h):
    return "\t".join(
        [
            str(image_id),
            str(w),
            str(h),
            str(len(feats)),
            base64.b64encode(boxes.astype(np.float32).tobytes()).decode(),
            base64.b64encode(feats.astype(np.float32).tobytes()).decode(),
        ]
    )


def test_bottom_up_tsv_to_store(tmp_path):
    rng = np.random.default_rng(5)
    images = [make_image(rng, iid, 36) for iid in (9, 25, 30)]
    tsv = tmp_path / "trainval_resnet101_faster_rcnn_genome_36.tsv"
    tsv.write_text("\n".join(tsv_row(i, f, b, w, h) for i, f, b, w, h in images) + "\n")
    read = list(read_bottom_up_tsv(tsv, dim=DIM))
    assert [r.image_id for r in read] == [9, 25, 30]
    store = FeatureStore.open(store_from_tsv(tsv, tmp_path / "trainval.store", max_boxes=40, dim=DIM))
    item = store.get(25)
    assert item["count"] == 36
    np.testing.assert_array_equal(item["boxes"][:36], images[1][2])
    np.testing.assert_allclose(item["features"][:36], images[1][1], atol=2e-3)


def test_malformed_tsv_names_file_and_line(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("1\t10\t10\t1\tAAAA\n")
    with pytest.raises(ReproError, match=r"bad\.tsv:1: expected 6"):
        list(read_bottom_up_tsv(tsv))


def test_openvqa_npz_layout_to_store(tmp_path):
    rng = np.random.default_rng(6)
    folder = tmp_path / "train2014"
    folder.mkdir()
    images = {}
    for image_id, n in ((9, 10), (123456, 100), (42, 57)):
        _, feats, boxes, w, h = make_image(rng, image_id, n)
        images[image_id] = (feats, boxes, w, h)
        np.savez(
            folder / f"COCO_train2014_{image_id:012d}.jpg.npz", x=feats.T, bbox=boxes, num_bbox=n, image_h=h, image_w=w
        )
    one = read_openvqa_npz(folder / "COCO_train2014_000000000042.jpg.npz", dim=DIM)
    assert one.image_id == 42 and one.features.shape == (57, DIM)
    store = FeatureStore.open(store_from_npz_dir(folder, tmp_path / "train2014.store", dim=DIM))
    assert sorted(store.image_ids) == [9, 42, 123456]
    feats, boxes, w, h = images[123456]
    item = store.get(123456)
    assert item["count"] == 100 and (item["width"], item["height"]) == (w, h)
    np.testing.assert_array_equal(item["boxes"], boxes)
    np.testing.assert_allclose(item["features"], feats, atol=2e-3)


def test_npz_missing_key_is_reported(tmp_path):
    np.savez(tmp_path / "COCO_val2014_000000000001.jpg.npz", x=np.zeros((DIM, 2), np.float32))
    with pytest.raises(ReproError, match="missing key\\(s\\) bbox, image_w, image_h"):
        read_openvqa_npz(tmp_path / "COCO_val2014_000000000001.jpg.npz", dim=DIM)
