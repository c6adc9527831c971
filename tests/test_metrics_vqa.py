"""VQA accuracy: every rule of vqaEval.py pinned by hand-computed cases, plus properties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.errors import ReproError
from repro.metrics import vqa

# --- leave-one-out averaging over the 10 answers ---------------------------------------------------


@pytest.mark.parametrize("m, expected", [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0), (10, 1.0)])
def test_leave_one_out_by_number_of_matching_humans(m, expected):
    # m matching humans: m of them see m-1 others agree, 10-m see m; each capped at 3 agreeing
    assert vqa.leave_one_out([True] * m + [False] * (10 - m)) == pytest.approx(expected)


def test_per_question_score_is_the_python_float_expression():
    # 3 matches: seven values of min(1, 3/3) and three of 2/3, summed in answer order
    matches = [False, True, False, True, False, False, True, False, False, False]
    accs = [min(1, float(3 - h) / 3) for h in matches]
    assert vqa.leave_one_out(matches) == float(sum(accs)) / 10


# --- punctuation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a-b", "a b"),  # no space next to it: becomes a space
        ("a - b", "a  b"),  # a space beside it somewhere: deleted
        ("hello, world", "hello world"),
        ("yes!", "yes "),
        ("1,000 a-b", "1000 ab"),  # a digit-comma-digit anywhere: every mark deleted
        ("dog's", "dog's"),  # apostrophe is not in the list
        ("3:00", "3:00"),  # nor is the colon
        ("(a)b", " a b"),
    ],
)
def test_punctuation_rule(text, expected):
    assert vqa.strip_punctuation(text) == expected


def test_space_test_reads_the_input_not_the_rewritten_text():
    # "," has a space after it in the input, so every "," is deleted, including the one in "a,b"
    assert vqa.strip_punctuation("a,b, c") == "ab c"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("5.", "5"),
        ("3.5", "3.5"),
        (".5", ".5"),
        ("a.b", "ab"),
        ("e.g.", "eg"),
        ("1.2.", "1.2"),
    ],
)
def test_period_rule_removes_periods_not_followed_by_a_digit(text, expected):
    assert vqa.strip_punctuation(text) == expected


def test_period_rule_removes_at_most_32_periods():
    # re.UNICODE (32) is passed where re.sub takes `count`
    assert vqa.strip_punctuation("." * 40) == "." * 8


# --- digits, articles, contractions -----------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Two dogs", "2 dogs"),
        ("none", "0"),
        ("ten", "10"),
        ("eleven", "eleven"),
        ("an apple", "apple"),
        ("a", ""),
        ("dont", "don't"),
        ("whats up", "what's up"),
        ("Im", "im"),
        ("Ive", "ive"),
        ("somebody'd", "somebodyd"),
        ("  many   spaces ", "many spaces"),
    ],
)
def test_digits_articles_contractions(text, expected):
    assert vqa.digits_and_articles(text) == expected


def test_contraction_table_is_complete():
    assert len(vqa.CONTRACTIONS) == 120
    assert vqa.CONTRACTIONS["yall'd've"] == "y'all'd've" and vqa.CONTRACTIONS["twas"] == "'twas"


# --- when the rules apply: 2021 head vs 2016 -------------------------------------------------------


def test_2021_all_humans_agree_means_exact_comparison():
    assert vqa.score_one("Yes", ["yes"] * 10) == 0.0
    assert vqa.score_one("yes", ["yes"] * 10) == 1.0
    assert vqa.score_one(" yes\n", ["yes"] * 10) == 1.0  # whitespace is still cleaned


def test_2021_disagreement_normalises_both_sides():
    assert vqa.score_one("Yes.", ["yes"] * 9 + ["no"]) == 1.0
    assert vqa.score_one("two", ["2"] * 3 + ["dog"] * 7) == pytest.approx(0.9)


def test_2016_always_normalises_the_prediction():
    assert vqa.score_one("Yes", ["yes"] * 10, "2016") == 1.0


def test_2016_gives_human_answers_the_punctuation_rule_only():
    # "two" stays "two" on the human side, the prediction becomes "2"
    assert vqa.score_one("two", ["two"] * 3 + ["dog"] * 7, "2016") == 0.0
    assert vqa.score_one("two", ["two"] * 3 + ["dog"] * 7, "2021") == pytest.approx(0.9)
    # and the human side is not whitespace-cleaned in 2016
    assert vqa.score_one("dog", [" dog"] * 5 + ["cat"] * 5, "2016") == 0.0


def test_unknown_variant_is_an_error():
    with pytest.raises(ReproError):
        vqa.score_one("a", ["a"] * 10, "2015")


# --- evaluate: aggregates and checks -------------------------------------------------------------


def test_evaluate_overall_and_per_type():
    answers = [["yes"] * 10, ["2"] * 4 + ["3"] * 6, ["red"] * 2 + ["blue"] * 8]
    preds = ["yes", "two", "red"]
    result = vqa.evaluate(answers, preds, [11, 12, 13], ["yes/no", "number", "other"], ["is", "how many", "what"])
    assert result.per_item == {11: 100.0, 12: 100.0, 13: pytest.approx(60.0)}
    assert result.aggregate["overall"] == pytest.approx((100 + 100 + 60) / 3)
    assert result.aggregate["number"] == 100.0 and result.aggregate["other"] == pytest.approx(60.0)
    assert result.aggregate["per_question_type"]["what"] == pytest.approx(60.0)
    assert result.n == 3


def test_wrong_answer_count_is_an_error_naming_the_question():
    with pytest.raises(ReproError, match="question 7 has 9 human answers"):
        vqa.evaluate([["a"] * 9], ["a"], [7])


def test_non_string_answer_is_an_error():
    with pytest.raises(ReproError, match="not a string"):
        vqa.evaluate([["a"] * 9 + [3]], ["a"], [7])


def test_official_rounding():
    assert vqa.round_like_official(100 * 2 / 3) == 66.67


# --- properties ----------------------------------------------------------------------------------

ALPHABET = st.sampled_from(
    [
        "yes",
        "Yes",
        "no",
        "two",
        "2",
        "the dog",
        "dog",
        "dog.",
        "a-b",
        "a - b",
        "1,000",
        "1000",
        "dont",
        "don't",
        " yes",
        "yes\n",
        "3.5",
        "none",
        "0",
        "(x)",
    ]
)
ROWS = st.lists(st.tuples(st.lists(ALPHABET, min_size=10, max_size=10), ALPHABET), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(ROWS, st.sampled_from(vqa.VARIANTS))
def test_vectorised_scores_equal_the_scalar_path_bit_for_bit(rows, variant):
    answers = [r[0] for r in rows]
    preds = [r[1] for r in rows]
    fast = vqa.scores(answers, preds, variant).tolist()
    assert fast == [vqa.score_one(p, a, variant) for a, p in zip(answers, preds)]


@settings(max_examples=150, deadline=None)
@given(st.lists(ALPHABET, min_size=10, max_size=10), st.integers(4, 10), ALPHABET)
def test_an_answer_given_by_four_or_more_humans_scores_one(others, k, answer):
    humans = [answer] * k + others[k:]
    assert vqa.score_one(answer, humans, "2021") == 1.0


@settings(max_examples=150, deadline=None)
@given(st.lists(ALPHABET, min_size=10, max_size=10), ALPHABET, st.sampled_from(vqa.VARIANTS))
def test_scores_take_only_the_five_possible_values(humans, pred, variant):
    s = vqa.score_one(pred, humans, variant)
    assert any(math.isclose(s, v) for v in (0.0, 0.3, 0.6, 0.9, 1.0))


@settings(max_examples=100, deadline=None)
@given(ROWS)
def test_question_order_does_not_change_per_question_scores(rows):
    answers = [r[0] for r in rows]
    preds = [r[1] for r in rows]
    forward = vqa.scores(answers, preds)
    backward = vqa.scores(answers[::-1], preds[::-1])
    assert np.array_equal(forward, backward[::-1])


# --- the vectorised path: many strings at once, codes, the official-layout table -------------------

TOKENS = st.sampled_from(
    [
        "yes",
        "Yes",
        "two",
        "Two",
        "none",
        "the",
        "a",
        "an",
        "dont",
        "Im",
        "somebody'd",
        "dog",
        "3",
        "5",
        ".",
        ",",
        "-",
        "!",
        "?",
        "(",
        ")",
        "/",
        "1,000",
        "3.5",
        ":",
        "'",
        " ",
        "  ",
        "\n",
        "\t",
        "\x0b",
        "\u3000",
        "\x00",
        "Σ",
        "ΟΔΟΣ",
        "İ",
        "é",
        "ß",
    ]
)
TEXTS = st.lists(TOKENS, max_size=8).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, max_size=30))
def test_rules_over_many_strings_equal_the_rules_one_by_one(texts):
    assert vqa.clean_whitespace_many(texts) == [vqa.clean_whitespace(t) for t in texts]
    assert vqa.strip_punctuation_many(texts) == [vqa.strip_punctuation(t) for t in texts]
    assert vqa.digits_and_articles_many(texts) == [vqa.digits_and_articles(t) for t in texts]
    assert vqa.normalize_many(texts) == [vqa.normalize(t) for t in texts]


@pytest.mark.parametrize(
    "texts",
    [
        ["ΟΔΟΣ", "Σ", "aΣ", "Σa", "ΑΣ Β"],  # the final sigma depends on the neighbours within each text
        ["a\x00b", "the dog"],  # a text holding the separator: each on its own
        ["", " ", "a", "the"],  # empty results keep their place
        [],
    ],
)
def test_rules_over_many_strings_edge_cases(texts):
    assert vqa.digits_and_articles_many(texts) == [vqa.digits_and_articles(t) for t in texts]
    assert vqa.clean_whitespace_many(texts) == [vqa.clean_whitespace(t) for t in texts]
    assert vqa.normalize_many(texts) == [vqa.normalize(t) for t in texts]


def test_one_word_map_is_the_three_rules_in_turn():
    # numbers, then articles, then contractions: one lookup is the same when no word is in two
    # tables and no digit a number word becomes is an article or a contraction
    keys = [set(vqa.NUMBER_WORDS), set(vqa.ARTICLES), set(vqa.CONTRACTIONS)]
    assert all(not (a & b) for i, a in enumerate(keys) for b in keys[i + 1 :])
    assert not set(vqa.NUMBER_WORDS.values()) & (vqa.ARTICLES | set(vqa.CONTRACTIONS))


def test_factorize_numbers_in_order_of_first_appearance_and_extends_the_index():
    index = vqa.numbering()
    assert vqa.factorize(["b", "a", "b", "c"], 4, index).tolist() == [0, 1, 0, 2]
    assert index == {"b": 0, "a": 1, "c": 2}
    assert vqa.factorize(iter(["c", "d", "a", "d"]), 4, index).tolist() == [2, 3, 1, 3]
    assert list(index) == ["b", "a", "c", "d"]
    assert vqa.factorize([], 0, vqa.numbering()).tolist() == []
    known = vqa.numbering(["x", "y"])
    assert vqa.factorize(["y", "z", "x", "z"], 4, known).tolist() == [1, 2, 0, 2] and known["z"] == 2


def _official(rows):
    return [{"answers": [{"answer": a, "answer_id": j + 1} for j, a in enumerate(row)]} for row in rows]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.lists(TEXTS, min_size=10, max_size=10), TEXTS), min_size=1, max_size=20),
    st.sampled_from(vqa.VARIANTS),
)
def test_official_table_and_plain_lists_score_like_the_scalar_path(rows, variant):
    answers = [r[0] for r in rows]
    preds = [r[1] for r in rows]
    table = vqa.AnswerTable.from_items(_official(answers))
    assert [table[i] for i in range(len(table))] == answers
    expected = [vqa.score_one(p, a, variant) for a, p in zip(answers, preds)]
    assert vqa.scores(table, preds, variant).tolist() == expected
    assert vqa.scores(answers, preds, variant).tolist() == expected
    assert [table[i] for i in range(len(table))] == answers  # scoring leaves the table as it was


def test_official_table_needs_one_answer_count():
    assert vqa.AnswerTable.from_items(_official([["a"] * 10, ["a"] * 9])) is None
    assert vqa.AnswerTable.from_items([]) is None


def test_non_string_prediction_is_an_error():
    with pytest.raises(ReproError, match="a prediction is int 3"):
        vqa.evaluate([["a"] * 10], [3])
    with pytest.raises(ReproError, match="a prediction is list"):
        vqa.evaluate([["a"] * 10], [["a"]])
    with pytest.raises(ReproError, match="human answer of question #0 is NoneType"):
        vqa.evaluate(vqa.AnswerTable.from_items(_official([["a"] * 9 + [None]])), ["a"])


def test_per_question_scores_are_built_when_first_read():
    result = vqa.evaluate([["a"] * 10, ["b"] * 2 + ["c"] * 8], ["a", "b"], ["q1", "q2"])
    assert result.per_item._items is None  # the aggregate alone never builds them
    assert result.aggregate["overall"] == pytest.approx(80.0)
    assert result.per_item["q2"] == pytest.approx(60.0) and result.per_item._items is not None
    assert dict(result.per_item) == {"q1": 100.0, "q2": pytest.approx(60.0)} and len(result.per_item) == 2
    assert list(result.per_item.items())[0] == ("q1", 100.0) and "q1" in result.per_item


def test_labels_read_as_the_plain_sequence_and_give_the_same_breakdown():
    items = [{"answer_type": t, "question_type": f"what {t}"} for t in ["other", "yes/no", "other", "number", "yes/no"]]
    labels = vqa.Labels.from_items(items, ["answer_type"])["answer_type"]
    plain = [item["answer_type"] for item in items]
    assert list(labels) == plain and labels[1:3] == plain[1:3] and len(labels) == 5 and labels[-1] == "yes/no"
    both = vqa.Labels.from_items(items, ["question_type", "answer_type"])
    assert list(both["answer_type"]) == plain and list(both["question_type"]) == [f"what {t}" for t in plain]
    assert vqa.Labels.from_items(items, []) == {}
    answers = [["a"] * 10, ["b"] * 10, ["a"] * 3 + ["b"] * 7, ["c"] * 10, ["a"] * 10]
    preds = ["a", "b", "a", "c", "b"]
    assert (
        vqa.evaluate(answers, preds, answer_types=labels, question_types=labels).aggregate
        == vqa.evaluate(answers, preds, answer_types=plain, question_types=plain).aggregate
    )
    with pytest.raises(KeyError):
        vqa.Labels.from_items([{"answer_type": "other"}, {}], ["answer_type"])
    with pytest.raises(TypeError):
        vqa.Labels.from_items([{"answer_type": "other", "question_type": ["what"]}], ["answer_type", "question_type"])


def test_official_file_layout_scores_like_plain_lists():
    from repro.metrics.files import evaluate_data

    answers = [["yes"] * 10, ["2"] * 3 + ["two"] * 7, ["red"] * 2 + ["Red."] * 8, ["dog"] * 10]
    preds = ["yes", "2", "red", "Dog"]
    atypes, qtypes = ["yes/no", "number", "other", "other"], ["is", "how many", "what", "what"]
    items = [
        {"question_id": 10 + i, "answer_type": a, "question_type": q, **row}
        for i, (a, q, row) in enumerate(zip(atypes, qtypes, _official(answers)))
    ]
    results = [{"question_id": 10 + i, "answer": p} for i, p in enumerate(preds)]
    plain = vqa.evaluate(answers, preds, [10, 11, 12, 13], atypes, qtypes)
    got = evaluate_data("vqa", {"annotations": items}, results)
    assert got.aggregate == plain.aggregate and dict(got.per_item) == dict(plain.per_item)
    del items[1]["question_type"]  # the checking reader takes over, and the type is empty
    got = evaluate_data("vqa", {"annotations": items}, results)
    assert got.aggregate["per_question_type"][""] == plain.per_item[11]
    assert got.aggregate["overall"] == plain.aggregate["overall"]
