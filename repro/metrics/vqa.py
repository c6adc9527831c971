"""VQA v1/v2 soft accuracy, item for item as `GT-Vision-Lab/VQA` `vqaEval.py` computes it.

Function API (what training code calls on in-memory predictions)::

    from repro.metrics import vqa
    result = vqa.evaluate(answers, predictions, question_ids=qids,
                          answer_types=atypes, question_types=qtypes, variant="2021")
    result.aggregate["overall"], result.aggregate["yes/no"], result.per_item[qid]

`answers` is a sequence of 10 human answers per question, `predictions` one string per question,
aligned. Scores are percentages, unrounded; `round_like_official(x)` gives the official 2 digits.

The rules, read from the reference script (both variants share the tables below):

* whitespace: `\\n` and `\\t` become spaces, then the string is stripped;
* punctuation (`strip_punctuation`): for each character of `PUNCTUATION`, it is deleted when it
  has a space on either side somewhere in the text *or* the text contains a digit-comma-digit
  anywhere; otherwise it becomes a space. Apostrophes and colons are not in the list;
* periods: the script's regex `(?!<=\\d)(\\.)(?!\\d)` was meant as a look-behind but is a
  look-ahead for the text "<=d", so every period not followed by a digit is removed ("5." -> "5",
  "3.5" stays). The script passes `re.UNICODE` where `re.sub` expects `count`, so at most 32
  periods are removed (quirk kept);
* digits and articles (`digits_and_articles`): lower-case, split on whitespace, number words
  zero..ten and "none" become digits, "a", "an", "the" are dropped, then the contraction map is
  applied word by word (its keys "Im", "Ive", "Id've", "I'dve" have capitals and never match a
  lower-cased word: "im" stays "im"; it maps "somebody'd" to "somebodyd");
* score: with m of the 10 human answers equal to the prediction, each human answer is left out in
  turn and the prediction scores min(1, matches among the other 9 / 3); the 10 values are averaged.
  An answer given by >= 4 humans scores 1, by 3 scores 0.9, by 2 scores 0.6, by 1 scores 0.3.

Variants (the two differ only in *when* the rules apply):

* `"2021"` (the file's current head): human answers and the prediction are whitespace-cleaned; only
  when the cleaned human answers are not all identical are both the human answers and the
  prediction passed through punctuation + digits/articles. When all 10 agree, the comparison is
  exact: "Yes" does not match "yes".
* `"2016"`: the prediction is always whitespace-cleaned and passed through punctuation +
  digits/articles; the human answers are never whitespace-cleaned and, only when the raw answers
  are not all identical, get the punctuation rule alone (no lower-casing, no number words).

Speed: every distinct answer string is normalised once, and matching is done on integer codes with
numpy; per-question scores come from the exact Python expression the script evaluates, looked up
by the pattern of matching human answers, so they are bit-identical to a per-question loop.
"""
from __future__ import annotations

import re
from itertools import chain
from operator import itemgetter
from typing import Hashable, Sequence

import numpy as np

from repro.errors import ReproError
from repro.metrics.base import MetricResult

VARIANTS = ("2021", "2016")
N_ANSWERS = 10

PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-",
               ">", "<", "@", "`", ",", "?", "!")
DIGIT_COMMA_DIGIT = re.compile(r"(\d)(,)(\d)")
PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
PERIOD_COUNT = 32  # the script passes re.UNICODE (== 32) as re.sub's `count`
_HAS_PUNCT_OR_PERIOD = re.compile("[" + re.escape("".join(PUNCTUATION)) + ".]")
NUMBER_WORDS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
                "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
ARTICLES = frozenset({"a", "an", "the"})

