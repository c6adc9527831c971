"""PHOC, the Pyramidal Histogram Of Characters (Almazán et al., TPAMI 2014), M4C's 604-d OCR token feature.

Unigrams of the 36 characters a-z0-9 at pyramid levels 2, 3, 4, 5 (36 x 14 = 504 bins), then the 50
most frequent English bigrams at level 2 (100 bins): 604. Character k of an n-character word spans
[k/n, (k+1)/n]; it falls in region r of a level with L regions when at least half of it lies inside
[r/L, (r+1)/L]. Other characters are skipped. The bigram list is the common one of PHOC
implementations; the released M4C features come from the `cphoc` extension of the same definition.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

UNIGRAMS = "abcdefghijklmnopqrstuvwxyz0123456789"
LEVELS = (2, 3, 4, 5)
BIGRAMS = (
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me de "
    "hi ri ro ic ne ea ra ce li ch ll be ma si om ur"
).split()
BIGRAM_LEVEL = 2
PHOC_DIM = len(UNIGRAMS) * sum(LEVELS) + len(BIGRAMS) * BIGRAM_LEVEL  # 604


def _regions(start: float, end: float, level: int) -> list[int]:
    return [r for r in range(level) if min(end, (r + 1) / level) - max(start, r / level) >= (end - start) / 2]


@lru_cache(maxsize=100_000)
def _phoc(word: str) -> bytes:
    out = np.zeros(PHOC_DIM, dtype=np.float32)
    n = len(word)
    offset = 0
    for level in LEVELS:
        for k, ch in enumerate(word):
            c = UNIGRAMS.find(ch)
            if c < 0:
                continue
            for r in _regions(k / n, (k + 1) / n, level):
                out[offset + r * len(UNIGRAMS) + c] = 1.0
        offset += level * len(UNIGRAMS)
    for k in range(n - 1):
        b = BIGRAMS.index(word[k : k + 2]) if word[k : k + 2] in BIGRAMS else -1
        if b < 0:
            continue
        for r in _regions(k / n, (k + 2) / n, BIGRAM_LEVEL):
            out[offset + r * len(BIGRAMS) + b] = 1.0
    return out.tobytes()


def phoc(word: str) -> np.ndarray:
    """The 604-d PHOC of a word (lower-cased), float32 0/1."""
    return np.frombuffer(_phoc(word.lower()), dtype=np.float32).copy()
