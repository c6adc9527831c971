"""What every metric returns: an aggregate, per-item scores and the item count."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable


@dataclass
class MetricResult:
    """`aggregate` is keyed by the names a spec column's `key` refers to (e.g. "overall", "yes/no",
    "anls", "wups@0.9", "mse"); nested dicts hold per-type breakdowns. `per_item` maps an item id
    (question id, text id, ...) to its score on the same scale as the aggregate."""

    metric: str
    aggregate: dict[str, Any]
    per_item: dict[Hashable, float] = field(default_factory=dict)
    n: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, **self.aggregate, "n": self.n}


def mean_percent(values: list[float]) -> float:
    """100 * sum / len with Python's float sum in list order, as the official scripts compute it."""
    return 100 * float(sum(values)) / len(values) if values else float("nan")
