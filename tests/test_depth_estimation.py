"""GLPN-NYU depth maps (`repro prepare depth-maps`) with a tiny random GLPN, then depth into a feature store."""

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import GLPNConfig, GLPNForDepthEstimation

from repro.cli import app
from repro.data.store import FeatureStore, FeatureStoreWriter
from repro.datasets import depth_estimation


@pytest.fixture
def tiny_glpn(sandbox):
    torch.manual_seed(0)
    config = GLPNConfig(
        num_encoder_blocks=4,
        depths=[1, 1, 1, 1],
        sr_ratios=[8, 4, 2, 1],
        hidden_sizes=[8, 16, 24, 32],
        num_attention_heads=[1, 1, 1, 1],
        mlp_ratios=[2, 2, 2, 2],
        decoder_hidden_size=16,
        max_depth=10,
    )
    folder = sandbox / "data" / depth_estimation.GLPN_FOLDER
    GLPNForDepthEstimation(config).save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_depth_maps_then_depth_features(runner, sandbox, tiny_glpn):
    images = sandbox / "val2014"
    images.mkdir()
    rng = np.random.default_rng(0)
    for image_id, (w, h) in {42: (80, 60), 73: (50, 70)}.items():
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(
            images / f"COCO_val2014_{image_id:012d}.jpg"
        )
    result = runner.invoke(app, ["prepare", "depth-maps", "--source", str(images)])
    assert result.exit_code == 0, result.output
    out = sandbox / "data" / "prepared" / "depth-maps" / "val2014"
    depth = np.asarray(Image.open(out / "COCO_val2014_000000000042.png"))
    assert depth.dtype == np.uint8 and depth.shape == (60, 80)  # the image's size, one channel

    # the same values as the model gives directly, on the fixed 0..max_depth scale
    model, processor = depth_estimation.load_estimator(tiny_glpn)
    with Image.open(images / "COCO_val2014_000000000042.jpg") as img:
        expected = depth_estimation.to_gray(depth_estimation.estimate(model, processor, img), 10.0)
    assert np.array_equal(depth, expected)

    store = sandbox / "val.store"
    with FeatureStoreWriter(store, 2, max_boxes=3, dim=4) as w:
        w.add(42, np.ones((2, 4)), np.array([[0, 0, 40, 30], [40, 30, 80, 60]], np.float32), 80, 60)
        w.add(73, np.ones((1, 4)), np.array([[0, 0, 50, 70]], np.float32), 50, 70)
    result = runner.invoke(app, ["prepare", "depth", "--store", str(store), "--source", str(out)])
    assert result.exit_code == 0, result.output
    item = FeatureStore.open(store).get(42)
    region = depth[0:30, 0:40].astype(np.int64)
    assert item["depth_mode"][0] == np.bincount(region.ravel(), minlength=256).argmax()
    peak = int(item["depth_peak"][0])
    assert item["depth_mean"][0] == pytest.approx(region[region // 16 == peak].mean(), abs=1e-3)
    assert item["depth_hist"][0].sum() == pytest.approx(1.0, abs=1e-2) and item["depth_mean"][2] == 0


def test_missing_weights_is_one_error(runner, sandbox):
    images = sandbox / "imgs"
    images.mkdir()
    Image.new("RGB", (32, 32)).save(images / "a_1.png")
    result = runner.invoke(app, ["prepare", "depth-maps", "--source", str(images)])
    assert result.exit_code != 0 and "repro download glpn-nyu" in result.output and "Traceback" not in result.output


def test_images_of_one_size_go_through_glpn_together_with_each_map_as_alone(sandbox, tiny_glpn, monkeypatch):
    images = sandbox / "imgs"
    images.mkdir()
    rng = np.random.default_rng(1)
    sizes = {1: (64, 48), 2: (64, 48), 3: (40, 72), 4: (64, 48)}
    for image_id, (w, h) in sizes.items():
        Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(images / f"img_{image_id}.png")
    passes = []
    real = depth_estimation.estimate_batch
    monkeypatch.setattr(
        depth_estimation, "estimate_batch", lambda m, p, batch: passes.append(len(batch)) or real(m, p, batch)
    )
    out = depth_estimation.depth_maps(images, sandbox / "maps", weights=tiny_glpn, batch_size=2)
    assert sorted(passes) == [1, 1, 2]  # the three 64x48 images as 2 + 1, the 40x72 one alone
    model, processor = depth_estimation.load_estimator(tiny_glpn)
    for image_id, (w, h) in sizes.items():
        with Image.open(images / f"img_{image_id}.png") as img:
            alone = depth_estimation.to_gray(real(model, processor, [img])[0], 10.0)
        written = np.asarray(Image.open(out / f"img_{image_id}.png"))
        assert written.shape == (h, w) and np.array_equal(written, alone), image_id
