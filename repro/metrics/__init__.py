"""Scorers that give what the official ones give, item by item. Pure functions, no torch.

`METRICS` is the one table of metric names, as spec columns name them: each with the direction that is
better (a column's `better:` defaults to it), the module holding its `evaluate` function when it has one
(`repro eval` scores files with it), the reference versions it can follow, and what the claims under a
table are judged with (the resolution of a stored value; a usual δ, which a spec's design states for itself). Adding a
metric is one entry. `get(name)` imports a scorer. Every `evaluate` returns a `MetricResult` (aggregate dict, per-item
scores, n). `repro.metrics.files.evaluate_files` reads official or generic files first.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType

from repro.errors import ReproError
from repro.metrics.base import MetricResult

DIRECTIONS = ("higher", "lower", "none")


@dataclass(frozen=True)
class Metric:
    better: str  # one of DIRECTIONS: which way a column of this metric improves, unless it says otherwise
    # the module holding `evaluate`; None: a quantity a run measures itself (size, compute, time, a count)
    module: str | None = None
    variants: tuple[str, ...] = ()  # the reference versions it can follow (`--variant`); the first is the default
    # a starting point for a design's δ (repro.design), never used by a verdict: a spec's design states its own δ
    # per claim column with its source. ("points", δ) in the column's units, ("relative", f) a fraction.
    margin: tuple[str, float] | None = None
    # the smallest difference a stored value carries (rows without spread give no verdict below it); None:
    # 1e-9 of the values compared
    resolution: float | None = None


ONE_POINT = ("points", 1.0)  # one accuracy point; percentages are stored as tables print them, to 0.01
FIVE_PERCENT = ("relative", 0.05)  # times, sizes, FLOPs

METRICS: dict[str, Metric] = {
    # VQA soft accuracy (key: overall, yes/no, number, other)
    "vqa": Metric("higher", "repro.metrics.vqa", ("2021", "2016"), ONE_POINT, 0.01),
    # TextVQA accuracy (VQA formula, M4C normalisation)
    "textvqa": Metric("higher", "repro.metrics.textvqa", (), ONE_POINT, 0.01),
    # ST-VQA average normalised Levenshtein similarity, on a 0-1 scale: δ one point of it
    "anls": Metric("higher", "repro.metrics.anls", ("rrc", "mmf", "pypi"), ("points", 0.01), 1e-4),
    "wups": Metric("higher", "repro.metrics.wups", ("cocoqa", "malinowski"), ONE_POINT, 0.01),  # key: 0.9 or 0.0
    # TGIF-QA Count: δ a tenth of a count squared
    "mse": Metric("lower", "repro.metrics.mse", ("psac", "tgif"), ("points", 0.1), 1e-4),
    "accuracy": Metric("higher", "repro.metrics.accuracy", (), ONE_POINT, 0.01),  # exact-match accuracy
    "gqa": Metric("higher", "repro.metrics.gqa", (), ONE_POINT, 0.01),  # GQA's accuracy and its breakdowns
    "recall": Metric("higher", "repro.metrics.retrieval", (), ONE_POINT, 0.01),  # retrieval R@K (key: tr@1, ...)
    "grounding": Metric("higher", "repro.metrics.grounding", (), ONE_POINT, 0.01),  # weakly supervised hit rate
    "copy-rate": Metric("none", "repro.metrics.copy_rate"),  # share of answers copied from OCR tokens
    "params": Metric("lower", margin=FIVE_PERCENT),  # model size
    "flops": Metric("lower", margin=FIVE_PERCENT),  # compute per sample
    "time": Metric("lower", margin=FIVE_PERCENT),  # wall time (training per epoch, inference per sample)
    "count": Metric("none"),  # a dataset statistic (number of questions, images, ...)
}


class _View(Mapping):
    """A field of the metrics that have it, read from `METRICS` at each use (a new entry counts at once)."""

    def __init__(self, field: str):
        self._field = field

    def _items(self) -> dict:
        return {name: getattr(m, self._field) for name, m in METRICS.items() if getattr(m, self._field)}

    def __getitem__(self, name: str):
        return self._items()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


REGISTRY: Mapping[str, str] = _View("module")  # the metrics with a scorer: name -> its module
VARIANTS: Mapping[str, tuple[str, ...]] = _View("variants")  # name -> its reference versions, the default first

__all__ = [
    "DIRECTIONS",
    "FIVE_PERCENT",
    "METRICS",
    "ONE_POINT",
    "REGISTRY",
    "VARIANTS",
    "Metric",
    "MetricResult",
    "get",
]


def get(name: str) -> ModuleType:
    """The module of metric `name`; its `evaluate` is the scorer."""
    if name not in REGISTRY:
        raise ReproError(f"unknown metric {name!r}; one of {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name])
