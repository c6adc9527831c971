"""Gradient accumulation (`recipe.accumulate`): a step's batch in several forward passes gives the step of the whole
batch, to float rounding, for summed and averaged losses and for an epoch's short last step."""

import pytest
import torch

from repro.errors import ReproError
from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import fit
from repro.train.distributed import use_device
from repro.train.ensemble import fit_ensemble
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA

SIZES = {**TINY_SIZES, "dropout": 0.0}  # dropout draws its masks per pass: off, so passes and batches compare


def recipe(tmp_path, loss: str, **fields):
    path = tmp_path / f"{loss}.yaml"
    path.write_text(
        "optimizer: {name: sgd, momentum: 0.9}\nschedule: {name: constant, base_lr: 0.05}\n"
        f"epochs: 2\nbatch_size: 8\nloss: {loss}\nseed: 1\n"
    )
    return load_recipe(str(path)).replace(**fields)


def new_model():
    torch.manual_seed(0)
    return build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=SIZES)


@pytest.fixture(autouse=True)
def _on_the_cpu():
    with use_device("cpu"):
        yield


@pytest.mark.parametrize("loss, accumulate", [("bce-sum", 2), ("bce-mean", 2), ("bce-mean", 4)])
def test_accumulated_steps_equal_the_whole_batch(tmp_path, loss, accumulate):
    """3 steps an epoch, the last of 6 samples: passes of 4 and 2 samples (or 2, 2 and 2), a mean weighted by each
    pass's share of the step's samples (an even 1 / accumulate would get the short step wrong)."""
    data = TinyVQA(22)
    whole, passes = new_model(), new_model()
    fit(whole, data, recipe(tmp_path, loss), tmp_path / "whole", progress=False)
    state = fit(passes, data, recipe(tmp_path, loss, accumulate=accumulate), tmp_path / "passes", progress=False)
    assert state.step == 6 and state.global_batch == 8
    moved = 0.0
    start = new_model().state_dict()
    for (name, a), b in zip(whole.state_dict().items(), passes.state_dict().values()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name
        moved = max(moved, float((a - start[name]).abs().max()))
    assert moved > 1e-2  # the steps moved the weights: equal because the gradients are, not because nothing moved


def test_accumulation_differs_from_a_smaller_batch(tmp_path):
    """The accumulated step is the whole batch's, not each pass stepped on its own (a batch of 4)."""
    data = TinyVQA(16)
    passes, small = new_model(), new_model()
    fit(passes, data, recipe(tmp_path, "bce-mean", accumulate=2), tmp_path / "passes", progress=False)
    fit(small, data, recipe(tmp_path, "bce-mean", batch_size=4), tmp_path / "small", progress=False)
    assert any(not torch.allclose(a, b, atol=1e-4) for a, b in zip(passes.parameters(), small.parameters()))


def test_an_accumulate_that_does_not_split_the_batch_is_refused(tmp_path):
    with pytest.raises(ReproError, match=r"per-process batch 8 does not split into recipe.accumulate=3"):
        fit(new_model(), TinyVQA(8), recipe(tmp_path, "bce-sum", accumulate=3), tmp_path / "run", progress=False)
    with pytest.raises(ReproError, match="accumulate: must be at least 1"):
        recipe(tmp_path, "bce-sum", accumulate=0)


def test_seeds_trained_together_refuse_accumulation(tmp_path):
    recipes = [recipe(tmp_path, "bce-sum", accumulate=2, seed=s) for s in (0, 1)]
    with pytest.raises(ReproError, match="one pass"):
        fit_ensemble([new_model(), new_model()], TinyVQA(8), recipes, [tmp_path / "a", tmp_path / "b"], progress=False)
