"""A generated split held as ready tensors (repro.train.ready): the same batches, the same training, or left as is."""

import pytest
import torch
from torch.utils.data import Dataset, default_collate

from repro.families import load_recipe
from repro.train import fit
from repro.train.distributed import use_device
from repro.train.ensemble import fit_ensemble
from repro.train.ready import ReadyTensors, ready_tensors
from tests.test_train_ensemble import NO_DROPOUT, new_model, weights
from tests.test_train_resume import RECIPE
from tests.tiny_vqa import TinyVQA


@pytest.fixture(autouse=True)
def _on_the_cpu():
    with use_device("cpu"):
        yield


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    return load_recipe(str(path))


class Items(Dataset):
    """Items as the families' splits give them: tensors of several dtypes, Python ints and floats."""

    def __init__(self, n: int, extra=None):
        self.n, self.extra = n, extra

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        item = {
            "question_id": 100 + i,  # a Python int
            "weight": 0.5 * i,  # a Python float
            "features": torch.arange(6, dtype=torch.float16).reshape(2, 3) + i,
            "mask": torch.tensor([i % 2 == 0, True]),
            "tokens": torch.full((4,), i, dtype=torch.long),
        }
        if self.extra is not None:
            item.update(self.extra(i))
        return item


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a
    )


def test_a_batch_is_the_collated_items_in_values_dtypes_and_shapes():
    items = Items(1100)  # more than one chunk of the build
    ready = ready_tensors(items)
    assert isinstance(ready, ReadyTensors) and len(ready) == 1100
    for indices in ([5, 1099, 0, 512], [7], list(range(600, 700))):
        assert _equal(ready.batch(indices), default_collate([items[i] for i in indices]))
    stacked = ready.batch([[3, 4], [9, 1]])  # [seeds, batch] indices: each seed's batch, stacked
    assert _equal(stacked, {k: torch.stack(v) for k, v in _by_key([[3, 4], [9, 1]], items).items()})


def _by_key(rows, items):
    batches = [default_collate([items[i] for i in row]) for row in rows]
    return {k: [b[k] for b in batches] for k in batches[0]}


@pytest.mark.parametrize(
    "extra",
    [
        lambda i: {"caption": f"a caption {i}"},  # strings: a collate_fn's to tokenize
        lambda i: {"ragged": torch.zeros(1 + i % 3)},  # shapes that differ: a collate_fn's to pad
    ],
)
def test_a_split_whose_items_do_not_collate_into_tensors_is_left_as_it_is(extra):
    items = Items(10, extra)
    assert ready_tensors(items) is items


def test_a_split_larger_than_the_limit_stays_streamed():
    items = Items(100)
    assert ready_tensors(items, max_bytes=1000) is items
    assert isinstance(ready_tensors(items, max_bytes=10**6), ReadyTensors)


def test_training_on_ready_tensors_is_training_on_the_split(tmp_path, recipe):
    # Bit for bit, dropout included: the batches are the same and nothing draws from the global stream.
    data = TinyVQA(14)
    r = recipe.replace(seed=3, epochs=2)
    streamed, ready = new_model(3), new_model(3)
    a = fit(streamed, data, r, tmp_path / "streamed", progress=False)
    b = fit(ready, ready_tensors(data), r, tmp_path / "ready", progress=False)
    assert a.final_loss == b.final_loss and a.step == b.step == 4
    assert torch.equal(weights(streamed), weights(ready))


def test_seeds_trained_together_on_ready_tensors_train_as_on_the_split(tmp_path, recipe):
    data = TinyVQA(14)
    recipes = [recipe.replace(seed=s, epochs=2) for s in (5, 6)]
    runs = {}
    for name, split in (("streamed", data), ("ready", ready_tensors(data))):
        models = [new_model(r.seed, NO_DROPOUT) for r in recipes]
        fit_ensemble(models, split, recipes, [tmp_path / name / str(r.seed) for r in recipes], progress=False)
        runs[name] = [weights(m) for m in models]
    for streamed, ready in zip(runs["streamed"], runs["ready"]):
        assert torch.equal(streamed, ready)
