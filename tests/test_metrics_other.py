"""MSE (TGIF-QA Count), exact-match accuracy, retrieval recall (ALBEF), grounding (ALBEF) and the copy rate
(SA-M4C Sec. 6)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.errors import ReproError
from repro.metrics import accuracy, copy_rate, get, grounding, mse, retrieval


def test_registry():
    assert get("recall") is retrieval
    assert get("copy-rate") is copy_rate
    with pytest.raises(ReproError, match="unknown metric"):
        get("bleu")


# --- MSE -----------------------------------------------------------------------------------------


def test_count_rounding_ties_go_to_even_and_clip_to_one_ten():
    assert mse.to_count([2.5, 3.5, 0.5, 1.5, 10.5, 11, -3, 4.49]).tolist() == [2, 4, 1, 2, 10, 10, 1, 4]


def test_ground_truth_zero_psac_vs_tgif():
    gold, pred = [0, 3], [0.2, 3.0]  # prediction 0.2 becomes 1
    assert mse.evaluate(gold, pred, "psac").aggregate["mse"] == 0.0  # target max(0, 1) = 1
    assert mse.evaluate(gold, pred, "tgif").aggregate["mse"] == 0.5  # (1 - 0)^2 / 2


def test_mse_per_item_and_value():
    r = mse.evaluate([4, 2], [6.4, 2.0], question_ids=["a", "b"])
    assert r.per_item == {"a": 4.0, "b": 0.0} and r.aggregate["mse"] == 2.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.floats(-50, 50)), min_size=1, max_size=30))
def test_mse_is_non_negative_and_psac_never_above_tgif(pairs):
    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    psac = mse.evaluate(gold, pred, "psac").aggregate["mse"]
    assert 0 <= psac <= mse.evaluate(gold, pred, "tgif").aggregate["mse"]  # only a gold 0 differs


# --- accuracy ------------------------------------------------------------------------------------


def test_exact_match_rules():
    r = accuracy.evaluate([3, "dog", "Dog", "3"], [3.0, "dog", "dog", 3], types=["n", "o", "o", "n"])
    assert r.per_item == {0: 100.0, 1: 100.0, 2: 0.0, 3: 0.0}
    assert r.aggregate["accuracy"] == 50.0 and r.aggregate["per_type"] == {"n": 50.0, "o": 50.0}


# --- retrieval -----------------------------------------------------------------------------------


def test_recall_hand_computed():
    # 2 images, 4 texts (2 each)
    img2txt = [[0, 1], [2, 3]]
    txt2img = [0, 0, 1, 1]
    i2t = np.array(
        [
            [0.1, 0.9, 0.5, 0.2],  # image 0: text 1 first -> rank 0
            [0.8, 0.7, 0.1, 0.0],
        ]
    )  # image 1: its texts at positions 2, 3 -> rank 2
    t2i = np.array([[0.9, 0.1], [0.2, 0.3], [0.1, 0.5], [0.6, 0.4]])  # ranks 0, 1, 0, 1
    r = retrieval.evaluate(i2t, t2i, img2txt, txt2img)
    assert r.aggregate["tr@1"] == 50.0 and r.aggregate["tr@5"] == 100.0
    assert r.aggregate["ir@1"] == 50.0 and r.aggregate["ir@5"] == 100.0
    assert r.aggregate["r_mean"] == pytest.approx((250 / 3 + 250 / 3) / 2)
    assert r.per_item["image:1"] == 2 and r.per_item["text:3"] == 1


def test_ties_follow_reversed_argsort():
    # equal scores: argsort gives 0, 1, 2 and reversing puts the last index first
    r = retrieval.evaluate(np.zeros((1, 3)), np.zeros((3, 1)), [[0, 1, 2]], [0, 0, 0])
    assert r.per_item["image:0"] == 0.0  # text 2 comes first, and it belongs to image 0
    r = retrieval.evaluate(np.zeros((2, 1)), np.zeros((1, 2)), [[0], []], [0])
    assert r.per_item["text:0"] == 1.0  # image 0 is second after reversing


def test_shape_mismatch_is_an_error():
    with pytest.raises(ReproError, match="do not fit"):
        retrieval.evaluate(np.zeros((2, 3)), np.zeros((3, 2)), [[0]], [0, 0, 0])


def test_generic_rankings():
    r = retrieval.evaluate_rankings([["a"], ["b", "c"]], [["x", "a"], ["z"] * 10 + ["c"]], ["q1", "q2"])
    assert r.aggregate == {"r@1": 0.0, "r@5": 50.0, "r@10": 50.0}


# --- grounding -----------------------------------------------------------------------------------


def test_iou_pixel_conventions():
    assert grounding.iou([0, 0, 10, 10], [0, 0, 10, 10]) == 1.0
    assert grounding.iou([0, 0, 10, 10], [9, 9, 10, 10]) == 0.0  # one shared pixel: strict < says none
    assert grounding.iou([0, 0, 10, 10], [0, 0, 10, 5]) == 0.5  # exactly 0.5


def test_hit_rate_per_split():
    gold = [[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10]]
    pred = [[0, 0, 10, 5], [20, 20, 5, 5], None]
    r = grounding.evaluate(gold, pred, ["testA", "testA", "testB"], ["r1", "r2", "r3"])
    assert r.aggregate["testA"] == 50.0 and r.aggregate["testB"] == 0.0
    assert r.per_item == {"r1": 100.0, "r2": 0.0, "r3": 0.0}


def test_box_selection_and_stale_box():
    heat = np.zeros((20, 20))
    heat[10:20, 10:20] = 1.0
    dets = [[0, 0, 5, 5], [10, 10, 10, 10]]
    chosen = grounding.select_boxes([heat, np.zeros((20, 20))], [dets, dets], alpha=0.5)
    assert chosen == [[10, 10, 10, 10], [10, 10, 10, 10]]  # second map scores nothing: previous box kept
    assert grounding.select_boxes([np.zeros((5, 5))], [[[0, 0, 2, 2]]]) == [None]


# --- copy rate -------------------------------------------------------------------------------------


def test_copy_rate_hand_computed_from_answers_and_ocr_tokens(tmp_path):
    from repro.metrics.files import evaluate_files

    ocr = {1: ["STOP", "kivo"], 2: ["kivo"], 3: ["main", "street"], 4: [], 5: ["exit"]}
    answers = {1: "stop", 2: "red", 3: "main street", 4: "yes", 5: ""}
    # copied: 1 (case-insensitive), 3 (every word an OCR token); not: 2, 4 (no tokens), 5 (empty) -> 2 of 5
    direct = copy_rate.evaluate_answers(list(answers.values()), list(ocr.values()), list(answers))
    assert direct.aggregate == {"count": 2, "answered": 5, "rate": 40.0}
    assert direct.per_item == {1: 100.0, 2: 0.0, 3: 100.0, 4: 0.0, 5: 0.0}
    gold = tmp_path / "ocr.json"
    gold.write_text(json.dumps([{"question_id": q, "answers": t} for q, t in ocr.items()]))
    preds = tmp_path / "answers.json"
    preds.write_text(json.dumps([{"question_id": q, "answer": a} for q, a in answers.items()]))
    assert evaluate_files("copy-rate", gold, preds).aggregate == direct.aggregate
    preds.write_text(json.dumps([{"question_id": q, "answer": 7} for q in answers]))
    with pytest.raises(ReproError, match="answers.json.*not a string"):
        evaluate_files("copy-rate", gold, preds)
