"""Rows with `compute: {task: complexity, model: {...}}`: parameters, FLOPs and inference time.

Runs at the paper's settings (MCAN's vocabularies, 14 tokens, 100 regions) without any dataset, at
every scale: model size does not depend on data. Columns are filled by their metric and key:
params -> millions, flops -> billions per sample, time with key `inference-per-image` -> seconds.
The training time per epoch (`time`, key `train-epoch`) needs the dataset and is left empty.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.specs import Row, Spec


def run_complexity(*, spec: Spec, row: Row, scale: str, settings: dict[str, Any], seed: int, workdir: Path,
                   resume: bool, progress: bool = True, extras: dict[str, Any]) -> dict[str, float]:
    from repro.models.complexity import compute_row

    measured = compute_row(row.compute, seed=seed)
    extras.update({"params": measured["params"], "flops": measured["flops"], "device": measured["device"],
                   "split": "none (no data needed)"})
    out: dict[str, float] = {}
    for col in spec.columns:
        if col.metric == "params":
            out[col.name] = measured["params_m"] if col.unit == "M" else float(measured["params"])
        elif col.metric == "flops":
            out[col.name] = measured["flops_g"] if col.unit == "G" else float(measured["flops"])
        elif col.metric == "time" and col.key == "inference-per-image":
            out[col.name] = measured["inference_s"]
    return out
