"""What every metric returns: an aggregate, per-item scores and the item count."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator, Sequence


@dataclass
class MetricResult:
    """`aggregate` is keyed by the names a spec column's `key` refers to (e.g. "overall", "yes/no",
    "anls", "wups@0.9", "mse"); nested dicts hold per-type breakdowns. `per_item` maps an item id
    (question id, text id, ...) to its score on the same scale as the aggregate."""

    metric: str
    aggregate: dict[str, Any]
    per_item: Mapping[Hashable, float] = field(default_factory=dict)
    n: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, **self.aggregate, "n": self.n}


def mean_percent(values: list[float]) -> float:
    """100 * sum / len with Python's float sum in list order, as the official scripts compute it."""
    return 100 * float(sum(values)) / len(values) if values else float("nan")


class LazyPerItem(Mapping):
    """{item id: scale * score}, a read-only mapping built from aligned ids and a numpy array of
    scores the first time it is read: a caller that wants only the aggregate never pays for it."""

    def __init__(self, ids: Sequence[Hashable], scores: Any, scale: float = 1.0):
        self._ids, self._scores, self._scale = ids, scores, scale
        self._items: dict[Hashable, float] | None = None

    def _built(self) -> dict[Hashable, float]:
        if self._items is None:
            self._items = dict(zip(self._ids, (self._scale * self._scores).tolist()))
        return self._items

    def __getitem__(self, key: Hashable) -> float:
        return self._built()[key]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return repr(self._built())
