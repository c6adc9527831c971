"""ANLS (average normalised Levenshtein similarity, ST-VQA), as the Robust Reading Competition script.

Function API::

    from repro.metrics import anls
    result = anls.evaluate(answers, predictions, question_ids=qids)   # any number of answers each
    result.aggregate["anls"]   # in [0, 1], as the ST-VQA leaderboard reports it

Rules of the Robust Reading Competition script (the copy vendored with the DocVQA and
InfographicVQA evaluations), variant `"rrc"`, the default:

* both strings are stripped, lower-cased and their internal whitespace runs collapsed to one space
  before the edit distance is taken;
* the distance is divided by max(len) of the *original* strings (the script measures
  `len(answer.upper())`, so untrimmed spaces count in the divisor and a character whose upper case
  is longer, like "ß", counts twice);
* two empty strings have distance 0 (similarity 1), not a division by zero;
* the question scores 1 - min over answers of the normalised distance, set to 0 when it is
  *below* tau = 0.5: a similarity of exactly 0.5 is kept.

Where the other implementations differ (selectable with `variant`, for comparison only):

* `"mmf"` — mmf's `STVQAANLSEvaluator`: lower + strip only (inner whitespace kept), divisor from
  the processed strings, similarity >= 0.5 kept; two empty strings raise ZeroDivisionError there
  (we score them 1 and say so here).
* `"pypi"` — the PyPI `anls` package 0.0.2: same whitespace collapsing as the RRC script but the
  divisor comes from the processed strings, and it keeps a similarity only when the distance is
  strictly below 0.5, so a similarity of exactly 0.5 scores 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from repro.errors import ReproError
from repro.metrics.base import MetricResult

VARIANTS = ("rrc", "mmf", "pypi")
THRESHOLD = 0.5


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute; cost 1 each) over code points."""
    if len(a) > len(b):
        a, b = b, a
    previous = list(range(len(a) + 1))
    for j, cb in enumerate(b, 1):
        current = [j]
        for i, ca in enumerate(a, 1):
            current.append(min(previous[i] + 1, current[i - 1] + 1, previous[i - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _collapse(text: str) -> str:
    return " ".join(text.strip().lower().split())


def normalized_distance(answer: str, prediction: str, variant: str = "rrc") -> float:
    """Distance / length as the chosen implementation computes it."""
    if variant == "rrc":
        dist = levenshtein(_collapse(answer), _collapse(prediction))
        length = max(len(answer.upper()), len(prediction.upper()))
    elif variant == "pypi":
        a, p = _collapse(answer), _collapse(prediction)
        dist, length = levenshtein(a, p), max(len(a.upper()), len(p.upper()))
    elif variant == "mmf":
        a, p = answer.lower().strip(), prediction.lower().strip()
        dist, length = levenshtein(a, p), max(len(a), len(p))
    else:
        raise ReproError(f"unknown anls variant {variant!r}; one of {', '.join(VARIANTS)}")
    return 0.0 if length == 0 else float(dist) / float(length)


def score_one(prediction: str, answers: Sequence[str], variant: str = "rrc", threshold: float = THRESHOLD) -> float:
    """One question's ANLS in [0, 1]."""
    if not answers:
        raise ReproError("anls: a question with no ground-truth answer")
    best = 1 - min(normalized_distance(a, prediction, variant) for a in answers)
    if variant == "pypi":
        # keeps 1 - d only when d < threshold: the boundary itself scores 0
        return best if (1 - best) < threshold else 0.0
    return 0.0 if best < threshold else best


def evaluate(
    answers: Sequence[Sequence[str]],
    predictions: Sequence[str],
    question_ids: Sequence[Hashable] | None = None,
    variant: str = "rrc",
    threshold: float = THRESHOLD,
) -> MetricResult:
    """`anls` = mean per-question score (a float sum in question order over the count)."""
    if len(answers) != len(predictions):
        raise ReproError(f"anls: {len(answers)} annotated questions but {len(predictions)} predictions")
    ids = list(question_ids) if question_ids is not None else list(range(len(predictions)))
    per_q = []
    for qid, gts, pred in zip(ids, answers, predictions):
        if not gts:
            raise ReproError(f"anls: question {qid} has no ground-truth answer")
        per_q.append(score_one(pred, gts, variant, threshold))
    total = 0
    for s in per_q:
        total += s
    value = total / len(per_q) if per_q else float("nan")
    return MetricResult("anls", {"anls": value}, dict(zip(ids, per_q)), len(per_q))
