"""GQA accuracy with the binary / open split, as the official GQA evaluation (`eval.py` of the GQA
release) defines it.

Function API::

    from repro.metrics import gqa
    result = gqa.evaluate(gold, predictions, question_ids, structural, balanced)
    result.aggregate["overall"]     # percent of questions answered right ("accuracy" in eval.py)
    result.aggregate["binary"]      # questions whose structural type is not "query"
    result.aggregate["open"]        # questions whose structural type is "query"
    result.aggregate["per_structural_type"]

What the official script does, and so what this does:
- a question counts only when its record says `isBalanced` (every question of a *_balanced_* file
  does; an `all` file mixes both);
- an answer is right when it equals the gold `answer` string exactly: no case folding, no trimming;
- a question is "open" when `types.structural` is "query", else "binary" (verify, logical, choose,
  compare): a property of the question, not of its answer.
Validity, plausibility, consistency, grounding and distribution need the scene graphs and choices
files and are not computed (the official script leaves them undefined on test-dev too).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from repro.errors import ReproError
from repro.metrics.base import MetricResult, mean_percent

OPEN_TYPE = "query"  # eval.py: answerType = "open" if structural == "query" else "binary"


def answer_type(structural: str) -> str:
    return "open" if structural == OPEN_TYPE else "binary"


def evaluate(
    gold: Sequence[str],
    predictions: Sequence[str],
    question_ids: Sequence[Hashable],
    structural: Sequence[str],
    balanced: Sequence[bool] | None = None,
) -> MetricResult:
    n = len(gold)
    if not (len(predictions) == len(question_ids) == len(structural) == n):
        raise ReproError(
            f"gqa: {n} questions but {len(predictions)} predictions, {len(question_ids)} ids and "
            f"{len(structural)} structural types"
        )
    if balanced is not None and len(balanced) != n:
        raise ReproError(f"gqa: {n} questions but {len(balanced)} isBalanced flags")
    if balanced is not None and any(not isinstance(b, bool) for b in balanced):
        raise ReproError("gqa: isBalanced flags must be true or false")
    if n and balanced is not None and not any(balanced):
        raise ReproError(f"gqa: none of the {n} questions is balanced (isBalanced); nothing to score")
    scores: dict[str, list[float]] = {"binary": [], "open": []}
    per_type: dict[str, list[float]] = {}
    per_item: dict[Hashable, float] = {}
    overall: list[float] = []
    for i, (qid, g, p, t) in enumerate(zip(question_ids, gold, predictions, structural)):
        if balanced is not None and not balanced[i]:
            continue
        score = 1.0 if isinstance(p, str) and p == g else 0.0
        overall.append(score)
        scores[answer_type(t)].append(score)
        per_type.setdefault(t, []).append(score)
        per_item[qid] = 100 * score
    aggregate = {
        "overall": mean_percent(overall),
        "binary": mean_percent(scores["binary"]),
        "open": mean_percent(scores["open"]),
        "per_structural_type": {t: mean_percent(v) for t, v in sorted(per_type.items())},
        "counts": {"binary": len(scores["binary"]), "open": len(scores["open"])},
    }
    return MetricResult("gqa", aggregate, per_item, len(overall))
