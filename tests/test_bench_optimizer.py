"""`python -m benchmarks.bench_optimizer` and what it measures: the trainer's optimisers take torch's multi-tensor
(foreach) kernels, which give the one-tensor loop's values bit for bit; no speed is asserted."""

from __future__ import annotations

import copy

import pytest
import torch

from benchmarks import bench_optimizer
from repro.train.trainer import build_optimizer
from tests.test_train_resume import RECIPE


@pytest.fixture
def recipe(tmp_path):
    from repro.families import load_recipe

    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    return load_recipe(str(path))


@pytest.mark.parametrize(
    "optimizer",
    [
        {"name": "adam", "betas": [0.9, 0.98], "eps": 1.0e-9},
        {"name": "adamw", "weight_decay": 0.01},
        {"name": "adamax", "betas": [0.9, 0.999]},
        {"name": "sgd", "momentum": 0.9, "weight_decay": 1.0e-4},
    ],
)
def test_every_optimiser_is_built_foreach_and_steps_as_the_loop_does_bit_for_bit(recipe, optimizer):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    built = build_optimizer(recipe.replace(optimizer=optimizer), model.parameters())
    assert all(group["foreach"] is True for group in built.param_groups)
    out = bench_optimizer.measure(model, recipe.replace(optimizer=optimizer), reps=3, rounds=2)
    assert out["bit_equal"] and out["tensors"] == 4 and out["parameters"] == 8 * 32 + 32 + 32 * 4 + 4
    assert out["loop_ms"] > 0 and out["foreach_ms"] > 0


def test_the_comparison_would_see_values_that_differ(recipe, monkeypatch):
    real = bench_optimizer._optimizer

    def lr_off_on_one_side(model, recipe, foreach):
        built = real(model, recipe, foreach)
        if foreach:
            for group in built.param_groups:
                group["lr"] *= 2
        return built

    monkeypatch.setattr(bench_optimizer, "_optimizer", lr_off_on_one_side)
    model = torch.nn.Linear(4, 4)
    assert not bench_optimizer.measure(copy.deepcopy(model), recipe, reps=2, rounds=1)["bit_equal"]
