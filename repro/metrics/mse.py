"""Mean squared error for TGIF-QA Count, as the PSAC and TGIF-QA code compute it.

Function API::

    from repro.metrics import mse
    result = mse.evaluate(gold_counts, raw_predictions, variant="psac")
    result.aggregate["mse"]

Predictions may be raw regression outputs. Both references turn them into counts the same way:
round half to even (`np.round` in PSAC, `tf.round` in TGIF-QA: 2.5 -> 2, 3.5 -> 4) and clip to
[1, 10]; PSAC clips first and rounds after, TGIF-QA rounds first and clips after, which gives the
same count for every real number. They differ on the ground truth:

* `"psac"` (default; the PSAC tables are the ones reproduced here): the target is max(answer, 1),
  so a ground truth of 0 is scored as 1 (`dataset.py`, `labels.append(max(entry['answer'], 1))`);
* `"tgif"`: the raw answer, so a ground truth of 0 costs at least 1.

The mean is the float64 sum of squared errors divided by the number of questions.
"""
from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from repro.errors import ReproError
from repro.metrics.base import MetricResult

VARIANTS = ("psac", "tgif")
LOW, HIGH = 1, 10


def to_count(predictions) -> np.ndarray:
    """Raw outputs to predicted counts: round half to even, clip to [1, 10]."""
    return np.clip(np.round(np.asarray(predictions, dtype=np.float64)), LOW, HIGH)


def targets(gold, variant: str = "psac") -> np.ndarray:
    gold = np.asarray(gold, dtype=np.float64)
    if variant == "psac":
        return np.maximum(gold, 1)
    if variant == "tgif":
        return gold
    raise ReproError(f"unknown mse variant {variant!r}; one of {', '.join(VARIANTS)}")


def evaluate(gold: Sequence[float], predictions: Sequence[float], variant: str = "psac",
             question_ids: Sequence[Hashable] | None = None) -> MetricResult:
    """`mse` plus per-question squared errors."""
    if len(gold) != len(predictions):
        raise ReproError(f"mse: {len(gold)} annotated questions but {len(predictions)} predictions")
    try:
        errors = np.square(to_count(predictions) - targets(gold, variant))
    except (TypeError, ValueError) as exc:
        raise ReproError(f"mse: counts and predictions must be numbers ({exc})") from None
    ids = list(question_ids) if question_ids is not None else list(range(len(errors)))
    value = float(errors.sum()) / len(errors) if len(errors) else float("nan")
    return MetricResult("mse", {"mse": value}, dict(zip(ids, errors.tolist())), len(errors))
