"""Section 6 of SA-M4C: the spatial-question subsets of TextVQA val and what a model does on them.

D_spa: the val questions with at least one spatial preposition. The paper's list is only in its
supplementary material (the introduction names "right", "top", "contains"); `SPATIAL_WORDS` is this
toolkit's list, without "on" and "in" (nearly every TextVQA question has one, and D_spa is ~14% of
val). D_spa+ocr: the questions of D_spa whose majority answer is one of the image's OCR tokens.

Columns (keys of the spec): `d_spa`, `d_spa+ocr` (subset sizes); per subset S, `S-count` (answers
copied from OCR tokens, `metric: copy-rate`), `S-answered` (questions of S), `S-copied` (TextVQA
accuracy on the copied answers) and `S-gain-over-m4c` (accuracy on S minus the M4C row's).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from repro.metrics import copy_rate

SPATIAL_WORDS = frozenset(
    "above below under underneath beneath over top bottom left right behind front next beside near "
    "between inside contains containing around across along upper lower corner middle center centre side".split()
)
SUBSETS = ("d_spa", "d_spa+ocr")


def is_spatial(question: str) -> bool:
    return any(w in SPATIAL_WORDS for w in re.findall(r"[a-z]+", question.lower()))


def majority_in_ocr(answers: list[str], ocr_tokens: list[str]) -> bool:
    if not answers:
        return False
    majority = Counter(a.strip().lower() for a in answers).most_common(1)[0][0]
    return majority in {t.lower() for t in ocr_tokens}


def subset_ids(questions: list[dict[str, Any]], ocr_tokens: Callable[[int], list[str]]) -> dict[str, list[int]]:
    """{subset: question ids} over the val questions; `ocr_tokens(k)` gives question k's OCR tokens."""
    spa = [k for k, q in enumerate(questions) if is_spatial(q["question"])]
    spa_ocr = [k for k in spa if majority_in_ocr(questions[k].get("answers") or [], ocr_tokens(k))]
    return {
        "d_spa": [questions[k]["question_id"] for k in spa],
        "d_spa+ocr": [questions[k]["question_id"] for k in spa_ocr],
    }


def subset_columns(
    spec, val, scores: dict[int, dict[str, Any]], baseline: Callable[[], dict] | None
) -> dict[str, float]:
    """The spec's Section 6 columns of one model row (val = the TextVQADataset, scores per question id);
    the gains over M4C only when `baseline` gives the M4C row's scores (None for the M4C row itself)."""
    subsets = subset_ids(val.questions, val.ocr_tokens)
    values: dict[str, float] = {}
    base = None
    for name, ids in subsets.items():
        copied = copy_rate.evaluate([bool(scores[q]["copied"]) for q in ids], ids)
        values[f"{name}-count"] = copied.aggregate["count"]
        values[f"{name}-answered"] = copied.aggregate["answered"]
        kept = [scores[q]["score"] for q in ids if scores[q]["copied"]]
        if kept:  # no copied answer: the accuracy on them is undefined and the column stays empty
            values[f"{name}-copied"] = sum(kept) / len(kept)
        if baseline is not None and any(col.key == f"{name}-gain-over-m4c" for col in spec.columns):
            base = base if base is not None else baseline()
            if ids:
                mine = sum(scores[q]["score"] for q in ids) / len(ids)
                values[f"{name}-gain-over-m4c"] = mine - sum(base[q]["score"] for q in ids) / len(ids)
    return {col.name: float(values[col.key]) for col in spec.columns if col.key in values}
