"""WUPS@t (Wu-Palmer set similarity, Malinowski & Fritz 2014), on WordNet 3.0 through NLTK.

Function API::

    from repro.metrics import wups
    result = wups.evaluate(gold, predictions, threshold=0.9, variant="cocoqa")
    result.aggregate["wups@0.9"]   # percent, unrounded

The pair measure m(a, b), common to both reference scripts:

* a == b (as strings) scores 1, whether or not WordNet knows the word;
* otherwise take every noun synset of a and of b (`wn.synsets(word, pos=NOUN)`, which lower-cases
  and lemmatises) and the largest Wu-Palmer similarity w over all pairs, 0 if either has none;
* threshold rule: the score is w when w >= t, else 0.1 * w (so at exactly w = t the full w counts).

Variants:

* `"cocoqa"` (default) — the COCO-QA authors' `calculate_wups.py`: one word per answer, one
  direction only, m(gold, prediction); the mean is the float sum of score / n. It caches pairs
  under the key gold + "," + prediction, so two pairs that join to the same key share a score
  (only possible with commas in answers; kept).
* `"malinowski"` — `compute_wups.py`: answers are comma-separated sets (items stripped), and a
  question scores min(prod over gold items a of max_p m(a, p), prod over predicted items p of
  max_a m(p, a)): both directions, the smaller wins. The mean is sum / n.

t = -1 means plain exact-match accuracy in both scripts, and here. Any other threshold must lie in
[0, 1] (the scripts take any number; outside [0, 1] the rule stops meaning anything): a ReproError.
Wu-Palmer values come from the installed NLTK (3.8+); the 2015 scripts ran an older NLTK.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from repro.errors import ReproError
from repro.metrics.base import MetricResult, shown

VARIANTS = ("cocoqa", "malinowski")


def check_threshold(threshold: float) -> float:
    """`threshold` as a float, or a ReproError unless it is in [0, 1] or -1 (exact match)."""
    try:
        value = float(threshold)
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if not (value == -1 or 0 <= value <= 1):
        raise ReproError(f"wups: threshold {shown(threshold)} must be in [0, 1], or -1 for exact match")
    return value


def key_for(threshold: float) -> str:
    return f"wups@{float(threshold)}"


class Measure:
    """The pair measure m(a, b) at one threshold, with its synset lookups cached."""

    def __init__(self, threshold: float, wordnet=None):
        self.threshold = float(threshold)
        self.wn = wordnet
        self._synsets: dict[str, list] = {}

    def synsets(self, word: str) -> list:
        if word not in self._synsets:
            if self.wn is None:
                from repro.metrics import wordnet as wordnet_loader

                self.wn = wordnet_loader.load()
            self._synsets[word] = self.wn.synsets(word, pos="n")
        return self._synsets[word]

    def wup(self, a: str, b: str) -> float:
        """max over noun-synset pairs of Wu-Palmer similarity, in the direction a -> b."""
        best = 0.0
        for x in self.synsets(a):
            for y in self.synsets(b):
                local = x.wup_similarity(y)
                if local is not None and local > best:
                    best = local
        return best

    def __call__(self, a: str, b: str) -> float:
        if self.threshold == -1:
            return float(a == b)
        if a == b:
            return 1.0
        if not self.synsets(a) or not self.synsets(b):
            return 0.0
        best = self.wup(a, b)
        return best * (1.0 if best >= self.threshold else 0.1)


def items(answer: str) -> list[str]:
    """Malinowski's answer set: comma-separated, each item stripped."""
    return [item.strip() for item in answer.split(",")]


def score_malinowski(gold: str, prediction: str, measure: Measure) -> float:
    A, T = items(gold), items(prediction)
    left = math.prod(max(measure(a, t) for t in T) for a in A)
    right = math.prod(max(measure(t, a) for a in A) for t in T)
    return min(left, right)


def evaluate(
    gold: Sequence[str],
    predictions: Sequence[str],
    threshold: float = 0.9,
    variant: str = "cocoqa",
    question_ids: Sequence[Hashable] | None = None,
    types: Sequence[str] | None = None,
    wordnet=None,
) -> MetricResult:
    """WUPS in percent under `key_for(threshold)`; `per_type` when `types` are given."""
    if variant not in VARIANTS:
        raise ReproError(f"unknown wups variant {variant!r}; one of {', '.join(VARIANTS)}")
    check_threshold(threshold)
    if len(gold) != len(predictions):
        raise ReproError(f"wups: {len(gold)} annotated questions but {len(predictions)} predictions")
    measure = Measure(threshold, wordnet)
    per_q: list[float] = []
    if variant == "cocoqa":
        cache: dict[str, float] = {}
        for g, p in zip(gold, predictions):
            key = g + "," + p
            if key in cache:
                per_q.append(cache[key])
                continue
            score = measure(g, p)
            # the script stores a pair only after a WordNet lookup (not for a == b or no synsets)
            if threshold != -1 and g != p and measure.synsets(g) and measure.synsets(p):
                cache[key] = score
            per_q.append(score)
    else:
        per_q = [score_malinowski(g, p, measure) for g, p in zip(gold, predictions)]
    ids = list(question_ids) if question_ids is not None else list(range(len(per_q)))
    n = len(per_q)
    if n == 0:
        value = float("nan")
    elif variant == "cocoqa":
        value = 100 * sum(float(x) / float(n) for x in per_q)
    else:
        value = 100 * float(sum(per_q)) / float(n)
    aggregate: dict = {key_for(threshold): value}
    if types is not None:
        groups: dict[str, list[float]] = {}
        for t, s in zip(types, per_q):
            groups.setdefault(str(t), []).append(s)
        aggregate["per_type"] = {t: 100 * float(sum(v)) / len(v) for t, v in groups.items()}
    return MetricResult("wups", aggregate, {q: 100 * s for q, s in zip(ids, per_q)}, n)
