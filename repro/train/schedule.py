"""Learning-rate schedules as plain functions of (epoch, step), so a resumed run recomputes them exactly.

`mcan`: MCAN's warm-up and step decay (MILVLG/mcan-vqa; mcan-pa §IV-B). With base 1e-4, 3 warm-up
epochs and decay ×0.2 at 0-indexed epochs 10 and 12, epochs 1..13 get
2.5e-5, 5e-5, 7.5e-5, 1e-4 ×7, 2e-5, 2e-5, 4e-6. The rate is constant within an epoch.
`linear-warmup-step`: DSGANet's (dsganet §IV-B): linear from start_lr at the first epoch to base_lr
at 0-indexed epoch warmup_epochs - 1, then ×decay_rate at each of decay_epochs. Constant within an epoch.
`m4c`: M4C's and SA-M4C's, per iteration (facebookresearch/mmf, yashkant/sam-textvqa): the factor
rises linearly from warmup_factor to 1 over warmup_iterations, then ×decay_rate at each of decay_iterations.
`cosine`: ALBEF's (salesforce/ALBEF, timm's CosineLRScheduler stepped per epoch): the rate of epoch e
is min_lr + (base_lr - min_lr)(1 + cos(pi e / cycle_epochs)) / 2; during the first `warmup_steps`
iterations of epoch 0 it rises linearly from warmup_lr to base_lr.
`constant`: base_lr throughout.
`SCHEDULES` is the one table of them: a recipe's `schedule: {name: ...}` is checked against it (its keys
are the rate function's parameters), and adding a schedule is one function and one entry.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repro.errors import ReproError


def mcan_lr(
    epoch: int,
    base_lr: float,
    warmup_epochs: int = 3,
    decay_epochs: tuple[int, ...] | list[int] = (10, 12),
    decay_rate: float = 0.2,
) -> float:
    """Learning rate of 0-indexed `epoch`."""
    if epoch < warmup_epochs:
        return base_lr * (epoch + 1) / (warmup_epochs + 1)
    return base_lr * decay_rate ** sum(1 for e in decay_epochs if epoch >= e)


def linear_warmup_step_lr(
    epoch: int,
    base_lr: float,
    start_lr: float,
    warmup_epochs: int = 4,
    decay_epochs: tuple[int, ...] | list[int] = (10, 12),
    decay_rate: float = 0.2,
) -> float:
    if epoch < warmup_epochs:
        return start_lr + (base_lr - start_lr) * epoch / max(warmup_epochs - 1, 1)
    return base_lr * decay_rate ** sum(1 for e in decay_epochs if epoch >= e)


def m4c_lr(
    iteration: int,
    base_lr: float,
    warmup_iterations: int = 1000,
    warmup_factor: float = 0.2,
    decay_iterations: tuple[int, ...] | list[int] = (14000, 19000),
    decay_rate: float = 0.1,
) -> float:
    if iteration < warmup_iterations:
        alpha = iteration / warmup_iterations
        return base_lr * (warmup_factor * (1 - alpha) + alpha)
    return base_lr * decay_rate ** sum(1 for i in decay_iterations if iteration >= i)


def cosine_lr(
    epoch: int,
    step: int,
    base_lr: float,
    min_lr: float,
    cycle_epochs: int,
    warmup_lr: float = 0.0,
    warmup_steps: int = 0,
) -> float:
    if epoch == 0 and step < warmup_steps:
        return warmup_lr + (base_lr - warmup_lr) * step / warmup_steps
    return min_lr + (base_lr - min_lr) * (1 + math.cos(math.pi * epoch / cycle_epochs)) / 2


def constant_lr(base_lr: float) -> float:
    return float(base_lr)


# What a schedule's rate is a function of (its leading arguments), from the 0-indexed epoch, the step within
# it and the steps per epoch: the epoch, the epoch and the step, the iteration counted from the start, nothing.
POSITIONS: dict[str, Callable[[int, int, int], tuple[int, ...]]] = {
    "epoch": lambda epoch, step, steps_per_epoch: (epoch,),
    "epoch-step": lambda epoch, step, steps_per_epoch: (epoch, step),
    "iteration": lambda epoch, step, steps_per_epoch: (epoch * steps_per_epoch + step,),
    "none": lambda epoch, step, steps_per_epoch: (),
}


@dataclass(frozen=True)
class Schedule:
    """One learning-rate schedule: `rate(<position>, **params)`, `params` being the recipe's `schedule:` keys."""

    rate: Callable[..., float]
    at: str = "epoch"  # one of POSITIONS

    @property
    def keys(self) -> frozenset[str]:
        """The keys a recipe may give: the rate's parameters after its position."""
        return frozenset(list(inspect.signature(self.rate).parameters)[len(POSITIONS[self.at](0, 0, 1)) :])


# The schedules a recipe may name: adding one is one entry here (recipes are checked against it).
SCHEDULES: dict[str, Schedule] = {
    "mcan": Schedule(mcan_lr),
    "linear-warmup-step": Schedule(linear_warmup_step_lr),
    "m4c": Schedule(m4c_lr, at="iteration"),
    "cosine": Schedule(cosine_lr, at="epoch-step"),
    "constant": Schedule(constant_lr, at="none"),
}


def learning_rate(schedule: dict[str, Any], epoch: int, step_in_epoch: int = 0, steps_per_epoch: int = 1) -> float:
    """The learning rate a recipe's `schedule` gives at (0-indexed epoch, step within it)."""
    name = schedule.get("name")
    params = {k: v for k, v in schedule.items() if k != "name"}
    if name not in SCHEDULES:
        raise ReproError(f"unknown schedule {name!r}; one of {', '.join(SCHEDULES)}")
    entry = SCHEDULES[name]
    return entry.rate(*POSITIONS[entry.at](epoch, step_in_epoch, steps_per_epoch), **params)


def epoch_rates(schedule: dict[str, Any], epochs: int) -> list[float]:
    """One rate per epoch, for plans and tests."""
    return [learning_rate(schedule, e) for e in range(epochs)]
