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

Counts and predictions must be finite numbers: a NaN, null, infinite or text value is an error
naming the question (not a missing item). Both reference scripts take model outputs that are
always numbers; counting such a value as a miss would score a broken file.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from numbers import Real
from typing import Any

import numpy as np

from repro.errors import ReproError
from repro.metrics.base import MetricResult, shown

VARIANTS = ("psac", "tgif")
LOW, HIGH = 1, 10


def _finite(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def check_numbers(values: Sequence, ids: Sequence[Hashable] | None, what: str) -> None:
    """A ReproError "<what> of question <id> is <value>, not a finite number" for the first value
    that is not a finite number (a numpy array of numbers is checked at once)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        if values.ndim == 1 and np.isfinite(values).all():
            return
    elif all(map(_finite, values)):
        return
    k = next((k for k, v in enumerate(values) if not _finite(v)), None)
    if k is None:  # a numpy array of another shape
        raise ReproError(f"{what}s must be a flat sequence of finite numbers")
    qid = ids[k] if ids is not None else f"#{k}"
    raise ReproError(f"{what} of question {shown(qid)} is {shown(values[k])}, not a finite number")


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


def evaluate(
    gold: Sequence[float],
    predictions: Sequence[float],
    variant: str = "psac",
    question_ids: Sequence[Hashable] | None = None,
) -> MetricResult:
    """`mse` plus per-question squared errors."""
    if len(gold) != len(predictions):
        raise ReproError(f"mse: {len(gold)} annotated questions but {len(predictions)} predictions")
    if variant not in VARIANTS:
        raise ReproError(f"unknown mse variant {variant!r}; one of {', '.join(VARIANTS)}")
    check_numbers(gold, question_ids, "mse: the count")
    check_numbers(predictions, question_ids, "mse: the prediction")
    with np.errstate(over="ignore"):  # a count near the float limit: an infinite error, null in JSON output
        errors = np.square(to_count(predictions) - targets(gold, variant))
    ids = list(question_ids) if question_ids is not None else list(range(len(errors)))
    value = float(errors.sum()) / len(errors) if len(errors) else float("nan")
    return MetricResult("mse", {"mse": value}, dict(zip(ids, errors.tolist())), len(errors))
