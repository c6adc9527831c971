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

Speed: answers and predictions become integer codes in one C-speed pass of dict lookups (`factorize`);
each rule runs once per distinct string, over all of them joined into one string where it can (the
`*_many` functions, tested against the one-string rules); matching is done on codes with numpy;
per-question scores come from the exact Python expression the script evaluates, looked up by the
pattern of matching human answers, so they are bit-identical to a per-question loop; the
per-question mapping is built only when it is read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain, compress, count, islice
from operator import itemgetter

import numpy as np

from repro.errors import ReproError
from repro.metrics.base import LazyPerItem, MetricResult, shown

VARIANTS = ("2021", "2016")
N_ANSWERS = 10

PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
DIGIT_COMMA_DIGIT = re.compile(r"(\d)(,)(\d)")
PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
PERIOD_COUNT = 32  # the script passes re.UNICODE (== 32) as re.sub's `count`
_HAS_PUNCT_OR_PERIOD = re.compile("[" + re.escape("".join(PUNCTUATION)) + ".]")
NUMBER_WORDS = {
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
CONTRACTIONS = dict(tuple(pair.split(" ")) for pair in _CONTRACTION_PAIRS.replace("\n", "|").split("|") if pair.strip())


# One map for `digits_and_articles_many`: number words to digits, articles to "" (dropped), contractions
# expanded. No word is in two of the tables and no digit is an article or a contraction, so one lookup
# per word gives what the three rules give in turn.
_WORD_MAP = {**CONTRACTIONS, **NUMBER_WORDS, **dict.fromkeys(ARTICLES, "")}
_SEP = "\x00"  # joins many texts into one string; a text that holds it is handled on its own


def numbering(values: Iterable[Hashable] = ()) -> defaultdict:
    """{value: code} with the distinct `values` numbered 0, 1, ...; a value looked up later for the
    first time is given the next code (what `factorize` relies on)."""
    index = defaultdict(None, zip(values, count()))
    index.default_factory = count(len(index)).__next__
    return index


def factorize(values: Iterable[Hashable], n: int, index: defaultdict) -> np.ndarray:
    """Integer codes of `n` values (equal values, equal codes) in `index`, a `numbering`, which is
    extended in place: new values are numbered on in order of first appearance. One C-speed pass
    of dict lookups; only a new value costs a call (to the numbering's counter)."""
    dtype = np.int32 if len(index) + n < 2**31 else np.int64
    return np.fromiter(map(index.__getitem__, values), dtype=dtype, count=n)


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
        answer_lists = itemgetter(answers_key)
        counts = set(map(len, map(answer_lists, items)))
        if len(counts) != 1:
            return None
        width = counts.pop()
        index = numbering()
        texts = map(itemgetter(text_key), chain.from_iterable(map(answer_lists, items)))
        codes = factorize(texts, len(items) * width, index)
        return cls(codes.reshape(len(items), width), list(index))


class Labels(Sequence):
    """One label per question (its answer type, its question type) as integer codes into `names`:
    what the file reader builds for the official layout, hashing each label once; it reads as the
    plain sequence of labels."""

    def __init__(self, codes: np.ndarray, names: list):
        self.codes, self.names = codes, names

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.names[c] for c in self.codes[i]]
        return self.names[self.codes[i]]

    @classmethod
    def from_items(cls, items: list, keys: Sequence[str]) -> dict[str, "Labels"]:
        """{key: Labels} from [{key: label, ...}, ...] in one pass over the items: each item's
        combination of labels is hashed once, then each key's labels among the few combinations.
        KeyError or TypeError when an item lacks a label or has an unhashable one."""
        if not keys:
            return {}
        get = itemgetter(*keys)
        combos = numbering()
        codes = factorize(map(get, items) if len(keys) > 1 else zip(map(get, items)), len(items), combos)
        out = {}
        for k, key in enumerate(keys):
            names = numbering()
            of = factorize([combo[k] for combo in combos], len(combos), names)
            out[key] = cls(of[codes], list(names))
        return out


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


# --- the same rules over many distinct strings at once ---------------------------------------------


def clean_whitespace_many(texts: list[str]) -> list[str]:
    """`clean_whitespace` of each text: the replacements run once over all texts joined."""
    joined = _SEP.join(texts)
    if "\n" not in joined and "\t" not in joined:
        return list(map(str.strip, texts))  # a text with nothing to strip comes back as itself
    pieces = joined.replace("\n", " ").replace("\t", " ").split(_SEP)
    if len(pieces) != len(texts):  # some text holds the separator
        return [clean_whitespace(t) for t in texts]
    return list(map(str.strip, pieces))


