"""DSGANet depth histograms (§IV-A) per box and per grid cell, from PNG depth maps."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from repro.data.store import FeatureStore, FeatureStoreWriter
from repro.datasets.depth import add_depth_to_store, box_histograms, grid_histograms, load_depth_map, peak_gray_value
from repro.errors import ReproError


def brute_force(depth, x1, y1, x2, y2):
    counts = np.bincount((depth[y1:y2, x1:x2].ravel() // 16), minlength=16).astype(np.float64)
    return counts / counts.sum()


def test_histograms_match_a_direct_count():
    rng = np.random.default_rng(0)
    depth = rng.integers(0, 256, (60, 80), dtype=np.uint8)
    boxes = np.array([[0, 0, 80, 60], [10.2, 5.7, 30.1, 40.0], [79, 59, 80, 60], [40, 10, 41, 11]], np.float32)
    hist, peak = box_histograms(depth, boxes, 80, 60)
    regions = [(0, 0, 80, 60), (10, 5, 31, 40), (79, 59, 80, 60), (40, 10, 41, 11)]
    for h, p, r in zip(hist, peak, regions):
        expected = brute_force(depth, *r)
        np.testing.assert_allclose(h, expected, atol=1e-6)
        assert p == expected.argmax()
    assert hist.shape == (4, 16) and np.allclose(hist.sum(1), 1)


def test_peak_bin_and_gray_value():
    depth = np.zeros((10, 20), np.uint8)
    depth[:, 10:] = 200  # right half far away
    depth[0, :3] = 255
    hist, peak = box_histograms(depth, np.array([[0, 0, 10, 10], [10, 0, 20, 10]], np.float32), 20, 10)
    assert peak.tolist() == [0, 12]  # 200 // 16 = 12
    assert hist[0, 15] == pytest.approx(3 / 100)
    assert peak_gray_value(np.array([0, 12, 15])).tolist() == [7.5, 199.5, 247.5]


def test_depth_map_at_another_resolution_scales_boxes():
    depth = np.zeros((50, 100), np.uint8)
    depth[:, 50:] = 128
    hist, peak = box_histograms(depth, np.array([[400, 0, 800, 400]], np.float32), 800, 400)
    assert peak.tolist() == [8] and hist[0, 8] == pytest.approx(1.0)


def test_grid_cells_row_major():
    depth = np.zeros((4, 6), np.uint8)
    depth[:2, 3:] = 40
    depth[2:, :3] = 90
    depth[2:, 3:] = 250
    hist, peak = grid_histograms(depth, 2, 2)
    assert peak.tolist() == [0, 2, 5, 15]
    assert np.allclose(hist.max(1), 1.0)


def test_sixteen_bit_maps_are_rescaled(tmp_path):
    arr = np.array([[1000, 2000], [3000, 5000]], np.uint16)
    Image.fromarray(arr).save(tmp_path / "d.png")
    depth = load_depth_map(tmp_path / "d.png")
    assert depth.dtype == np.uint8 and depth.tolist() == [[0, 64], [128, 255]]


def test_add_depth_to_store_and_read_back(tmp_path):
    with FeatureStoreWriter(tmp_path / "val2014.store", 2, max_boxes=4, dim=8) as w:
        w.add(9, np.ones((2, 8), np.float32), np.array([[0, 0, 32, 32], [32, 0, 64, 32]], np.float32), 64, 32)
        w.add(25, np.ones((1, 8), np.float32), np.array([[0, 0, 64, 32]], np.float32), 64, 32)
    maps = tmp_path / "depth"
    maps.mkdir()
    left_right = np.zeros((32, 64), np.uint8)
    left_right[:, 32:] = 255
    Image.fromarray(left_right).save(maps / "COCO_val2014_000000000009.png")
    Image.fromarray(np.full((16, 32), 100, np.uint8)).save(maps / "COCO_val2014_000000000025.png")
    add_depth_to_store(tmp_path / "val2014.store", maps)
    store = FeatureStore.open(tmp_path / "val2014.store")
    item = store.get(9)
    assert item["depth_hist"].shape == (4, 16) and item["depth_hist"].dtype == np.float32
    assert item["depth_peak"].tolist() == [0, 15, 0, 0]
    assert not item["depth_hist"][2:].any()  # padded boxes stay zero
    assert store.get(25)["depth_peak"][0] == 6
    assert store.meta["extras"]["depth_hist"]["bins"] == 16


def test_missing_depth_maps_are_reported(tmp_path):
    with FeatureStoreWriter(tmp_path / "s.store", 1, max_boxes=2, dim=4) as w:
        w.add(7, np.ones((1, 4), np.float32), np.ones((1, 4), np.float32), 10, 10)
    (tmp_path / "depth").mkdir()
    with pytest.raises(ReproError, match="no depth map for 1 of 1 images"):
        add_depth_to_store(tmp_path / "s.store", tmp_path / "depth")
