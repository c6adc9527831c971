"""`repro prepare tgif-qa`: PSAC's released HDF5 frame features -> a frame store the data interface reads."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from repro.cli import app
from repro.data.store import FeatureStore
from repro.datasets import tgif
from repro.datasets.tgif_features import STORE_FRAMES
from repro.families.psac.data import TgifTask, VideoFeatures, Vocab
from repro.families.psac.synthetic import GeneratorConfig, generate

DIM = 2048


def write_released_hdf5(path, videos: dict[int, np.ndarray]) -> None:
    """The released layout: one dataset per video, named str(key), float (frames, 2048)."""
    with h5py.File(path, "w") as fh:
        for key, frames in videos.items():
            fh.create_dataset(str(key), data=frames)


@pytest.fixture
def tgif_folders(sandbox, monkeypatch):
    """Question files (generated, official layout, keys 0..15: Count's own videos 8..15) and a tiny released
    feature file."""
    questions = generate(
        sandbox / "q",
        GeneratorConfig.from_mapping(
            {"train_videos": 6, "test_videos": 2, "frames": 8, "feature_dim": 4, "actions_per_video": 2, "max_count": 2}
        ),
    )
    monkeypatch.setenv("REPRO_TGIF_DIR", str(questions))
    rng = np.random.default_rng(0)
    # longer than N (sampled), shorter (padded at load time)
    lengths = [40, 3, 36, 12, 50, 1, 36, 20, 36, 8, 44, 36, 2, 30, 36, 60]
    videos = {key: rng.normal(size=(n, DIM)).astype(np.float32) for key, n in enumerate(lengths)}
    features = sandbox / "data" / "tgif-qa-features"
    features.mkdir(parents=True)
    write_released_hdf5(features / "TGIF_RESNET_pool5.hdf5", videos)
    return questions, videos


def test_prepare_reads_the_released_hdf5_into_a_frame_store(runner, tgif_folders, sandbox):
    questions, videos = tgif_folders
    out = runner.invoke(app, ["prepare", "tgif-qa"])
    assert out.exit_code == 0, out.output
    store_path = sandbox / "data" / "prepared" / "features" / "tgif-qa" / "resnet.store"
    store = FeatureStore.open(store_path)
    assert sorted(store.image_ids.tolist()) == list(videos) and store.dim == DIM
    item = store.get(0)  # 40 frames -> 36 equally spaced (linspace, end excluded)
    kept = np.linspace(0, 40, STORE_FRAMES, endpoint=False).astype(int)
    assert item["count"] == STORE_FRAMES
    np.testing.assert_allclose(item["features"], videos[0][kept], atol=1e-2, rtol=1e-2)
    assert store.get(1)["count"] == 3
    # the data interface reads it: 35 frames (paper), short clips zero-padded on the left
    vocab = Vocab({"<pad>": 0, "<unk>": 1}, {}, {})
    task = TgifTask(
        questions, "count", "Train", vocab, max_words=12, max_chars=6, frames=35,
        features=VideoFeatures.open(questions, store_path),
    )  # fmt: skip
    short = task.video(1)
    assert short.shape == (35, DIM) and short[:32].abs().sum() == 0
    np.testing.assert_allclose(short[32:].numpy(), videos[1], atol=1e-2, rtol=1e-2)
    again = runner.invoke(app, ["prepare", "tgif-qa"])  # current: not rebuilt
    assert again.exit_code == 0 and FeatureStore.open(store_path).meta == store.meta


def test_missing_files_are_named_with_where_to_get_them(runner, tgif_folders, sandbox):
    questions, _ = tgif_folders
    (questions / tgif.file_name("Train", "transition")).unlink()
    out = runner.invoke(app, ["prepare", "tgif-qa"])
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert "Train_transition_question.csv" in out.output and "raw.githubusercontent.com" in out.output
    shutil.rmtree(sandbox / "data" / "tgif-qa-features")
    out = runner.invoke(app, ["prepare", "tgif-qa"])
    assert out.exit_code != 0 and "TGIF_RESNET_pool5.hdf5" in out.output and "drive.google.com" in out.output


def test_a_file_not_in_the_released_layout_is_refused(runner, tgif_folders, sandbox):
    path = sandbox / "data" / "tgif-qa-features" / "TGIF_RESNET_pool5.hdf5"
    write_released_hdf5(path, {0: np.zeros((4, 512), np.float32)})
    out = runner.invoke(app, ["prepare", "tgif-qa"])
    assert out.exit_code != 0 and "expected (frames, 2048)" in out.output
    assert not (sandbox / "data" / "prepared" / "features" / "tgif-qa" / "resnet.store").exists()
