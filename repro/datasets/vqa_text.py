"""Question tokenisation, answer normalisation and soft scores as MCAN prepares VQA, and GloVe lookup."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from rich.progress import Progress

from repro.data.progress import Bar
from repro.errors import ReproError
from repro.metrics.vqa import normalize

PAD, UNK = "PAD", "UNK"
MAX_TOKENS = 14

_QUESTION_PUNCT = re.compile(r"[.,'!?\"()*#:;]")


def tokenize(question: str) -> list[str]:
    """MCAN: lower-case, delete . , ' ! ? " ( ) * # : ;, split '-' and '/' into spaces, split on whitespace."""
    return _QUESTION_PUNCT.sub("", question.lower()).replace("-", " ").replace("/", " ").split()


def encode(tokens: list[str], vocab: dict[str, int], max_tokens: int = MAX_TOKENS) -> np.ndarray:
    """Token ids padded with PAD (0) or truncated to `max_tokens`; unknown words are UNK (1)."""
    ids = np.zeros(max_tokens, np.int64)
    unk = vocab[UNK]
    for i, word in enumerate(tokens[:max_tokens]):
        ids[i] = vocab.get(word, unk)
    return ids


# --- answers ----------------------------------------------------------------------------------


def normalize_answer(answer: str) -> str:
    """MCAN's `prep_ans`: the official VQA evaluation's normalisation (punctuation, number words ->
    digits, articles dropped, contractions), then every comma removed."""
    return normalize(answer).replace(",", "")


def soft_score(count: int) -> float:
    """MCAN's target for an answer given by `count` of the 10 annotators: 0, .3, .6, .9, 1."""
    return (0.0, 0.3, 0.6, 0.9)[count] if count < 4 else 1.0


# --- GloVe ------------------------------------------------------------------------------------


def load_glove(path: Path, words: Iterable[str], progress: Progress | None = None) -> tuple[dict[str, np.ndarray], int]:
    """Vectors for `words` from a GloVe text file (`word v1 ... vD` per line); returns (vectors, D).

    Only wanted words are parsed, so the 5.6 GB 840B file streams through in one pass. A few
    840B tokens contain spaces; the vector is always the last D fields.
    """
    wanted = set(words)
    found: dict[str, np.ndarray] = {}
    try:
        size = path.stat().st_size
        bar = Bar(progress, f"GloVe {path.name}", size)
        with open(path, "rb") as fh:
            # the dimension: the fewest fields among the first lines (a token with spaces only adds fields)
            head_lines = [fh.readline() for _ in range(100)]
            counts = [len(line.rstrip().split(b" ")) - 1 for line in head_lines if line.strip()]
            dim = min(counts) if counts else 0
            if dim < 1:
                raise ReproError(f"{path}:1: not a GloVe text file (a word followed by numbers per line)")
            fh.seek(0)
            for line_no, raw in enumerate(fh, 1):
                bar.advance(len(raw))
                head = raw[: raw.find(b" ")].decode("utf-8", "replace")
                if head not in wanted or head in found:
                    continue
                parts = raw.rstrip(b"\r\n").rsplit(b" ", dim)
                if len(parts) != dim + 1 or parts[0].decode("utf-8", "replace") != head:
                    continue
                try:
                    found[head] = np.array(parts[1:], dtype=np.float32)
                except ValueError:
                    raise ReproError(f"{path}:{line_no}: vector of {head!r} is not {dim} numbers") from None
    except OSError as exc:
        raise ReproError(f"{path}: cannot read GloVe vectors ({exc.strerror})") from None
    return found, dim
