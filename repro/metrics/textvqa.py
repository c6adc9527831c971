"""TextVQA accuracy as `facebookresearch/mmf` `TextVQAAccuracyEvaluator` computes it (M4C, SA-M4C).

Function API::

    from repro.metrics import textvqa
    result = textvqa.evaluate(answers, predictions, question_ids=qids)   # 10 answers per question
    result.aggregate["accuracy"]   # percent, unrounded (mmf reports the same value as a fraction)

Same leave-one-out formula as VQA (each of the 10 human answers left out in turn, min(1, equal
others / 3), averaged), with mmf's `EvalAIAnswerProcessor` normalisation applied *always*, to the
prediction and to every human answer:

1. `word_tokenize`: lower-case; delete every "," and "?"; "'s" becomes " 's"; strip;
2. newlines/tabs to spaces, strip;
3. the VQA punctuation rule, but with mmf's digit-comma regex `(?<=\\d)(\\,)+(?=\\d)`. Step 1 has
   already removed all commas, so that regex never matches and the "delete everything" branch only
   happens through a punctuation mark next to a space (quirk kept);
4. the VQA period rule (again with at most 32 periods removed) and digits/articles/contractions.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from functools import cache

from repro.errors import ReproError
from repro.metrics.base import MetricResult
from repro.metrics.vqa import N_ANSWERS, digits_and_articles, leave_one_out, strip_punctuation

MMF_DIGIT_COMMA = re.compile(r"(?<=\d)(\,)+(?=\d)")


@cache
def normalize(text: str) -> str:
    """mmf's `EvalAIAnswerProcessor.__call__`."""
    text = text.lower().replace(",", "").replace("?", "").replace("'s", " 's").strip()
    text = text.replace("\n", " ").replace("\t", " ").strip()
    return digits_and_articles(strip_punctuation(text, MMF_DIGIT_COMMA))


def score_one(prediction: str, answers: Sequence[str]) -> float:
    """One question as a fraction in [0, 1]."""
    if len(answers) != N_ANSWERS:
        raise ReproError(f"textvqa: {len(answers)} human answers; the TextVQA score needs {N_ANSWERS}")
    gts = [normalize(a) for a in answers]
    pred = normalize(prediction)
    # mmf scores each distinct answer over (index, answer) pairs: exactly one answer is left out
    return leave_one_out([g == pred for g in gts])


def evaluate(
    answers: Sequence[Sequence[str]], predictions: Sequence[str], question_ids: Sequence[Hashable] | None = None
) -> MetricResult:
    """TextVQA accuracy in percent: `accuracy` = 100 * mean of the per-question scores."""
    if len(answers) != len(predictions):
        raise ReproError(f"textvqa: {len(answers)} annotated questions but {len(predictions)} predictions")
    ids = list(question_ids) if question_ids is not None else list(range(len(predictions)))
    per_q = []
    for qid, gts, pred in zip(ids, answers, predictions):
        if len(gts) != N_ANSWERS:
            raise ReproError(f"textvqa: question {qid} has {len(gts)} human answers; the score needs {N_ANSWERS}")
        per_q.append(score_one(pred, gts))
    accuracy = 100 * (sum(per_q) / len(per_q)) if per_q else float("nan")
    return MetricResult("textvqa", {"accuracy": accuracy}, {q: 100 * s for q, s in zip(ids, per_q)}, len(per_q))
