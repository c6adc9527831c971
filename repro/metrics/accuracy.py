"""Exact-match accuracy: TGIF-QA Action/Transition (choice index) and FrameQA, COCO-QA, GQA,
SNLI-VE, NLVR2.

Function API::

    from repro.metrics import accuracy
    result = accuracy.evaluate(gold, predictions, types=None)
    result.aggregate["accuracy"]          # percent
    result.aggregate["per_type"]          # when types are given (COCO-QA / FrameQA categories)

A prediction is right when it equals the gold answer exactly: no case folding, no trimming, as the
GQA script and the TGIF/PSAC label comparison do. Numbers compare by value, so a choice index
given as 3 or 3.0 equals 3; a number never equals a string ("3" is not 3): say which you mean.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from numbers import Number

from repro.errors import ReproError
from repro.metrics.base import MetricResult


def is_correct(gold, prediction) -> bool:
    if isinstance(gold, bool) or isinstance(prediction, bool):
        return gold is prediction
    if isinstance(gold, Number) and isinstance(prediction, Number):
        return gold == prediction
    if isinstance(gold, str) and isinstance(prediction, str):
        return gold == prediction
    return False


def evaluate(
    gold: Sequence,
    predictions: Sequence,
    question_ids: Sequence[Hashable] | None = None,
    types: Sequence[str] | None = None,
) -> MetricResult:
    if len(gold) != len(predictions):
        raise ReproError(f"accuracy: {len(gold)} annotated questions but {len(predictions)} predictions")
    per_q = [1.0 if is_correct(g, p) else 0.0 for g, p in zip(gold, predictions)]
    ids = list(question_ids) if question_ids is not None else list(range(len(per_q)))
    aggregate: dict = {"accuracy": 100 * sum(per_q) / len(per_q) if per_q else float("nan")}
    if types is not None:
        groups: dict[str, list[float]] = {}
        for t, s in zip(types, per_q):
            groups.setdefault(str(t), []).append(s)
        aggregate["per_type"] = {t: 100 * sum(v) / len(v) for t, v in groups.items()}
    return MetricResult("accuracy", aggregate, {q: 100 * s for q, s in zip(ids, per_q)}, len(per_q))
