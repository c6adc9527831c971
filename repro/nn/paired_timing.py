"""Two models' optimisation steps timed against each other in one process: interleaved, balanced, as ratios.

A timing claim ("A trains faster than B") compares two step times. Measured in two runs, at two times, on a
shared machine, the load of the moment decides it; measured here, A's and B's steps alternate in one process
in a balanced order (A B, B A, A B, ...: each pair swaps who goes first, so a drift in load or clock within a
pair falls on both sides alike), and each pair gives one ratio t_A / t_B. The ratios, not the times, are the
sample a claim is judged on (repro.report.claims): a slow spell scales both steps of a pair and cancels in
their ratio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass
class TimedStep:
    """One model's optimisation step on a fixed batch: forward, loss, backward, clipping, update."""

    model: nn.Module
    batch: dict[str, torch.Tensor]
    loss_fn: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor]
    optimizer: torch.optim.Optimizer
    grad_clip: float | None = None
    info: dict[str, Any] | None = None  # what the family wants kept beside the ratios (sizes, steps per epoch)

    def __call__(self) -> None:
        loss = self.loss_fn(self.model, self.batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[], None], device: torch.device, repeats: int = 1) -> float:
    """Seconds of `repeats` consecutive calls of `step`, the device synchronised before and after."""
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    _synchronize(device)
    return time.perf_counter() - start


def balanced_order(pairs: int) -> list[str]:
    """The order of the pairs: "AB", "BA", "AB", ... (A B B A A B ...), each model first in half of them."""
    return ["AB" if k % 2 == 0 else "BA" for k in range(pairs)]


def interleaved_ratios(
    step_a: Callable[[], None],
    step_b: Callable[[], None],
    *,
    pairs: int = 10,
    steps: int = 1,
    warmup: int = 1,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """`pairs` ratios t_A / t_B of `steps` consecutive steps of each, after `warmup` steps of each (A then B),
    in the balanced order of `balanced_order`. Returns {"ratios", "seconds_a", "seconds_b" (per step),
    "order"}."""
    if pairs < 1 or steps < 1 or warmup < 0:
        raise ValueError(f"pairs and steps must be at least 1 and warmup at least 0, got {pairs}, {steps}, {warmup}")
    device = torch.device(device)
    for _ in range(warmup):
        timed(step_a, device)
        timed(step_b, device)
    order = balanced_order(pairs)
    seconds_a, seconds_b = [], []
    for first_second in order:
        took = {}
        for name in first_second:
            took[name] = timed(step_a if name == "A" else step_b, device, steps) / steps
        seconds_a.append(took["A"])
        seconds_b.append(took["B"])
    return {
        "ratios": [a / b for a, b in zip(seconds_a, seconds_b)],
        "seconds_a": seconds_a,
        "seconds_b": seconds_b,
        "order": order,
    }
