"""What every metric returns: an aggregate, per-item scores and the item count; and `shown`, how a
value read from a file appears in an error message."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class MetricResult:
    """`aggregate` is keyed by the names a spec column's `key` refers to (e.g. "overall", "yes/no",
    "anls", "wups@0.9", "mse"); nested dicts hold per-type breakdowns. `per_item` maps an item id
    (question id, text id, ...) to its score on the same scale as the aggregate."""

    metric: str
    aggregate: dict[str, Any]
    per_item: Mapping[Hashable, float] = field(default_factory=dict)
    n: int = 0
    # the files the scores were read from (`repro.metrics.files.evaluate_files`): --per-item must
    # not overwrite any of them
    sources: tuple = field(default=(), repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, **self.aggregate, "n": self.n}


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 60
SHOWN_LENGTH = 60


def one_line(text: str) -> str:
    """`text` with control characters, line separators and lone surrogates escaped: it prints on one
    line and encodes as UTF-8."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


def shown(value: Any) -> str:
    """A value from an input file as an error message shows it: a string or an integer as its text,
    anything else as a short repr (nested values cut off, so a deep one cannot recurse); at most
    about 60 characters, on one line."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        text = value if isinstance(value, str) else (str(value) if value.bit_length() < 200 else _SHORT.repr(value))
        if len(text) > SHOWN_LENGTH:
            text = text[: SHOWN_LENGTH - 3] + "..."
    else:
        text = _SHORT.repr(value)
    return one_line(text)


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

    def count_nonfinite(self) -> int:
        """How many scores are NaN or infinite, without building the mapping."""
        import numpy as np

        return int(np.count_nonzero(~np.isfinite(np.asarray(self._scores, dtype=np.float64))))
