"""The plan's per-GPU memory estimate (repro.memory): weights, gradients, optimiser states and the activations
saved for backward, measured on the meta device."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from repro.memory import ALLOWANCE_GIB, GIB, estimate, optimizer_states, saved_bytes


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, batch):
        return self.net(batch["x"])


def test_optimizer_states_follow_the_recipe():
    assert optimizer_states({"name": "adam"}) == optimizer_states({"name": "adamw"}) == 2
    assert optimizer_states({"name": "adamax"}) == 2
    assert optimizer_states({"name": "sgd", "momentum": 0.9}) == 1
    assert optimizer_states({"name": "sgd"}) == 0


def test_a_toy_model_equals_the_hand_computation():
    """Linear(4, 8) saves its input x (4 floats a sample), ReLU its output (8), which the second Linear saves
    too (one storage, counted once); the weights are counted once as weights, never as activations."""
    got = estimate(Toy, lambda n: {"x": torch.ones(n, 4)}, batch=10, optimizer={"name": "adam"})
    params = (4 * 8 + 8) + (8 * 2 + 2)
    assert got.weights == got.trainable == params * 4
    assert got.model_bytes == params * 4 * (1 + 1 + 2)  # weights, gradients, Adam's two moments
    assert got.per_sample == (4 + 8) * 4
    assert got.activation_bytes == 10 * (4 + 8) * 4
    assert got.gib == pytest.approx((params * 16 + 480) / GIB + ALLOWANCE_GIB)
    half = estimate(Toy, lambda n: {"x": torch.ones(n, 4)}, batch=10, optimizer={"name": "sgd"}, precision="bf16")
    assert half.model_bytes == params * 4 * 2 and half.activation_bytes == 240


def test_frozen_parameters_have_no_gradient_nor_state():
    def build():
        model = Toy()
        model.net[0].requires_grad_(False)
        return model

    got = estimate(build, lambda n: {"x": torch.ones(n, 4)}, batch=1, optimizer={"name": "adamw"})
    assert got.trainable == (8 * 2 + 2) * 4 and got.weights == 58 * 4


def test_nothing_is_allocated_the_model_runs_on_meta(monkeypatch):
    seen = []
    real = saved_bytes

    def spy(model, batch):
        seen.append({p.device.type for p in model.parameters()} | {t.device.type for t in batch.values()})
        return real(model, batch)

    monkeypatch.setattr("repro.memory.saved_bytes", spy)
    estimate(Toy, lambda n: {"x": torch.ones(n, 4)}, batch=4, optimizer={"name": "adam"})
    assert seen == [{"meta"}]


def test_mcan_small_at_batch_64_is_plausible():
    """mcan-pa's MCAN (small: 6 layers, d 512) at the recipe's batch 64 on one GPU: a few GiB."""
    from repro import families
    from repro.memory import row_estimate
    from repro.paths import REPO_DIR
    from repro.specs import resolve

    spec = resolve("mcan-pa-table5-ablation", REPO_DIR / "experiments")
    row = spec.row("MCAN")
    recipe = families.load_recipe(spec.recipe)
    assert recipe.batch_size == 64
    got = row_estimate(families.for_row(row), row.config, recipe, 1)
    assert 1 < got.gib < 20, got
    assert got.batch == 64 and got.states == 2
    assert row_estimate(families.for_row(row), row.config, recipe, 4).batch == 16
