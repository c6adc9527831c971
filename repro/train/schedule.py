"""Learning-rate schedules as plain functions of (epoch, step), so a resumed run recomputes them exactly.

`mcan`: MCAN's warm-up and step decay (MODELS.md §1.1; mcan-pa §IV-B). With base 1e-4, 3 warm-up
epochs and decay ×0.2 at 0-indexed epochs 10 and 12, epochs 1..13 get
2.5e-5, 5e-5, 7.5e-5, 1e-4 ×7, 2e-5, 2e-5, 4e-6. The rate is constant within an epoch.
`constant`: base_lr throughout.
"""
from __future__ import annotations

from typing import Any

from repro.errors import ReproError


def mcan_lr(epoch: int, base_lr: float, warmup_epochs: int = 3, decay_epochs: tuple[int, ...] | list[int] = (10, 12),
            decay_rate: float = 0.2) -> float:
    """Learning rate of 0-indexed `epoch`."""
    if epoch < warmup_epochs:
        return base_lr * (epoch + 1) / (warmup_epochs + 1)
    return base_lr * decay_rate ** sum(1 for e in decay_epochs if epoch >= e)


def learning_rate(schedule: dict[str, Any], epoch: int, step_in_epoch: int = 0, steps_per_epoch: int = 1) -> float:
    """The learning rate a recipe's `schedule` gives at (0-indexed epoch, step within it)."""
    name = schedule.get("name")
    params = {k: v for k, v in schedule.items() if k != "name"}
    if name == "mcan":
        return mcan_lr(epoch, **params)
    if name == "constant":
        return float(params["base_lr"])
    raise ReproError(f"unknown schedule {name!r}; one of mcan, constant")


def epoch_rates(schedule: dict[str, Any], epochs: int) -> list[float]:
    """One rate per epoch, for plans and tests."""
    return [learning_rate(schedule, e) for e in range(epochs)]