# The contraction table of the reference script, one "from to" pair per entry.
_CONTRACTION_PAIRS = """
aint ain't|arent aren't|cant can't|couldve could've|couldnt couldn't|couldn'tve couldn't've
couldnt've couldn't've|didnt didn't|doesnt doesn't|dont don't|hadnt hadn't|hadnt've hadn't've
hadn'tve hadn't've|hasnt hasn't|havent haven't|hed he'd|hed've he'd've|he'dve he'd've|hes he's
howd how'd|howll how'll|hows how's|Id've I'd've|I'dve I'd've|Im I'm|Ive I've|isnt isn't|itd it'd
itd've it'd've|it'dve it'd've|itll it'll|let's let's|maam ma'am|mightnt mightn't
mightnt've mightn't've|mightn'tve mightn't've|mightve might've|mustnt mustn't|mustve must've
neednt needn't|notve not've|oclock o'clock|oughtnt oughtn't|ow's'at 'ow's'at|'ows'at 'ow's'at
'ow'sat 'ow's'at|shant shan't|shed've she'd've|she'dve she'd've|she's she's|shouldve should've
shouldnt shouldn't|shouldnt've shouldn't've|shouldn'tve shouldn't've|somebody'd somebodyd
somebodyd've somebody'd've|somebody'dve somebody'd've|somebodyll somebody'll|somebodys somebody's
someoned someone'd|someoned've someone'd've|someone'dve someone'd've|someonell someone'll
someones someone's|somethingd something'd|somethingd've something'd've|something'dve something'd've
somethingll something'll|thats that's|thered there'd|thered've there'd've|there'dve there'd've
therere there're|theres there's|theyd they'd|theyd've they'd've|they'dve they'd've|theyll they'll
theyre they're|theyve they've|twas 'twas|wasnt wasn't|wed've we'd've|we'dve we'd've|weve we've
werent weren't|whatll what'll|whatre what're|whats what's|whatve what've|whens when's|whered where'd
wheres where's|whereve where've|whod who'd|whod've who'd've|who'dve who'd've|wholl who'll|whos who's
whove who've|whyll why'll|whyre why're|whys why's|wont won't|wouldve would've|wouldnt wouldn't
wouldnt've wouldn't've|wouldn'tve wouldn't've|yall y'all|yall'll y'all'll|y'allll y'all'll
yall'd've y'all'd've|y'alld've y'all'd've|y'all'dve y'all'd've|youd you'd|youd've you'd've
you'dve you'd've|youll you'll|youre you're|youve you've
"""
CONTRACTIONS = dict(
    tuple(pair.split(" ")) for pair in _CONTRACTION_PAIRS.replace("\n", "|").split("|") if pair.strip())


class AnswerTable:
    """Human answers of n questions, all with the same count, as integer codes into `strings`.

    What the file reader builds for the official layout without a Python loop per answer; it also
    reads as a sequence of answer lists, so every scorer accepts it."""

    def __init__(self, codes: np.ndarray, strings: list):
        self.codes, self.strings = codes, strings

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):
        return [self.strings[c] for c in self.codes[i]]

    @classmethod
    def from_items(cls, items: list, answers_key: str = "answers", text_key: str = "answer"):
        """From [{answers_key: [{text_key: str}, ...]}, ...]; None when the counts differ."""
        lists = list(map(itemgetter(answers_key), items))
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        if len(counts) == 0 or (counts != counts[0]).any():
            return None
        texts = lambda: map(itemgetter(text_key), chain.from_iterable(lists))  # noqa: E731
        index = dict.fromkeys(texts())
        for code, text in enumerate(index):
            index[text] = code
        codes = np.fromiter(map(index.__getitem__, texts()), dtype=np.int64, count=int(counts.sum()))
        return cls(codes.reshape(len(lists), int(counts[0])), list(index))


def clean_whitespace(text: str) -> str:
    """Newlines and tabs to spaces, then strip."""
    return text.replace("\n", " ").replace("\t", " ").strip()


def strip_punctuation(text: str, digit_comma: re.Pattern = DIGIT_COMMA_DIGIT) -> str:
    """The script's punctuation rule, then its period rule (see the module docstring)."""
    if not _HAS_PUNCT_OR_PERIOD.search(text):
        return text  # nothing for either rule to do
    delete_all = digit_comma.search(text) is not None
    out = text
    for p in PUNCTUATION:
        # the test looks at the input text, not at the text being rewritten
        if delete_all or (p + " " in text) or (" " + p in text):
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return PERIOD.sub("", out, count=PERIOD_COUNT)


def digits_and_articles(text: str) -> str:
    """Lower-case, number words to digits, drop articles, expand contractions, re-join on spaces."""
    # number words map to digits, never to articles, so dropping articles after the mapping is the same
    mapped = (NUMBER_WORDS.get(word, word) for word in text.lower().split())
    return " ".join([CONTRACTIONS.get(word, word) for word in mapped if word not in ARTICLES])


def normalize(text: str) -> str:
    """Punctuation, then digits and articles: what the script applies to a compared answer."""
    return digits_and_articles(strip_punctuation(text))


def leave_one_out(matches: Sequence[bool]) -> float:
    """The script's score for one question, given which human answers equal the prediction.

    Each human answer is left out in turn; the prediction scores min(1, equal others / 3); the mean
    of those values (a Python float sum in answer order, divided by the count) is the score.
    """
    m = sum(bool(x) for x in matches)
    accs = [min(1, float(m - (1 if hit else 0)) / 3) for hit in matches]
    return float(sum(accs)) / len(accs)


