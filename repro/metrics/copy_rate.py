"""Copy rate: how many answers a model took from the image's OCR tokens rather than its fixed vocabulary.

Function API::

    from repro.metrics import copy_rate
    result = copy_rate.evaluate(copied, question_ids=qids)   # one bool per answered question
    result.aggregate["count"], result.aggregate["rate"], result.aggregate["answered"]
    result = copy_rate.evaluate_answers(answers, ocr_tokens, question_ids=qids)  # from answer text

`count` is the number of answers copied, `answered` the number of questions, `rate` = 100 * count /
answered (SA-M4C Sec. 6, "Visual grounding": "368/701 questions" is count / answered).

A model that decodes with a pointer network knows which answers it copied (`evaluate`). From files
(`repro eval -m copy-rate`: annotations give each question's OCR tokens as its `answers`, predictions
the answers), an answer counts as copied when each of its words is one of the question's OCR tokens,
compared case-insensitively (`copied`): an answer that is also a vocabulary word counts as copied there.
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


def copied(answer: str, ocr_tokens: Sequence[str]) -> bool:
    """Is every word of `answer` one of the OCR tokens (case-insensitive)? An empty answer is not a copy."""
    words = answer.lower().split()
    tokens = {t.strip().lower() for t in ocr_tokens}
    return bool(words) and all(w in tokens for w in words)


def evaluate_answers(
    answers: Sequence[str], ocr_tokens: Sequence[Sequence[str]], question_ids: Sequence[Hashable] | None = None
) -> MetricResult:
    """The copy rate of answer texts, each against its question's OCR tokens (see `copied`)."""
    if len(answers) != len(ocr_tokens):
        raise ReproError(f"copy-rate: {len(ocr_tokens)} questions with OCR tokens but {len(answers)} answers")
    return evaluate([copied(a, t) for a, t in zip(answers, ocr_tokens)], question_ids)