def strip_punctuation_many(texts: list[str]) -> list[str]:
    """`strip_punctuation` of each text. Only texts holding a mark or a period need the rule; one
    regex scan over all texts joined finds them (a hit at offset p lies in the text whose end,
    counting its separator, is the first one past p)."""
    out = list(texts)
    hits = [m.start() for m in _HAS_PUNCT_OR_PERIOD.finditer(_SEP.join(texts))]
    if hits:
        ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
        for i in dict.fromkeys(np.searchsorted(ends, hits, side="right").tolist()):
            out[i] = strip_punctuation(out[i])
    return out


def digits_and_articles_many(texts: list[str]) -> list[str]:
    """`digits_and_articles` of each text. The texts are joined with a separator word between
    spaces, so lower-casing, splitting, the word map and re-joining each run once over all of them;
    the spaces keep every text's words (and `str.lower`'s final-sigma context) its own."""
    between = f" {_SEP} "
    text = between.join(texts)
    if text.count(_SEP) != len(texts) - 1:  # some text holds the separator
        return [digits_and_articles(t) for t in texts]
    words = text.lower().split()
    joined = " ".join(filter(None, map(_WORD_MAP.get, words, words)))  # "" (an article) is dropped
    pieces = joined.split(between)
    if len(pieces) != len(texts):  # a text came out empty, and two separators share a space:
        # without the spaces around them, the separators cut the texts apart
        pieces = joined.replace(" " + _SEP, _SEP).replace(_SEP + " ", _SEP).split(_SEP)
    return pieces


def normalize_many(texts: list[str]) -> list[str]:
    """`normalize` of each text."""
    return digits_and_articles_many(strip_punctuation_many(texts))


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


def _pick(strings: list[str], mask: np.ndarray) -> list[str]:
    """The strings whose entry in the boolean `mask` is set, in order."""
    return list(compress(strings, mask.tolist()))


