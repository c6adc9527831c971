"""The toy family's run protocol: label = which half of the plane a point lies in; the model sees the
point's position only when `use_position` is on, so that row should win."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from repro.families.base import Hooks, ModelInfo, RowRun, RunContext
from repro.nn.measure import count_parameters

ARCHS = ("toy",)


class Points(Dataset):
    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.xy = torch.rand(n, 2, generator=g) * 2 - 1
        self.label = (self.xy[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.label)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"xy": self.xy[i], "label": self.label[i], "question_id": torch.tensor(i)}


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


def prepare_data(spec, scale, settings) -> None:
    return None


def loss_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch), batch["label"])


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(batch)


def run_row(ctx: RunContext) -> RowRun:
    from repro.families import load_recipe
    from repro.train import fit, predict

    recipe = load_recipe(ctx.spec.recipe).replace(**{**ctx.settings.get("recipe", {}), "seed": ctx.seed})
    torch.manual_seed(ctx.seed)
    model = build_model(ctx.config, ctx.settings.get("sizes"))
    fit(model, Points(256, ctx.seed), recipe, ctx.workdir, loss_step=loss_step, progress=False)
    val = Points(128, 1000 + ctx.seed)
    _, logits = predict(model, val, 64, predict_step=predict_step, progress=False)
    accuracy = 100.0 * float((logits.argmax(1) == val.label).float().mean())
    return RowRun(metrics={"Acc": accuracy}, split="val")


def describe(config, spec=None) -> list[ModelInfo]:
    model = build_model(config)
    n = count_parameters(model)
    return [ModelInfo("toy", "halves", n, n, None, [("net", n)])]


def gpu_hours(config) -> float | None:
    return None


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    run_row=run_row,
    example_batch=example_batch,
)
