"""ace-rpe's image reads (`repro.families.ace_rpe.data.load_image`): an image read without augmentation is decoded
once a process and its pixels kept within a budget; a rewritten file is read again; augmented reads are never kept."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from PIL import Image

from repro.errors import ReproError
from repro.families.ace_rpe import data
from repro.families.ace_rpe.model import IMAGE_MEAN, IMAGE_STD


@pytest.fixture
def reads(monkeypatch):
    """The decodes `load_image` makes, counted, with an empty store of kept images."""
    monkeypatch.setattr(data, "_kept", {})
    monkeypatch.setattr(data, "_kept_bytes", 0)
    counted = []
    real = data._decode

    def counting(path, size, crop_scale):
        counted.append(path)
        return real(path, size, crop_scale)

    monkeypatch.setattr(data, "_decode", counting)
    return counted


def _png(path, colour):
    Image.new("RGB", (36, 36), colour).save(path)
    return path


def test_an_image_read_without_augmentation_is_decoded_once(tmp_path, reads):
    path = _png(tmp_path / "a.png", (200, 30, 30))
    first = data.load_image(path, 36)
    again = data.load_image(path, 36)
    assert len(reads) == 1 and torch.equal(first, again)
    data.load_image(path, 24)  # another size is another image
    assert len(reads) == 2
    with Image.open(path) as img:  # what ALBEF's test transform gives, to the last bit
        pixels = np.asarray(img.convert("RGB").resize((36, 36), Image.BICUBIC), dtype=np.float32) / 255.0
    mean, std = torch.tensor(IMAGE_MEAN)[:, None, None], torch.tensor(IMAGE_STD)[:, None, None]
    assert torch.equal(first, (torch.from_numpy(pixels).permute(2, 0, 1) - mean) / std)


def test_each_read_returns_its_own_tensor(tmp_path, reads):
    path = _png(tmp_path / "a.png", (200, 30, 30))
    first = data.load_image(path, 36)
    first.zero_()  # a caller writing into its tensor
    assert len(reads) == 1 and not torch.equal(first, data.load_image(path, 36))


def test_a_rewritten_file_is_read_again_and_a_broken_one_still_fails(tmp_path, reads):
    path = _png(tmp_path / "a.png", (200, 30, 30))
    red = data.load_image(path, 36)
    _png(path, (30, 30, 200))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    blue = data.load_image(path, 36)
    assert len(reads) == 2 and not torch.equal(red, blue)
    path.write_bytes(b"not a png")
    with pytest.raises(ReproError, match="cannot read the image"):
        data.load_image(path, 36)


def test_augmented_reads_are_never_kept(tmp_path, reads):
    path = _png(tmp_path / "a.png", (200, 30, 30))
    data.load_image(path, 36, crop_scale=0.5)
    data.load_image(path, 36, crop_scale=0.5)
    assert len(reads) == 2 and not data._kept


def test_images_beyond_the_budget_are_decoded_each_time(tmp_path, reads, monkeypatch):
    one = 36 * 36 * 3  # bytes of a 36 px image's uint8 pixels
    monkeypatch.setattr(data, "KEEP_BYTES", 2 * one)
    paths = [_png(tmp_path / f"{i}.png", (10 * i, 0, 0)) for i in range(3)]
    for _ in range(2):
        for path in paths:
            data.load_image(path, 36)
    assert len(reads) == 4  # the first two kept, the third read both times
    assert data._kept_bytes == 2 * one


class _KeptBytes(torch.utils.data.Dataset):
    """Reads its images and returns what the reading process keeps after each read."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        data.load_image(self.paths[i], 36)
        return torch.tensor([os.getpid(), data._kept_bytes])


def test_a_loaders_workers_share_the_budget_rather_than_each_keeping_all_of_it(tmp_path, reads, monkeypatch):
    one = 36 * 36 * 3
    monkeypatch.setattr(data, "KEEP_BYTES", 4 * one)  # forked workers inherit it
    paths = [_png(tmp_path / f"{i}.png", (10 * i, 0, 0)) for i in range(8)]
    if "fork" not in torch.multiprocessing.get_all_start_methods():
        pytest.skip("the workers see the test's budget only when forked; this platform cannot fork (Windows)")
    loader = torch.utils.data.DataLoader(_KeptBytes(paths), batch_size=1, num_workers=2, multiprocessing_context="fork")
    kept: dict[int, int] = {}
    for pid, nbytes in (row[0].tolist() for row in loader):
        kept[pid] = max(kept.get(pid, 0), nbytes)
    assert len(kept) == 2 and all(v == 2 * one for v in kept.values())  # four images each read: two kept by each
    for path in paths:  # the process itself keeps its whole budget
        data.load_image(path, 36)
    assert data._kept_bytes == 4 * one
