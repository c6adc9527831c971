"""The toy paper's model: a two-layer perceptron that sees a point's position only when `use_position` is on."""

from __future__ import annotations

import torch
from torch import nn

from repro.families.base import ModelInfo
from repro.nn.measure import count_parameters

ARCHS = ("toy",)


class ToyModel(nn.Module):
    def __init__(self, hidden: int, use_position: bool):
        super().__init__()
        self.use_position = use_position
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        xy = batch["xy"] if self.use_position else torch.zeros_like(batch["xy"])
        return self.net(xy)


def build_model(config, sizes=None) -> nn.Module:
    return ToyModel((sizes or {}).get("hidden", config.hidden), config.use_position)


def example_batch(batch_size: int = 1, seed: int = 0) -> dict[str, torch.Tensor]:
    return {"xy": torch.zeros(batch_size, 2)}


def describe(config, spec=None) -> list[ModelInfo]:
    n = count_parameters(build_model(config))
    return [ModelInfo("toy", "halves", n, n, None, [("net", n)])]


def gpu_hours(config, precision=None) -> float | None:
    return None