def score_one(prediction: str, answers: Sequence[str], variant: str = "2021") -> float:
    """One question, scalar and straightforward (fraction in [0, 1]); the vectorised path must agree."""
    if variant == "2021":
        gts = [clean_whitespace(a) for a in answers]
        pred = clean_whitespace(prediction)
        if len(set(gts)) > 1:
            gts = [normalize(a) for a in gts]
            pred = normalize(pred)
    elif variant == "2016":
        pred = normalize(clean_whitespace(prediction))
        gts = list(answers)
        if len(set(gts)) > 1:
            gts = [strip_punctuation(a) for a in gts]
    else:
        raise ReproError(f"unknown vqa variant {variant!r}; one of {', '.join(VARIANTS)}")
    return leave_one_out([g == pred for g in gts])


def round_like_official(value: float, digits: int = 2) -> float:
    """The script's `round(x, n)` on a percentage."""
    return round(value, digits)


def _codes(*parts: Sequence[Sequence[str]] | Sequence[str], nested: tuple[bool, ...] = ()) -> tuple[np.ndarray, list[str]]:
    """Integer codes for strings (equal strings, equal codes) and the distinct strings in order of
    first appearance. Each part is a list of strings, or of lists of strings when `nested` says so;
    two C-speed passes (`dict.fromkeys`, `map`) do the work."""
    flat = chain.from_iterable(chain.from_iterable(p) if (nested and nested[k]) else p for k, p in enumerate(parts))
    index = dict.fromkeys(flat)
    for code, text in enumerate(index):
        index[text] = code
    flat = chain.from_iterable(chain.from_iterable(p) if (nested and nested[k]) else p for k, p in enumerate(parts))
    return np.fromiter(map(index.__getitem__, flat), dtype=np.int64), list(index)


def _extend_ids(known: list[str], known_ids: np.ndarray, new: list[str]) -> np.ndarray:
    """Ids for `new` strings in the space of `known` ones; unseen strings get fresh ids."""
    lookup = dict(zip(known, known_ids.tolist()))
    fresh = int(known_ids.max()) + 1 if len(known_ids) else 0
    out = np.empty(len(new), dtype=np.int64)
    for k, text in enumerate(new):
        value = lookup.get(text)
        if value is None:
            value = lookup[text] = fresh
            fresh += 1
        out[k] = value
    return out


