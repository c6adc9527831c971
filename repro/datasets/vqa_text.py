"""Question tokenisation, answer normalisation and soft scores as MCAN prepares VQA, and GloVe lookup."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from rich.progress import Progress

from repro.data.progress import Bar
from repro.errors import ReproError

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


# --- answers (the normalisation of the official VQA evaluation, which MCAN applies before counting) ---

_ANSWER_PUNCT = [
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
_COMMA_BETWEEN_DIGITS = re.compile(r"(\d)(,)(\d)")
_PERIOD_NOT_DECIMAL = re.compile(r"\.(?!\d)")
_NUMBER_WORDS = {
    "none": "0",
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
_ARTICLES = {"a", "an", "the"}
# contractions written without an apostrophe -> the form the evaluation compares against
_CONTRACTIONS = {
    "aint": "ain't",
    "arent": "aren't",
    "cant": "can't",
    "couldve": "could've",
    "couldnt": "couldn't",
    "couldn'tve": "couldn't've",
    "couldnt've": "couldn't've",
    "didnt": "didn't",
    "doesnt": "doesn't",
    "dont": "don't",
    "hadnt": "hadn't",
    "hadnt've": "hadn't've",
    "hadn'tve": "hadn't've",
    "hasnt": "hasn't",
    "havent": "haven't",
    "hed": "he'd",
    "hed've": "he'd've",
    "he'dve": "he'd've",
    "hes": "he's",
    "howd": "how'd",
    "howll": "how'll",
    "hows": "how's",
    "Id've": "I'd've",
    "I'dve": "I'd've",
    "Im": "I'm",
    "Ive": "I've",
    "isnt": "isn't",
    "itd": "it'd",
    "itd've": "it'd've",
    "it'dve": "it'd've",
    "itll": "it'll",
    "let's": "let's",
    "maam": "ma'am",
    "mightnt": "mightn't",
    "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've",
    "mightve": "might've",
    "mustnt": "mustn't",
    "mustve": "must've",
    "neednt": "needn't",
    "notve": "not've",
    "oclock": "o'clock",
    "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at",
    "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at",
    "shant": "shan't",
    "shed've": "she'd've",
    "she'dve": "she'd've",
    "she's": "she's",
    "shouldve": "should've",
    "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've",
    "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've",
    "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll",
    "somebodys": "somebody's",
    "someoned": "someone'd",
    "someoned've": "someone'd've",
    "someone'dve": "someone'd've",
    "someonell": "someone'll",
    "someones": "someone's",
    "somethingd": "something'd",
    "somethingd've": "something'd've",
    "something'dve": "something'd've",
    "somethingll": "something'll",
    "thats": "that's",
    "thered": "there'd",
    "thered've": "there'd've",
    "there'dve": "there'd've",
    "therere": "there're",
    "theres": "there's",
    "theyd": "they'd",
    "theyd've": "they'd've",
    "they'dve": "they'd've",
    "theyll": "they'll",
    "theyre": "they're",
    "theyve": "they've",
    "twas": "'twas",
    "wasnt": "wasn't",
    "wed've": "we'd've",
    "we'dve": "we'd've",
    "weve": "we've",
    "werent": "weren't",
    "whatll": "what'll",
    "whatre": "what're",
    "whats": "what's",
    "whatve": "what've",
    "whens": "when's",
    "whered": "where'd",
    "wheres": "where's",
    "whereve": "where've",
    "whod": "who'd",
    "whod've": "who'd've",
    "who'dve": "who'd've",
    "wholl": "who'll",
    "whos": "who's",
    "whove": "who've",
    "whyll": "why'll",
    "whyre": "why're",
    "whys": "why's",
    "wont": "won't",
    "wouldve": "would've",
    "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've",
    "yall": "y'all",
    "yall'll": "y'all'll",
    "y'allll": "y'all'll",
    "yall'd've": "y'all'd've",
    "y'alld've": "y'all'd've",
    "y'all'dve": "y'all'd've",
    "youd": "you'd",
    "youd've": "you'd've",
    "you'dve": "you'd've",
    "youll": "you'll",
    "youre": "you're",
    "youve": "you've",
}


def _strip_punctuation(text: str) -> str:
    out = text
    for p in _ANSWER_PUNCT:
        if (p + " " in text or " " + p in text) or _COMMA_BETWEEN_DIGITS.search(text) is not None:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD_NOT_DECIMAL.sub("", out)


def _digits_and_articles(text: str) -> str:
    words = []
    for word in text.lower().split():
        word = _NUMBER_WORDS.get(word, word)
        if word not in _ARTICLES:
            words.append(_CONTRACTIONS.get(word, word))
    return " ".join(words)


def normalize_answer(answer: str) -> str:
    """MCAN's `prep_ans`: punctuation, number words -> digits, articles dropped, contractions, commas."""
    return _digits_and_articles(_strip_punctuation(answer)).replace(",", "")


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
