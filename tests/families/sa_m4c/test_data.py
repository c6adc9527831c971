"""The TextVQA / Rosetta OCR readers on files in the official layouts, decoding targets, PHOC, subsets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from repro.errors import ReproError
from repro.families.sa_m4c.data import answer_targets, answer_words, read_ocr, read_questions
from repro.families.sa_m4c.model import BOS, EOS
from repro.families.sa_m4c.phoc import BIGRAMS, PHOC_DIM, phoc
from repro.families.sa_m4c.subsets import is_spatial, majority_in_ocr, subset_columns
from repro.metrics import copy_rate

VOCAB = {w: i for i, w in enumerate(["<pad>", "<s>", "</s>", "<unk>", "red", "stop", "the"])}


def test_official_layouts_are_read(tmp_path):
    questions = {
        "dataset_name": "textvqa",
        "dataset_version": "0.5.1",
        "dataset_type": "val",
        "data": [
            {
                "question": "what is written on the sign?",
                "question_id": 34602,
                "image_id": "003a8ae2ef43b901",
                "image_classes": ["Street sign"],
                "flickr_original_url": "https://farm.example/x.jpg",
                "flickr_300k_url": "https://farm.example/y.jpg",
                "image_width": 1024,
                "image_height": 664,
                "answers": ["stop"] * 10,
                "question_tokens": ["what", "is", "written", "on", "the", "sign"],
                "set_name": "val",
            }
        ],
    }
    ocr = {
        "data": [
            {
                "image_id": "003a8ae2ef43b901",
                "ocr_tokens": ["STOP"],
                "ocr_info": [
                    {
                        "word": "STOP",
                        "bounding_box": {
                            "top_left_x": 0.25,
                            "top_left_y": 0.5,
                            "width": 0.5,
                            "height": 0.25,
                            "rotation": 0.0,
                            "roll": 0.0,
                            "pitch": 0.0,
                            "yaw": 0.0,
                        },
                    }
                ],
            }
        ]
    }
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "o.json").write_text(json.dumps(ocr))
    (q,) = read_questions(tmp_path / "q.json")
    assert q["question_id"] == 34602 and len(q["answers"]) == 10
    tokens, boxes = read_ocr(tmp_path / "o.json")["003a8ae2ef43b901"]
    assert tokens == ["STOP"] and np.allclose(boxes, [[0.25, 0.5, 0.75, 0.75]])


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[1, 2]", "no 'data' list"),
        ('{"data": [{"question": "q", "image_id": "a"}]}', "no int 'question_id'"),
        ('{"data": [{"question": "q", "question_id": 1, "image_id": "a", "answers": "x"}]}', "not a list of strings"),
        ("{not json", "unreadable"),
    ],
)
def test_bad_question_files_are_one_clear_error(tmp_path, text, fragment):
    path = tmp_path / "q.json"
    path.write_text(text)
    with pytest.raises(ReproError, match=fragment):
        read_questions(path)
    with pytest.raises(ReproError, match="missing"):
        read_questions(tmp_path / "absent.json")


def test_bad_ocr_record_names_the_record(tmp_path):
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"data": [{"image_id": "a", "ocr_info": [{"word": "x"}]}]}))
    with pytest.raises(ReproError, match=r"data\[0\] is not an OCR record"):
        read_ocr(path)


def test_answer_targets_mark_vocabulary_and_every_equal_ocr_token():
    answers = ["red stop"] * 6 + ["blue"] * 4
    targets, prev, mask = answer_targets(answers, ["Stop", "x", "stop"], VOCAB, max_ocr=4, steps=4)
    v = len(VOCAB)
    assert targets.shape == (4, v + 4)
    assert targets[0].nonzero().flatten().tolist() == [VOCAB["red"]]
    assert targets[1].nonzero().flatten().tolist() == [VOCAB["stop"], v + 0, v + 2]
    assert targets[2].nonzero().flatten().tolist() == [EOS]
    assert mask.tolist() == [1, 1, 1, 0] and prev.tolist() == [BOS, VOCAB["red"], VOCAB["stop"], 0]
    # an OCR-only word is fed back as its first OCR token; an unmatchable answer yields to a matchable one
    targets, prev, _ = answer_targets(["kivo"] * 3 + ["zzz"] * 7, ["a", "kivo"], VOCAB, max_ocr=4, steps=3)
    assert targets[0].nonzero().flatten().tolist() == [v + 1] and prev[1] == v + 1
    assert answer_words("Red, STOP?") == ["red", "stop"]


def test_phoc_is_604_bins_of_the_pyramid():
    p = phoc("Stop")
    assert p.shape == (PHOC_DIM,) == (604,) and set(np.unique(p)) <= {0.0, 1.0}
    # 4 letters at levels 2-5, each in the regions that hold at least half of it
    assert p[:504].sum() == 16
    # bigrams at level 2: "st" spans [0, 0.5] (region 0), "to" [0.25, 0.75] (half in each region)
    st, to = BIGRAMS.index("st"), BIGRAMS.index("to")
    assert p[504:].nonzero()[0].tolist() == sorted([st, to, 50 + to])
    assert not np.array_equal(phoc("stop"), phoc("pots")) and phoc("?!").sum() == 0


def test_copy_rate_and_the_section_6_subsets():
    result = copy_rate.evaluate([True, False, True], [1, 2, 3])
    assert result.aggregate == {"count": 2, "answered": 3, "rate": pytest.approx(200 / 3)}
    with pytest.raises(ReproError):
        copy_rate.evaluate([1, 0])
    assert is_spatial("What is written above the door?") and not is_spatial("what is on the sign?")
    assert majority_in_ocr(["Stop"] * 6 + ["go"] * 4, ["STOP"]) and not majority_in_ocr(["go"] * 10, ["stop"])


def test_subset_columns_count_copies_and_gain(tmp_path):
    from repro.specs import resolve

    spec = resolve("sa-m4c-sec6-spatial")

    class Val:
        questions = [
            {"question_id": 1, "question": "what is above the car?", "answers": ["kivo"] * 10},
            {"question_id": 2, "question": "what is left of the sign?", "answers": ["red"] * 10},
            {"question_id": 3, "question": "what brand is this?", "answers": ["kivo"] * 10},
        ]

        def ocr_tokens(self, k):
            return ["kivo"]

    scores = {1: {"copied": True, "score": 100.0}, 2: {"copied": False, "score": 0.0}, 3: {"copied": True, "score": 0}}
    base = {1: {"score": 0.0}, 2: {"score": 0.0}, 3: {"score": 100.0}}
    cols = subset_columns(spec, Val(), scores, lambda: base)
    assert cols["D_spa copied"] == 1 and cols["D_spa copied out of"] == 2 and cols["D_spa copied Accu."] == 100
    assert cols["D_spa+ocr copied out of"] == 1 and cols["D_spa gain"] == 50.0 and cols["D_spa+ocr gain"] == 100.0
    assert "D_spa gain" not in subset_columns(spec, Val(), scores, None)