def _append_codes(strings: list[str], new: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Codes of `new` strings after those of `strings` (which already hold codes 0..len-1)."""
    lookup = dict(zip(strings, range(len(strings))))
    uniques = list(strings)
    out = np.empty(len(new), dtype=np.int64)
    for k, text in enumerate(new):
        code = lookup.get(text)
        if code is None:
            code = lookup[text] = len(uniques)
            uniques.append(text)
        out[k] = code
    return out, uniques


def _match_matrix(rows: Sequence[Sequence[str]], predictions: Sequence[str], variant: str) -> np.ndarray:
    """(n, 10) booleans: human answer j of question i equals its prediction, under the variant's rules."""
    n = len(predictions)
    try:
        if isinstance(rows, AnswerTable):
            pred_codes, uniques = _append_codes(rows.strings, predictions)
            codes = np.concatenate([rows.codes.ravel(), pred_codes])
        else:
            codes, uniques = _codes(rows, predictions, nested=(True, False))
    except TypeError:  # an unhashable answer (a list, an object)
        uniques = [a for a in chain(chain.from_iterable(rows), predictions) if not isinstance(a, str)]
    bad = next((u for u in uniques if not isinstance(u, str)), None)
    if bad is not None:
        k = next((i for i, row in enumerate(rows) if any(a is bad or a == bad for a in row)), None)
        where = f"a human answer of question #{k}" if k is not None else "a prediction"
        raise ReproError(f"vqa: {where} is {type(bad).__name__} {bad!r}, not a string")
    gt_codes = codes[: n * N_ANSWERS].reshape(n, N_ANSWERS)
    pred_codes = codes[n * N_ANSWERS:]
    needed = np.zeros(len(uniques), dtype=bool)
    if variant == "2021":
        cleaned = [clean_whitespace(u) for u in uniques]
        if any(c != u for c, u in zip(cleaned, uniques)):
            clean_id, _ = _codes(cleaned)
        else:
            clean_id = np.arange(len(uniques), dtype=np.int64)
        gt_clean = clean_id[gt_codes]
        uniform = (gt_clean == gt_clean[:, :1]).all(axis=1)
        # normalise only the strings of questions whose human answers disagree, each string once
        needed[gt_codes[~uniform].ravel()] = True
        needed[pred_codes[~uniform]] = True
        where = np.flatnonzero(needed)
        norm_id = clean_id.copy()
        norm_id[where] = _extend_ids(cleaned, clean_id, [normalize(cleaned[i]) for i in where])
        gt_eff = np.where(uniform[:, None], gt_clean, norm_id[gt_codes])
        pred_eff = np.where(uniform, clean_id[pred_codes], norm_id[pred_codes])
    else:  # 2016
        raw_id = np.arange(len(uniques), dtype=np.int64)  # factorize codes: equal strings, equal codes
        uniform = (gt_codes == gt_codes[:, :1]).all(axis=1)
        needed[gt_codes[~uniform].ravel()] = True
        where = np.flatnonzero(needed)
        in_preds = np.unique(pred_codes)
        punct_id = raw_id.copy()
        punctuated = [strip_punctuation(uniques[i]) for i in where]
        punct_id[where] = _extend_ids(uniques, raw_id, punctuated)
        pred_id = np.zeros(len(uniques), dtype=np.int64)
        pred_id[in_preds] = _extend_ids(uniques + punctuated,
                                        np.concatenate([raw_id, punct_id[where]]),
                                        [normalize(clean_whitespace(uniques[i])) for i in in_preds])
        gt_eff = np.where(uniform[:, None], gt_codes, punct_id[gt_codes])
        pred_eff = pred_id[pred_codes]
    return gt_eff == pred_eff[:, None]


def _first_wrong_count(answers) -> int | None:
    if isinstance(answers, AnswerTable):
        return None if answers.codes.shape[1] == N_ANSWERS or len(answers) == 0 else 0
    return next((i for i, row in enumerate(answers) if len(row) != N_ANSWERS), None)


def scores(answers: Sequence[Sequence[str]], predictions: Sequence[str], variant: str = "2021") -> np.ndarray:
    """Per-question scores as fractions in [0, 1], vectorised; bit-identical to `score_one`."""
    if variant not in VARIANTS:
        raise ReproError(f"unknown vqa variant {variant!r}; one of {', '.join(VARIANTS)}")
    n = len(predictions)
    if len(answers) != n:
        raise ReproError(f"vqa: {len(answers)} annotated questions but {n} predictions")
    bad = _first_wrong_count(answers)
    if bad is not None:
        raise ReproError(f"vqa: question #{bad} has {len(answers[bad])} human answers; the VQA score needs {N_ANSWERS}")
    if n == 0:
        return np.zeros(0)
    match = _match_matrix(answers, predictions, variant)
    patterns = match.astype(np.int64) @ (1 << np.arange(N_ANSWERS, dtype=np.int64))
    distinct, inverse = np.unique(patterns, return_inverse=True)
    table = np.array([leave_one_out([(int(p) >> j) & 1 for j in range(N_ANSWERS)]) for p in distinct])
    return table[inverse.reshape(-1)]


def _group_percent(values: np.ndarray, groups: Sequence[str]) -> dict[str, float]:
    """100 * mean per group, each a Python float sum in question order (as the script sums lists)."""
    codes, names = _codes(groups)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    ordered = values[order].tolist()
    return {str(name): 100 * float(sum(ordered[bounds[k]:bounds[k + 1]])) / int(bounds[k + 1] - bounds[k])
            for k, name in enumerate(names)}


def evaluate(
    answers: Sequence[Sequence[str]],
    predictions: Sequence[str],
    question_ids: Sequence[Hashable] | None = None,
    answer_types: Sequence[str] | None = None,
    question_types: Sequence[str] | None = None,
    variant: str = "2021",
) -> MetricResult:
    """VQA accuracy: `overall`, one key per answer type ("yes/no", "number", "other") and
    `per_question_type`; all percentages, unrounded, averaged in the given question order."""
    ids = list(question_ids) if question_ids is not None else list(range(len(predictions)))
    bad = _first_wrong_count(answers)
    if bad is not None:
        raise ReproError(f"vqa: question {ids[bad]} has {len(answers[bad])} human answers; "
                         f"the VQA score needs {N_ANSWERS}")
    per_q = scores(answers, predictions, variant)
    as_list = per_q.tolist()
    aggregate: dict = {"overall": 100 * float(sum(as_list)) / len(as_list) if as_list else float("nan")}
    if answer_types is not None and as_list:
        aggregate.update(_group_percent(per_q, answer_types))
    if question_types is not None and as_list:
        aggregate["per_question_type"] = _group_percent(per_q, question_types)
    return MetricResult("vqa", aggregate, dict(zip(ids, (100 * per_q).tolist())), len(as_list))
