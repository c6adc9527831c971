"""Generated splits held as ready tensors (ready.py): the reader's items value for value, read back from their file."""

from __future__ import annotations

import pytest
import torch

from repro.families.base import RunContext, with_data
from repro.families.sa_m4c import ready
from repro.families.sa_m4c.splits import read_splits
from repro.specs import resolve
from tests.conftest import copy_spec

SPEC = "sa-m4c-table2-ablations"


@pytest.fixture
def spec_sandbox(sandbox):
    copy_spec(sandbox, "sa-m4c", SPEC)
    return sandbox


def _splits(row: str, seed: int, tmp_path, sizes: dict | None = None):
    spec = resolve(SPEC)
    settings = dict(spec.scales["smoke"])
    if sizes:
        settings["sizes"] = {**settings["sizes"], **sizes}
    r = spec.row(row)
    ctx = RunContext(spec, r, r.config, "smoke", settings, seed, tmp_path / "work", progress=False)
    return read_splits(with_data(ctx))


def _assert_same(dataset) -> None:
    for k in range(len(dataset)):
        held, computed = dataset[k], dataset.compute_item(k)
        assert held.keys() == computed.keys()
        for key in held:
            assert held[key].dtype == computed[key].dtype and torch.equal(held[key], computed[key]), (k, key)


@pytest.mark.parametrize("row", ["7 SA-M4C (ours)", "4 M4C-Random"])
def test_ready_items_are_the_readers_items(spec_sandbox, tmp_path, row):
    data = _splits(row, 3, tmp_path)
    for dataset in (data.train, data.val, data.test):  # test: no answers, so no targets
        assert dataset.ready is not None
        _assert_same(dataset)
    assert "targets" not in data.test[0] and "targets" in data.val[0]


def test_random_graph_is_drawn_per_seed_over_the_same_file(spec_sandbox, tmp_path):
    one, two = _splits("4 M4C-Random", 0, tmp_path), _splits("4 M4C-Random", 1, tmp_path)
    spatial = _splits("3 SA-M4C (ours)", 0, tmp_path)
    assert not torch.equal(one.train.ready.t["relations"], two.train.ready.t["relations"])
    assert torch.equal(one.train.ready.t["ocr_words"], spatial.train.ready.t["ocr_words"])
    assert not torch.equal(one.train.ready.t["relations"], spatial.train.ready.t["relations"])


def test_the_file_is_read_back_and_keyed_by_what_shapes_an_item(spec_sandbox, tmp_path, monkeypatch):
    first = _splits("7 SA-M4C (ours)", 0, tmp_path)
    files = sorted((first.train.features.objects.path.parent / "ready").glob("*.pt"))
    assert len(files) == 3  # train, val, test

    def refuse(dataset):
        raise AssertionError("built again although its file is there")

    with monkeypatch.context() as patched:
        patched.setattr(ready, "build", refuse)
        again = _splits("1 M4C†", 0, tmp_path)  # another row, the same items
    assert torch.equal(again.val.ready.t["targets"], first.val.ready.t["targets"])
    longer = _splits("7 SA-M4C (ours)", 0, tmp_path, sizes={"max_question_tokens": 12})
    assert longer.train[0]["question_ids"].shape == (12,)
    assert len(list((first.train.features.objects.path.parent / "ready").glob("*.pt"))) == 6
    _assert_same(longer.val)


def test_a_cut_file_is_built_again(spec_sandbox, tmp_path):
    first = _splits("7 SA-M4C (ours)", 0, tmp_path)
    folder = first.train.features.objects.path.parent / "ready"
    for f in folder.glob("*.pt"):
        f.write_bytes(f.read_bytes()[:100])
    again = _splits("7 SA-M4C (ours)", 0, tmp_path)
    _assert_same(again.val)
    assert all(f.stat().st_size > 100 for f in folder.glob("*.pt"))
