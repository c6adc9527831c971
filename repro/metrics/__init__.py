"""Scorers that give what the official ones give, item by item. Pure functions, no torch.

`REGISTRY` maps a metric name (as specs name it) to the module holding its `evaluate` function;
`get(name)` imports that module. Every `evaluate` returns a `MetricResult` (aggregate dict,
per-item scores, n). `repro.metrics.files.evaluate_files` reads official or generic files first.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from repro.errors import ReproError
from repro.metrics.base import MetricResult

REGISTRY = {
    "vqa": "repro.metrics.vqa",
    "textvqa": "repro.metrics.textvqa",
    "anls": "repro.metrics.anls",
    "wups": "repro.metrics.wups",
    "mse": "repro.metrics.mse",
    "accuracy": "repro.metrics.accuracy",
    "gqa": "repro.metrics.gqa",
    "recall": "repro.metrics.retrieval",
    "grounding": "repro.metrics.grounding",
    "copy-rate": "repro.metrics.copy_rate",
}

# The reference versions a metric can follow (`--variant`); the first is the default.
VARIANTS = {
    "vqa": ("2021", "2016"),
    "anls": ("rrc", "mmf", "pypi"),
    "wups": ("cocoqa", "malinowski"),
    "mse": ("psac", "tgif"),
}

__all__ = ["REGISTRY", "VARIANTS", "MetricResult", "get"]


def get(name: str) -> ModuleType:
    """The module of metric `name`; its `evaluate` is the scorer."""
    if name not in REGISTRY:
        raise ReproError(f"unknown metric {name!r}; one of {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name])