def _answer_and_prediction_codes(rows, predictions: Sequence) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Codes of the human answers (n, 10) and of the predictions (n,), and the distinct strings they
    number. Anything but a string is an error naming where it is.

    The answers' strings are copied side by side in memory before the predictions are looked up
    and the rules run on them: the parsed JSON strings lie scattered over the whole document, and
    every pass that touches them again waits on memory."""
    n = len(predictions)
    try:
        if isinstance(rows, AnswerTable):
            gt_codes, strings = rows.codes, rows.strings
        else:
            index = numbering()
            gt_codes = factorize(chain.from_iterable(rows), n * N_ANSWERS, index).reshape(n, N_ANSWERS)
            strings = list(index)
        copies = _SEP.join(strings).split(_SEP)  # join raises TypeError on anything but a string
        if len(copies) != len(strings):  # some string holds the separator
            copies = list(strings)
        index = numbering(copies)
        pred_codes = factorize(predictions, n, index)
        _SEP.join(islice(index, len(copies), None))  # the predictions no answer has: strings too?
    except TypeError:  # not a string, or not even hashable (a list, an object)
        bad = next(a for a in chain(chain.from_iterable(rows), predictions) if not isinstance(a, str))
        k = next((i for i, row in enumerate(rows) if any(a is bad for a in row)), None)
        where = f"a human answer of question #{k}" if k is not None else "a prediction"
        raise ReproError(f"vqa: {where} is {type(bad).__name__} {shown(bad)}, not a string") from None
    return gt_codes, pred_codes, list(index)


BLOCK = 1 << 14  # questions matched at a time: the temporaries stay small and in cache


def _match_patterns(
    gt_codes: np.ndarray,
    pred_codes: np.ndarray,
    mixed_of: np.ndarray,
    pred_mixed_of: np.ndarray,
    agree_of: np.ndarray | None,
    pred_agree_of: np.ndarray | None,
) -> np.ndarray:
    """Which human answers equal the prediction, per question as a 10-bit number (bit j: answer j).

    Codes are compared after a lookup: `agree_of` gives the strings that decide whether all human
    answers agree and that are compared where they do (the first answer's against the prediction,
    through `pred_agree_of`); `mixed_of` and `pred_mixed_of` give the strings compared where they
    disagree. A lookup of None leaves the codes as they are. The work goes in blocks of
    questions: fresh arrays as large as all the answers would cost more in page faults than the
    comparisons themselves."""
    n = len(pred_codes)
    patterns = np.empty(n, dtype=np.uint16)
    for start in range(0, n, BLOCK):
        gt, pred = gt_codes[start : start + BLOCK], pred_codes[start : start + BLOCK]
        agree_codes = gt if agree_of is None else agree_of[gt]
        agree = (agree_codes == agree_codes[:, :1]).all(axis=1)
        match = mixed_of[gt] == pred_mixed_of[pred][:, None]
        pred_agree = pred[agree] if pred_agree_of is None else pred_agree_of[pred[agree]]
        match[agree] = (agree_codes[agree, 0] == pred_agree)[:, None]
        # the ten bits of each row, least significant first, as one little-endian 16-bit number
        patterns[start : start + BLOCK] = np.packbits(match, axis=1, bitorder="little").view("<u2")[:, 0]
    return patterns


def _match(rows: Sequence[Sequence[str]], predictions: Sequence[str], variant: str) -> np.ndarray:
    """Per question, which human answers equal its prediction under the variant's rules (as in
    `_match_patterns`). Each rule runs once per distinct string."""
    gt_codes, pred_codes, strings = _answer_and_prediction_codes(rows, predictions)
    if variant == "2021":
        # whitespace-cleaned strings decide agreement and are compared where all agree; where they
        # disagree, normalised strings are compared (normalising the few strings seen only where all
        # agree costs less than finding them)
        cleaned = clean_whitespace_many(strings)
        if cleaned == strings:  # the common case: no string had whitespace to clean
            clean_of = None
            norm_of = factorize(normalize_many(strings), len(strings), numbering())
        else:
            clean = numbering()
            clean_of, cleaned = factorize(cleaned, len(cleaned), clean), list(clean)
            norm_of = factorize(normalize_many(cleaned), len(cleaned), numbering())[clean_of]
        return _match_patterns(gt_codes, pred_codes, norm_of, norm_of, clean_of, clean_of)
    # 2016: raw, punctuated and normalised strings share one numbering; raw human answers decide
    # agreement, punctuated ones are compared where they disagree, and the prediction is normalised
    space = numbering(strings)
    punct_of = factorize(strip_punctuation_many(strings), len(strings), space)
    predicted = np.zeros(len(strings), dtype=bool)
    predicted[pred_codes] = True  # only predictions are normalised: each distinct one once
    norm_of = np.zeros(len(strings), dtype=punct_of.dtype)
    norm_of[predicted] = factorize(
        normalize_many(clean_whitespace_many(_pick(strings, predicted))), int(predicted.sum()), space
    )
    return _match_patterns(gt_codes, pred_codes, punct_of, norm_of, None, norm_of)


def _first_wrong_count(answers) -> int | None:
    if isinstance(answers, AnswerTable):
        return None if answers.codes.shape[1] == N_ANSWERS or len(answers) == 0 else 0
    if set(map(len, answers)) <= {N_ANSWERS}:
        return None
    return next(i for i, row in enumerate(answers) if len(row) != N_ANSWERS)


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
    patterns = _match(answers, predictions, variant)
    # each pattern of matching human answers present is scored once
    present = np.flatnonzero(np.bincount(patterns, minlength=1 << N_ANSWERS))
    table = np.zeros(1 << N_ANSWERS)
    table[present] = [leave_one_out([(int(p) >> j) & 1 for j in range(N_ANSWERS)]) for p in present]
    return table[patterns]


def _group_percent(values: np.ndarray, groups: Sequence[str]) -> dict[str, float]:
    """100 * mean per group, each a Python float sum in question order (as the script sums lists)."""
    if isinstance(groups, Labels):
        codes, names = groups.codes, groups.names
    else:
        index = numbering()
        codes, names = factorize(groups, len(groups), index), list(index)
    if len(names) <= np.iinfo(np.uint16).max:
        codes = codes.astype(np.uint16)  # a stable sort of 16-bit keys is a radix sort
    order = np.argsort(codes, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(names)))])
    ordered = values[order].tolist()
    return {
        str(name): 100 * float(sum(ordered[bounds[k] : bounds[k + 1]])) / int(bounds[k + 1] - bounds[k])
        for k, name in enumerate(names)
    }


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
        raise ReproError(
            f"vqa: question {ids[bad]} has {len(answers[bad])} human answers; the VQA score needs {N_ANSWERS}"
        )
    per_q = scores(answers, predictions, variant)
    as_list = per_q.tolist()
    aggregate: dict = {"overall": 100 * float(sum(as_list)) / len(as_list) if as_list else float("nan")}
    if answer_types is not None and as_list:
        aggregate.update(_group_percent(per_q, answer_types))
    if question_types is not None and as_list:
        aggregate["per_question_type"] = _group_percent(per_q, question_types)
    return MetricResult("vqa", aggregate, LazyPerItem(ids, per_q, 100), len(as_list))
