"""TextVQA (mmf) and ANLS (Robust Reading Competition script and the implementations it differs from)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.errors import ReproError
from repro.metrics import anls, textvqa

# --- TextVQA --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Dog's", "dog 's"),  # "'s" split off after lower-casing
        ("1,000", "1000"),  # commas deleted before the punctuation rule
        ("Hello?", "hello"),
        ("a, b", "b"),  # comma gone first, then "a" is an article
        ("The Two", "2"),
        ("x-y", "x y"),
        ("x - y", "x y"),
        ("stop.", "stop"),
    ],
)
def test_textvqa_normalisation(text, expected):
    assert textvqa.normalize(text) == expected


def test_textvqa_always_normalises_even_when_humans_agree():
    assert textvqa.score_one("Coca Cola", ["coca cola"] * 10) == 1.0


def test_textvqa_leave_one_out():
    assert textvqa.score_one("pepsi", ["pepsi"] * 2 + ["coke"] * 8) == pytest.approx(0.6)
    assert textvqa.score_one("sprite", ["pepsi"] * 10) == 0.0


def test_textvqa_needs_ten_answers():
    with pytest.raises(ReproError, match="question 5 has 3 human answers"):
        textvqa.evaluate([["a"] * 3], ["a"], [5])


def test_textvqa_aggregate_is_percent():
    r = textvqa.evaluate([["a"] * 10, ["b"] * 10], ["a", "c"], ["q1", "q2"])
    assert r.aggregate["accuracy"] == 50.0 and r.per_item == {"q1": 100.0, "q2": 0.0}


# --- ANLS ----------------------------------------------------------------------------------------


def test_levenshtein():
    assert anls.levenshtein("kitten", "sitting") == 3
    assert anls.levenshtein("", "abc") == 3 and anls.levenshtein("abc", "abc") == 0


def test_boundary_of_exactly_one_half():
    # distance 1 over length 2: similarity 0.5 is kept by the RRC script and mmf, dropped by the PyPI package
    assert anls.score_one("ac", ["ab"]) == 0.5
    assert anls.score_one("ac", ["ab"], variant="mmf") == 0.5
    assert anls.score_one("ac", ["ab"], variant="pypi") == 0.0


def test_just_below_one_half_is_zero():
    assert anls.score_one("abcd", ["axyz"]) == 0.0  # distance 3 / 4


def test_whitespace_is_collapsed_by_rrc_not_by_mmf():
    assert anls.score_one("new york", ["New  York"]) == 1.0
    assert anls.score_one("new york", ["New  York"], variant="mmf") == pytest.approx(1 - 1 / 9)


def test_length_divisor_uses_the_raw_strings_in_rrc():
    # distance("ab", "ac") = 1; RRC divides by len("  ab  ") = 6, the PyPI package by len("ab") = 2
    assert anls.score_one("ac", ["  ab  "]) == pytest.approx(1 - 1 / 6)
    assert anls.score_one("ac", ["  ab  "], variant="pypi") == 0.0


def test_two_empty_strings_score_one():
    assert anls.score_one("", [""]) == 1.0
    assert anls.score_one("", [""], variant="pypi") == 1.0


def test_best_answer_wins_and_case_is_ignored():
    assert anls.score_one("PARIS", ["london", "paris"]) == 1.0


def test_anls_aggregate():
    r = anls.evaluate([["ab"], ["xyz"]], ["ac", "xyz"], [1, 2])
    assert r.aggregate["anls"] == pytest.approx(0.75) and r.per_item == {1: 0.5, 2: 1.0}


def test_question_without_answers_is_an_error():
    with pytest.raises(ReproError, match="question 9 has no ground-truth answer"):
        anls.evaluate([[]], ["a"], [9])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12), st.lists(st.text(max_size=12), min_size=1, max_size=4))
def test_anls_is_zero_or_at_least_one_half_and_at_most_one(pred, answers):
    for variant in anls.VARIANTS:
        s = anls.score_one(pred, answers, variant)
        assert s == 0.0 or 0.5 <= s <= 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=12), st.lists(st.text(max_size=12), max_size=3))
def test_an_exact_answer_scores_one(pred, others):
    assert anls.score_one(pred, others + [pred]) == 1.0
