"""Model size and cost: trainable parameters, FLOPs per forward pass, inference and training-step time.

FLOPs are counted by `torch.utils.flop_counter` (a multiply-add is 2 FLOPs); element-wise work
(softmax, LayerNorm, activations) is not counted, as is usual.
"""

from __future__ import annotations

import time
import warnings

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Parameters of `model`: the trainable ones by default, every one with `trainable_only=False`."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def count_flops(model: nn.Module, batch: dict[str, torch.Tensor], *, backward: bool = False) -> int:
    """FLOPs of one forward pass (and backward when asked) on `batch`, as flop_counter counts them."""
    counter = FlopCounterMode(display=False)
    was_training = model.training
    model.train(backward)
    try:
        # flop_counter has no formula for the fused CPU attention kernel nor for oneDNN's LSTM, so
        # both run through their plain implementations (matmuls it counts) while counting.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # oneDNN's TF32 notice when toggling the flag
            quiet_mkldnn = torch.backends.mkldnn.flags(enabled=False)
            quiet_mkldnn.__enter__()
        with sdpa_kernel([SDPBackend.MATH]), counter:
            # Grad mode stays on even for a forward count: flop_counter's module tracker needs it.
            out = model(batch)
            if backward:
                out.sum().backward()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            quiet_mkldnn.__exit__(None, None, None)
        model.train(was_training)
        if backward:
            model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def inference_time(model: nn.Module, batch: dict[str, torch.Tensor], *, repeats: int = 5, warmup: int = 1) -> float:
    """Median seconds of one forward pass on `batch` (eval mode, no grad)."""
    model.eval()
    device = next(model.parameters()).device
    times = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            model(batch)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def train_step_time(
    model: nn.Module,
    batch: dict[str, torch.Tensor],
    loss_fn,
    optimizer: torch.optim.Optimizer,
    *,
    steps: int = 3,
    warmup: int = 1,
    grad_clip: float | None = None,
) -> float:
    """Median seconds of one optimisation step (forward, loss, backward, clipping, update) on `batch`."""
    model.train()
    device = next(model.parameters()).device
    times = []
    for i in range(warmup + steps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        loss = loss_fn(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]
