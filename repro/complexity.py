"""Rows with `compute: {task: complexity, model: {...}}`: parameters, FLOPs and inference time per sample.

Runs at the paper's settings without any dataset, at every scale: model size does not depend on data.
The model and a full-size example input come from the row's family. Columns are filled by their
metric and key: params -> millions, flops -> billions per sample, time with key
`inference-per-image` -> seconds. The training time per epoch (`time`, key `train-epoch`) needs
the dataset and is left empty.
"""

from __future__ import annotations

from typing import Any

import torch

from repro import families
from repro.errors import ReproError
from repro.families.base import RowRun, RunContext


def complexity(
    config: Any, *, device: str | torch.device | None = None, repeats: int = 5, seed: int = 0
) -> dict[str, Any]:
    """Parameters, FLOPs and inference seconds per sample of the model `config` names, at the paper's settings.

    Returns {"params", "params_m", "flops", "flops_g", "inference_s" (batch of one), "device"}.
    """
    from repro.nn.measure import count_flops, count_parameters, inference_time

    if repeats < 1:
        raise ReproError(f"complexity repeats must be at least 1, got {repeats}")
    family = families.require(families.by_arch(config.arch))
    torch.manual_seed(seed)
    model = family.build_model(config)
    params = count_parameters(model)
    batch = family.example_batch(1, seed=seed)
    flops = count_flops(model, batch)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(dev)
    seconds = inference_time(model, {k: v.to(dev) for k, v in batch.items()}, repeats=repeats)
    return {
        "params": params,
        "params_m": params / 1e6,
        "flops": flops,
        "flops_g": flops / 1e9,
        "inference_s": seconds,
        "device": str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
    }


def run_complexity(ctx: RunContext) -> RowRun:
    measured = complexity(ctx.config, seed=ctx.seed)
    out: dict[str, float] = {}
    for col in ctx.spec.columns:
        if col.metric == "params":
            out[col.name] = measured["params_m"] if col.unit == "M" else float(measured["params"])
        elif col.metric == "flops":
            out[col.name] = measured["flops_g"] if col.unit == "G" else float(measured["flops"])
        elif col.metric == "time" and col.key == "inference-per-image":
            out[col.name] = measured["inference_s"]
    return RowRun(
        metrics=out,
        split="none (no data needed)",
        info={"params": measured["params"], "flops": measured["flops"], "device": measured["device"]},
    )
