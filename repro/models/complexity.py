"""Model complexity at the paper's settings: parameters, FLOPs and inference time per sample.

Used by `mcan-pa` Table VI (rows with `compute: {task: complexity, model: {...}}`); needs no dataset.
One sample is a full-length question (14 tokens, none padding) and 100 regions with valid boxes.
FLOPs are counted by `torch.utils.flop_counter` (a multiply-add is 2 FLOPs) for one forward pass;
element-wise work (softmax, LayerNorm, the sinusoids of POA) is not counted, as is usual.
"""
from __future__ import annotations

import time
import warnings
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from repro.errors import ReproError

# mcan-pa Table VI counts parameters with MCAN's vocabularies (MODELS.md §1).
PAPER_NUM_TOKENS = 20572
PAPER_NUM_ANSWERS = 3129


def example_batch(batch_size: int = 1, sizes: dict[str, Any] | None = None, *, seed: int = 0,
                  num_tokens: int = PAPER_NUM_TOKENS, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """A batch in the data interface's format, every token and region present, boxes inside a 640x480 image."""
    from repro.models import paper_sizes

    s = paper_sizes()
    s.update(sizes or {})
    g = torch.Generator().manual_seed(seed)
    t, n = s["max_tokens"], s["max_boxes"]
    width, height = 640.0, 480.0
    xy = torch.rand(batch_size, n, 2, generator=g) * torch.tensor([width * 0.8, height * 0.8])
    wh = 8.0 + torch.rand(batch_size, n, 2, generator=g) * torch.tensor([width * 0.2, height * 0.2])
    batch = {
        "tokens": torch.randint(1, min(100, num_tokens), (batch_size, t), generator=g),
        "features": torch.rand(batch_size, n, s["feature_dim"], generator=g) + 0.01,
        "boxes": torch.cat([xy, xy + wh], dim=-1),
        "box_count": torch.full((batch_size,), n, dtype=torch.long),
        "image_size": torch.tensor([[width, height]]).repeat(batch_size, 1),
        "question_id": torch.arange(batch_size),
    }
    return {k: v.to(device) for k, v in batch.items()}


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


def complexity(config: dict, *, num_tokens: int = PAPER_NUM_TOKENS, num_answers: int = PAPER_NUM_ANSWERS,
               sizes: dict | None = None, device: str | torch.device | None = None, repeats: int = 5,
               seed: int = 0) -> dict[str, Any]:
    """Parameters, FLOPs and inference seconds per sample of the model `config` names, at the paper's settings.

    Returns {"params": count, "params_m": millions, "flops": count, "flops_g": billions,
    "inference_s": seconds per sample (batch of one), "device": where it was timed}.
    """
    from repro.models import build_model, count_parameters

    if repeats < 1:
        raise ReproError(f"complexity repeats must be at least 1, got {repeats}")
    torch.manual_seed(seed)
    model = build_model(config, num_tokens, num_answers, sizes=sizes)
    params = count_parameters(model)
    batch = example_batch(1, sizes, seed=seed, num_tokens=num_tokens)
    flops = count_flops(model, batch)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(dev)
    seconds = inference_time(model, {k: v.to(dev) for k, v in batch.items()}, repeats=repeats)
    return {"params": params, "params_m": params / 1e6, "flops": flops, "flops_g": flops / 1e9,
            "inference_s": seconds, "device": str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev)}


def compute_row(compute: dict, **kwargs: Any) -> dict[str, Any]:
    """Run a spec row's `compute: {task: complexity, model: {...}}` mapping; see `complexity`."""
    if not isinstance(compute, dict) or compute.get("task") != "complexity":
        raise ReproError(f"compute mapping {compute!r} is not a complexity task")
    unknown = sorted(set(compute) - {"task", "model", "num_tokens", "num_answers"})
    if unknown:
        raise ReproError(f"unknown complexity key(s) {', '.join(map(repr, unknown))}; known: model, num_tokens, num_answers")
    if "model" not in compute:
        raise ReproError("complexity task needs a 'model' mapping, e.g. {arch: mcan}")
    return complexity(compute["model"], num_tokens=int(compute.get("num_tokens", PAPER_NUM_TOKENS)),
                      num_answers=int(compute.get("num_answers", PAPER_NUM_ANSWERS)), **kwargs)
