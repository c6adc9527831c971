"""Copy rate: how many answers a model took from the image's OCR tokens rather than its fixed vocabulary.

Function API::

    from repro.metrics import copy_rate
    result = copy_rate.evaluate(copied, question_ids=qids)   # one bool per answered question
    result.aggregate["count"], result.aggregate["rate"], result.aggregate["answered"]

`count` is the number of answers copied, `answered` the number of questions, `rate` = 100 * count /
answered (SA-M4C Sec. 6, "Visual grounding": "368/701 questions" is count / answered).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from repro.errors import ReproError
from repro.metrics.base import MetricResult


def evaluate(copied: Sequence[bool], question_ids: Sequence[Hashable] | None = None) -> MetricResult:
    flags = list(copied)
    if not all(isinstance(f, bool) for f in flags):
        raise ReproError("copy-rate: every item must be true (copied from OCR) or false (from the vocabulary)")
    ids = list(question_ids) if question_ids is not None else list(range(len(flags)))
    if len(ids) != len(flags):
        raise ReproError(f"copy-rate: {len(ids)} question ids but {len(flags)} answers")
    count = sum(flags)
    rate = 100 * count / len(flags) if flags else float("nan")
    return MetricResult(
        "copy-rate",
        {"count": count, "answered": len(flags), "rate": rate},
        {q: 100.0 * f for q, f in zip(ids, flags)},
        len(flags),
    )
