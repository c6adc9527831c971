"""The toy paper's hooks, the template of a new family: label = which half of the plane a point lies in; the
model sees the point's position only when `use_position` is on, so that row should win.

What a family writes is only what is its paper's: its data (`prepare_data`, called once per run; every unit
reads it as `ctx.data`), how a unit's model is built and scored, and the hooks. The shared part (recipes with the
scale's overrides, seeding, one seed alone or several trained together, devices) is `train_units`'."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import Dataset

from repro.families.base import Hooks, RowRun, RunContext, train_units
from tests.toy_family.build import ARCHS, build_model, describe, example_batch, gpu_hours


class Points(Dataset):
    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.xy = torch.rand(n, 2, generator=g) * 2 - 1
        self.label = (self.xy[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.label)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"xy": self.xy[i], "label": self.label[i], "question_id": torch.tensor(i)}


@dataclass(frozen=True)
class Splits:
    train: Points
    val: Points


def prepare_data(spec, scale, settings) -> Splits:
    return Splits(train=Points(256, 0), val=Points(128, 1000))


def loss_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch), batch["label"])


def build(ctx: RunContext, data: Splits) -> nn.Module:
    return build_model(ctx.config, ctx.settings.get("sizes"))


def score(ctx: RunContext, model: nn.Module, state, data: Splits, recipe) -> RowRun:
    from repro.train import predict

    _, logits = predict(model, data.val, 64, progress=False)
    accuracy = 100.0 * float((logits.argmax(1) == data.val.label).float().mean())
    return RowRun(metrics={"Acc": accuracy}, split="val", training=state.summary())


def run_row(ctx: RunContext) -> RowRun:
    return train_units([ctx], lambda c: c.data, build, score, loss_step=loss_step)[0]


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    return train_units(ctxs, lambda c: c.data, build, score, loss_step=loss_step)


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    run_row=run_row,
    run_ensemble=run_ensemble,
    example_batch=example_batch,
)
