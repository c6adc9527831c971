"""Hostile input to `repro eval` and the metric readers: wrong numbers, overwritten inputs and
tracebacks found by a tester, one test each; then property tests: whatever the input, a valid
score or a ReproError, and output that is strict JSON."""

import json
import math
import os
import zipfile
from io import StringIO

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from repro.cli import app
from repro.cli import evaluate as report
from repro.errors import ReproError
from repro.metrics import REGISTRY, io
from repro.metrics.base import MetricResult
from repro.metrics.files import evaluate_data, evaluate_files

runner = CliRunner()
pytestmark = pytest.mark.filterwarnings("error")  # no input may make a scorer warn either (overflow, ...)


def write(path, data):
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def run(*args):
    return runner.invoke(app, ["eval", *map(str, args)])


def one_error_line(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


def strict_json(text):
    """json.loads that refuses NaN and Infinity, as a strict JSON reader does."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def acc(tmp_path):
    """Accuracy annotations for questions 1 and 2."""
    return write(tmp_path / "gold.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "y"}])


# --- silently wrong numbers ------------------------------------------------------------------------


def test_int_and_string_id_of_one_question_in_predictions_is_a_duplicate(tmp_path):
    gold = write(tmp_path / "gold.json", [{"question_id": 1, "answer": "x"}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": "1", "answer": "y"}])
    one_error_line(run("-m", "accuracy", "-a", gold, "-p", preds), "p.json", "duplicate", "1")


def test_int_and_string_id_of_one_question_in_annotations_is_a_duplicate(tmp_path):
    gold = write(tmp_path / "gold.json", [{"question_id": 1, "answer": "x"}, {"question_id": "1", "answer": "y"}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", gold, "-p", preds), "gold.json", "duplicate", "1")
    vqa = write(
        tmp_path / "vqa.json",
        {"annotations": [{"question_id": q, "answers": [{"answer": "x"}] * 10} for q in (7, "7")]},
    )
    with pytest.raises(ReproError, match="vqa.json.*duplicate.*7"):
        io.load_annotations("vqa", vqa)


@pytest.mark.parametrize("bad", ["NaN", "null", "Infinity"])
def test_mse_prediction_that_is_not_a_finite_number_is_an_error(tmp_path, bad):
    gold = write(tmp_path / "c.csv", "gif_name\tquestion\tanswer\tvid_id\ng\tq\t3\tC1\ng\tq\t2\tC2\n")
    preds = write(
        tmp_path / "p.json", f'[{{"question_id": "C1", "answer": {bad}}}, {{"question_id": "C2", "answer": 2}}]'
    )
    one_error_line(run("-m", "mse", "-a", gold, "-p", preds, "--json"), "p.json", "C1", "finite number")


def test_grounding_box_with_nan_is_not_a_hit(tmp_path):
    gold = write(tmp_path / "gold.json", [{"question_id": "r1", "bbox": [0, 0, 10, 10]}])
    preds = write(tmp_path / "p.json", '[{"question_id": "r1", "answer": [NaN, 0, 10, 10]}]')
    one_error_line(run("-m", "grounding", "-a", gold, "-p", preds), "p.json", "r1", "finite")


@pytest.mark.parametrize(
    "gold_box, pred_box",
    [
        ([0, 0, 0, 0], [0, 0, 0, 0]),  # ZeroDivisionError before
        ([0, 0, 10, 10], [5, 5, -3, 4]),  # negative width
        ([0, 0, 10, 10], [5, 5, 10, 0]),  # no height
        (None, [0, 0, 10, 10]),
    ],
)  # TypeError before
def test_grounding_degenerate_or_null_boxes_are_errors(tmp_path, gold_box, pred_box):
    gold = write(tmp_path / "gold.json", [{"question_id": "r1", "bbox": gold_box}])
    preds = write(tmp_path / "p.json", [{"question_id": "r1", "answer": pred_box}])
    one_error_line(run("-m", "grounding", "-a", gold, "-p", preds), "r1")


def test_grounding_null_prediction_is_still_a_miss(tmp_path):
    gold = write(tmp_path / "gold.json", [{"question_id": "r1", "bbox": [0, 0, 10, 10]}])
    preds = write(tmp_path / "p.json", [{"question_id": "r1", "answer": None}])
    assert strict_json(run("-m", "grounding", "-a", gold, "-p", preds, "--json").output)["overall"] == 0.0


def test_json_and_per_item_outputs_are_strict_json(tmp_path):
    # a query whose relevant id is never returned has rank infinity: it used to be written as Infinity
    gold = write(
        tmp_path / "gold.json", [{"question_id": "q1", "answer": ["a"]}, {"question_id": "q2", "answer": ["b"]}]
    )
    preds = write(tmp_path / "p.json", [{"question_id": "q1", "answer": ["a"]}, {"question_id": "q2", "answer": ["c"]}])
    items = tmp_path / "items.json"
    result = run("-m", "recall", "-a", gold, "-p", preds, "--json", "--per-item", items)
    assert result.exit_code == 0, result.output
    assert strict_json(result.output)["r@1"] == 50.0
    assert strict_json(items.read_text()) == {"q1": 0.0, "q2": None}


def test_to_json_has_null_and_a_count_instead_of_nan():
    result = MetricResult("mse", {"mse": float("nan"), "per_type": {"a": float("inf")}}, {1: float("nan"), 2: 1.0}, 2)
    out = report.to_json(result)
    assert out == {"metric": "mse", "mse": None, "per_type": {"a": None}, "n": 2, "null_items": 1}
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("threshold", ["1.5", "-0.5", "nan", "2"])
def test_wups_threshold_outside_zero_one_is_an_error(tmp_path, threshold):
    gold = write(tmp_path / "gold.json", [{"question_id": 1, "answer": "cat"}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "cat"}])
    one_error_line(run("-m", "wups", "--threshold", threshold, "-a", gold, "-p", preds), "threshold")


def test_wups_threshold_minus_one_is_exact_match(tmp_path):
    gold = write(tmp_path / "gold.json", [{"question_id": 1, "answer": "cat"}, {"question_id": 2, "answer": "dog"}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "cat"}, {"question_id": 2, "answer": "cow"}])
    assert (
        strict_json(run("-m", "wups", "--threshold", "-1", "-a", gold, "-p", preds, "--json").output)["wups@-1.0"]
        == 50.0
    )


# --- --per-item must not destroy what it scores ----------------------------------------------------


@pytest.mark.parametrize("which", ["predictions", "annotations"])
def test_per_item_refuses_to_overwrite_an_input(tmp_path, acc, which):
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    target = preds if which == "predictions" else acc
    before = target.read_bytes()
    other = tmp_path / "sub" / ".." / target.name  # the same file, named another way
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds, "--per-item", other), target.name, which)
    assert target.read_bytes() == before


def test_per_item_refuses_a_link_to_an_input(tmp_path, acc):
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    link = tmp_path / "link.json"
    link.symlink_to(preds)
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds, "--per-item", link), "predictions")
    hard = tmp_path / "hard.json"
    os.link(preds, hard)
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds, "--per-item", hard), "predictions")
    assert json.loads(preds.read_text())[0] == {"question_id": 1, "answer": "x"}


def test_per_item_refuses_a_cocoqa_answers_file_inside_the_annotation_folder(tmp_path):
    split = tmp_path / "test"
    split.mkdir()
    write(split / "answers.txt", "dog\nred\n")
    preds = write(tmp_path / "p.txt", "dog\nred\n")
    one_error_line(run("-m", "accuracy", "-a", split, "-p", preds, "--per-item", split / "answers.txt"), "answers.txt")
    assert (split / "answers.txt").read_text() == "dog\nred\n"


def test_per_item_refuses_a_directory(tmp_path, acc):
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds, "--per-item", tmp_path), "directory")


def test_per_item_name_too_long_for_the_temporary_file(tmp_path, acc):
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    name = "x" * (os.pathconf(tmp_path, "PC_NAME_MAX") - 5)  # fits, but not with the temporary suffix
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds, "--per-item", tmp_path / name), "too long")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_per_item_under_a_file_is_an_error(tmp_path, acc):
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds, "--per-item", preds / "items.json"), "items.json")


# --- tracebacks that are one-line errors -----------------------------------------------------------


@pytest.mark.parametrize("qid", [[1], {"a": 1}, [[1, [2]]], None, True, 1.5])
def test_id_that_is_not_a_string_or_integer(tmp_path, acc, qid):
    preds = write(tmp_path / "p.json", [{"question_id": qid, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds), "p.json", "string or an integer")
    gold = write(tmp_path / "g.json", {"annotations": [{"question_id": qid, "answers": [{"answer": "x"}] * 10}]})
    one_error_line(run("-m", "vqa", "-a", gold, "-p", preds), "g.json", "string or an integer")


def test_deeply_nested_json(tmp_path, acc):
    preds = write(tmp_path / "p.json", "[" * 100_000 + "]" * 100_000)
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds), "p.json", "nested")


def test_deeply_nested_answer_in_an_error_message(tmp_path):
    deep = "[" * 900 + "]" * 900  # its whole repr used to be the message, when the stack allowed it
    gold = write(tmp_path / "g.json", [{"question_id": 1, "answers": ["x"] * 10}])
    preds = write(tmp_path / "p.json", f'[{{"question_id": 1, "answer": {deep}}}]')
    result = run("-m", "vqa", "-a", gold, "-p", preds)
    one_error_line(result, "not a string")
    assert len(result.output.strip()) < 200


@pytest.mark.parametrize("name", ["p.txt", "p.json"])
def test_invalid_utf8_predictions(tmp_path, name):
    gold = write(tmp_path / "answers.txt", "dog\n")
    preds = write(tmp_path / name, b'[{"question_id": 0, "answer": "\xff\xfe"}]')
    one_error_line(run("-m", "accuracy", "-a", gold, "-p", preds), name, "UTF-8")


@pytest.mark.parametrize("name", ["answers.txt", "c.tsv", "c.json"])
def test_invalid_utf8_annotations(tmp_path, name):
    gold = write(tmp_path / name, b"gif_name\tanswer\tvid_id\ng\t\xff\tC1\n")
    preds = write(tmp_path / "p.json", [{"question_id": "C1", "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", gold, "-p", preds), name, "UTF-8")


def test_oversized_csv_field(tmp_path):
    gold = write(tmp_path / "c.csv", "gif_name\tanswer\tvid_id\ng\t" + "x" * 200_000 + "\tC1\n")
    preds = write(tmp_path / "p.json", [{"question_id": "C1", "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", gold, "-p", preds), "c.csv", "field")


@pytest.mark.parametrize("content", ["npy", "garbage", "empty", "object", "truncated"])
def test_bad_npz(tmp_path, content):
    gold = write(tmp_path / "test.json", [{"image": "a.jpg", "caption": ["x"]}])
    path = tmp_path / "scores.npz"
    if content == "npy":
        with open(path, "wb") as handle:
            np.save(handle, np.zeros((1, 1)))
    elif content == "garbage":
        write(path, b"not a zip at all")
    elif content == "empty":
        write(path, b"")
    elif content == "object":
        np.savez(path, i2t=np.array([{"a": 1}], dtype=object), t2i=np.zeros((1, 1)))
    else:
        np.savez(path, i2t=np.zeros((1, 1)), t2i=np.zeros((1, 1)))
        write(path, path.read_bytes()[:60])
    one_error_line(run("-m", "recall", "-a", gold, "-p", path), "scores.npz")


def test_nan_in_score_matrices(tmp_path):
    gold = write(tmp_path / "test.json", [{"image": "a.jpg", "caption": ["x"]}, {"image": "b.jpg", "caption": ["y"]}])
    np.savez(tmp_path / "s.npz", i2t=np.array([[np.nan, 0.0], [0.0, 1.0]]), t2i=np.eye(2))
    one_error_line(run("-m", "recall", "-a", gold, "-p", tmp_path / "s.npz"), "s.npz", "NaN")


@pytest.mark.parametrize(
    "name, metric", [("g.json", "accuracy"), ("answers.txt", "accuracy"), ("g.csv", "mse"), ("g2.json", "vqa")]
)
def test_empty_annotation_files(tmp_path, name, metric):
    gold = write(tmp_path / name, "[]" if name == "g2.json" else "")
    preds = write(tmp_path / "p.json", [])
    one_error_line(run("-m", metric, "-a", gold, "-p", preds, "--json"), name)


@pytest.mark.parametrize("name", ["p.json", "p.txt", "p.npz"])
def test_empty_prediction_files(tmp_path, acc, name):
    preds = write(tmp_path / name, "")
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds), name)


@pytest.mark.parametrize(
    "data",
    [
        '"annotations"',
        "42",
        "null",
        '{"annotations": {"a": 1}}',
        '{"data": "x"}',
        '[{"image": "a.jpg", "caption": ["x"]}, 5]',
        '[{"image": "a", "caption": [1]}]',
        '[{"image": "a", "caption": []}]',
        "[1, 2]",
        '{"questions": []}',
    ],
)
def test_top_level_json_of_the_wrong_type(tmp_path, data):
    gold = write(tmp_path / "g.json", data)
    preds = write(tmp_path / "p.json", [{"question_id": 0, "answer": "x"}])
    one_error_line(run("-m", "recall", "-a", gold, "-p", preds), "g.json")


@pytest.mark.parametrize(
    "data",
    [
        '"x"',
        "42",
        '{"i2t": [[1]]}',
        '{"i2t": [[1]], "t2i": [[1, [2]]]}',
        '{"i2t": [[1e999999]], "t2i": [[1]]}',
        '{"i2t": [[%s]], "t2i": [[1]]}' % ("9" * 400),
    ],
)
def test_score_matrix_json_of_the_wrong_shape(tmp_path, data):
    gold = write(tmp_path / "test.json", [{"image": "a.jpg", "caption": ["x"]}])
    preds = write(tmp_path / "p.json", data)
    one_error_line(run("-m", "recall", "-a", gold, "-p", preds), "p.json")


def test_vqa_single_answer_string_is_not_ten_answers(tmp_path):
    # "abcdefghij" has ten characters: it was scored as ten one-letter human answers
    gold = write(tmp_path / "g.json", [{"question_id": 1, "answer": "abcdefghij"}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "a"}])
    one_error_line(run("-m", "vqa", "-a", gold, "-p", preds), "g.json", "1")


def test_label_that_is_not_a_string(tmp_path):
    gold = write(tmp_path / "g.json", [{"question_id": 1, "answers": ["x"] * 10, "answer_type": {"a": 1}}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}])
    one_error_line(run("-m", "vqa", "-a", gold, "-p", preds), "g.json", "answer_type")


def test_label_with_rich_markup_in_the_table(tmp_path):
    gold = write(
        tmp_path / "g.json",
        [{"question_id": 1, "answer": "x", "type": "[/x]"}, {"question_id": 2, "answer": "y", "type": "[bold]b\nc"}],
    )
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "x"}, {"question_id": 2, "answer": "x"}])
    result = run("-m", "accuracy", "-a", gold, "-p", preds)
    assert result.exit_code == 0, result.output
    assert "per_type / [/x]" in result.output and "per_type / [bold]b\\nc" in result.output


def test_newline_in_an_id_keeps_the_error_on_one_line(tmp_path, acc):
    preds = write(tmp_path / "p.json", [{"question_id": "a\nb\u2028c\ud800", "answer": "x"}])
    one_error_line(run("-m", "accuracy", "-a", acc, "-p", preds), "unknown question", "a\\nb")


# --- properties: a score or a ReproError, and strict JSON out --------------------------------------

ids = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["1", "2", "a", "", "\u00e9", "\ud800"]),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.just("k"), st.integers(0, 1)),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.sampled_from(["yes", "no", "2", "two", "dog", "cat", "a,b"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=12,
)
answers = st.one_of(
    json_values,
    st.lists(st.sampled_from(["yes", "no", "2"]), min_size=10, max_size=10),
    st.lists(st.fixed_dictionaries({"answer": st.sampled_from(["yes", "no", "2"])}), min_size=10, max_size=10),
    st.lists(st.one_of(st.floats(-5, 20), st.integers(-3, 20)), min_size=4, max_size=4),
)
labels = st.one_of(st.sampled_from(["yes/no", "number", "val", "testA"]), json_values)


@st.composite
def gold_items(draw):
    n = draw(st.integers(0, 4))
    out = []
    for _ in range(n):
        item = {draw(st.sampled_from(["question_id", "questionId", "id"])): draw(ids)}
        item[draw(st.sampled_from(["answers", "answer", "bbox"]))] = draw(answers)
        for name in draw(st.lists(st.sampled_from(["answer_type", "question_type", "type", "split"]), max_size=2)):
            item[name] = draw(labels)
        out.append(item)
    shape = draw(st.sampled_from(["list", "annotations", "data", "albef", "junk"]))
    if shape == "annotations":
        return {"annotations": out}
    if shape == "data":
        return {"data": out}
    if shape == "albef":
        return [
            {"image": "i", "caption": draw(st.one_of(st.lists(st.text(max_size=2), max_size=3), json_values))}
            for _ in range(n)
        ]
    if shape == "junk":
        return draw(json_values)
    return out


@st.composite
def prediction_items(draw):
    items = draw(st.lists(st.fixed_dictionaries({"question_id": ids, "answer": answers}), max_size=4))
    return draw(st.sampled_from([items, {"data": items}, draw(json_values)]))


plain_ids = st.one_of(st.integers(0, 5), st.sampled_from(["1", "2", "a", "b", "\u00e9", "x\ny", "\ud800"]))
box_values = st.one_of(st.floats(-20, 20), st.integers(-5, 20), st.floats(allow_nan=True), st.none())
words = st.sampled_from(["yes", "no", "2", "two", "a b", "Yes.", "cat", "dog", "car", "a,b", "", "\u00e9t\u00e9"])
boxes_xywh = st.tuples(st.floats(-5, 20), st.floats(-5, 20), st.floats(0.5, 20), st.floats(0.5, 20)).map(list)
ranked = st.lists(st.sampled_from(["a", "b", "c", 1, 2]), max_size=4)
# what each metric expects, gold value and prediction: mostly these, so the scorers are reached
USUAL = {
    "vqa": (
        st.fixed_dictionaries(
            {
                "answers": st.one_of(
                    st.lists(words, min_size=10, max_size=10),
                    st.lists(st.fixed_dictionaries({"answer": words}), min_size=10, max_size=10),
                )
            }
        ),
        words,
    ),
    "textvqa": (st.fixed_dictionaries({"answers": st.lists(words, min_size=10, max_size=10)}), words),
    "anls": (st.fixed_dictionaries({"answers": st.lists(words, min_size=1, max_size=3)}), words),
    "wups": (st.fixed_dictionaries({"answer": words}), words),
    "copy-rate": (st.fixed_dictionaries({"answers": st.lists(words, max_size=4)}), words),
    "mse": (st.fixed_dictionaries({"answer": st.integers(0, 12)}), st.floats(-3, 14)),
    "accuracy": (
        st.fixed_dictionaries({"answer": st.one_of(words, st.integers(0, 4))}),
        st.one_of(words, st.integers(0, 4), st.floats(0, 4)),
    ),
    "recall": (st.fixed_dictionaries({"answer": ranked}), ranked),
    "grounding": (st.fixed_dictionaries({"bbox": boxes_xywh}), st.one_of(st.none(), boxes_xywh)),
    "gqa": (
        st.fixed_dictionaries(
            {"answer": words, "types": st.fixed_dictionaries({"structural": st.sampled_from(["query", "verify"])})},
            optional={"isBalanced": st.booleans()},
        ),
        words,
    ),
}
gold_values = st.one_of(
    st.fixed_dictionaries({"answers": st.one_of(st.lists(st.text(max_size=3), max_size=3), answers)}),
    st.fixed_dictionaries(
        {
            "answer": st.one_of(
                scalars,
                st.lists(st.sampled_from(["a", "b", 1]), max_size=3),
                st.lists(st.floats(-5, 20), min_size=4, max_size=4),
                answers,
            )
        }
    ),
    st.fixed_dictionaries({"bbox": st.one_of(st.none(), st.lists(box_values, min_size=4, max_size=4))}),
)
predicted = st.one_of(
    scalars,
    st.lists(st.sampled_from(["a", "b", 1, 2]), max_size=4),
    st.lists(box_values, min_size=4, max_size=4),
    json_values,
)


@st.composite
def aligned(draw, metric):
    """Annotations and predictions for `metric` that mostly share their ids and mostly hold what the
    metric expects, each part hostile one time in eight, so the scorers are reached."""

    def rarely(hostile, usual):
        return draw(hostile if draw(st.integers(0, 7)) == 0 else usual)

    usual_gold, usual_pred = USUAL[metric]
    n = draw(st.integers(1, 4))
    qids = [rarely(ids, st.just(q)) for q in draw(st.lists(plain_ids, min_size=n, max_size=n, unique_by=str))]
    gold = []
    for qid in qids:
        item = {"question_id": qid, **rarely(gold_values, usual_gold)}
        if draw(st.booleans()):
            item[draw(st.sampled_from(["answer_type", "question_type", "type", "split"]))] = rarely(
                json_values, st.sampled_from(["yes/no", "number", "val", "testA", "\u00e9"])
            )
        gold.append(item)
    preds = [{"question_id": q, "answer": rarely(predicted, usual_pred)} for q in qids]
    change = rarely(st.sampled_from(["as text", "drop", "duplicate"]), st.just("none"))
    if change == "as text":
        preds[0]["question_id"] = str(preds[0]["question_id"])
    elif change == "drop":
        preds.pop()
    elif change == "duplicate":
        preds.append(dict(preds[0], answer=draw(predicted)))
    layout = draw(st.sampled_from(["list", "list", "annotations", "data"]))
    return (gold if layout == "list" else {layout: gold}), preds


metric_and_data = st.sampled_from(sorted(REGISTRY)).flatmap(lambda m: st.tuples(st.just(m), aligned(m)))


def check_output(result):
    """What the CLI does with a result must be strict JSON, whatever the scores."""
    assert isinstance(result, MetricResult)
    json.dumps(report.to_json(result), allow_nan=False)
    json.dumps(report.to_json(result, 2), allow_nan=False)
    Console(file=StringIO(), width=100).print(report.render_table(result, 2))


def score_or_repro_error(call):
    try:
        result = call()
    except ReproError as exc:
        assert str(exc)
        return None
    check_output(result)
    return result


HYPO = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@HYPO
@given(
    metric=st.sampled_from(sorted(REGISTRY)),
    gold=gold_items(),
    preds=prediction_items(),
    threshold=st.one_of(st.sampled_from([0.9, 0.0, -1.0]), st.floats(allow_nan=True)),
    variant=st.sampled_from([None, "2016", "mmf", "pypi", "malinowski", "tgif", "bogus"]),
)
def test_any_parsed_json_gives_a_score_or_a_repro_error(metric, gold, preds, threshold, variant):
    score_or_repro_error(lambda: evaluate_data(metric, gold, preds, threshold, variant))


@HYPO
@given(
    metric_data=metric_and_data,
    threshold=st.sampled_from([0.9, 0.0, -1.0, 1.5]),
    variant=st.sampled_from([None, None, "2016", "mmf", "pypi", "malinowski", "tgif"]),
)
def test_aligned_parsed_json_gives_a_score_or_a_repro_error(metric_data, threshold, variant):
    metric, (gold, preds) = metric_data
    score_or_repro_error(lambda: evaluate_data(metric, gold, preds, threshold, variant))


@HYPO
@given(
    metric_data=st.one_of(
        metric_and_data, st.tuples(st.sampled_from(sorted(REGISTRY)), st.tuples(gold_items(), prediction_items()))
    ),
    gold_suffix=st.sampled_from([".json", ".json", ".txt", ".csv"]),
    pred_suffix=st.sampled_from([".json", ".json", ".txt", ".npz"]),
)
def test_any_files_give_a_score_or_a_repro_error(tmp_path, metric_data, gold_suffix, pred_suffix):
    metric, (gold, preds) = metric_data
    gold_path = write(tmp_path / f"gold{gold_suffix}", json.dumps(gold))  # json.dumps writes NaN: hostile too
    pred_path = write(tmp_path / f"pred{pred_suffix}", json.dumps(preds))
    result = score_or_repro_error(lambda: evaluate_files(metric, gold_path, pred_path))
    if result is not None:
        out = tmp_path / "items.json"
        report.write_per_item(out, result, 3)
        strict_json(out.read_text())


@st.composite
def tables(draw):
    header = draw(st.sampled_from(["gif_name\tanswer\tvid_id\ttype", "answer,vid_id,a1", "vid_id\tquestion", ""]))
    cells = st.one_of(st.sampled_from(["1", "3", "dog", "C1", "C2", "", 'x"y', "\u00e9"]), st.text(max_size=4))
    rows = draw(st.lists(st.lists(cells, max_size=5), max_size=4))
    sep = "\t" if "\t" in header else ","
    return "\n".join([header] + [sep.join(r) for r in rows]) + draw(st.sampled_from(["", "\n", "\x00"]))


@HYPO
@given(
    data=st.one_of(st.binary(max_size=40), tables().map(lambda t: t.encode("utf-8", "surrogatepass"))),
    suffix=st.sampled_from([".json", ".txt", ".csv", ".tsv", ".npz"]),
    metric=st.sampled_from(["accuracy", "mse", "recall", "vqa"]),
)
def test_readers_on_any_bytes(tmp_path, data, suffix, metric):
    path = write(tmp_path / f"f{suffix}", data)
    for read in (
        lambda: io.load_annotations(metric, path),
        lambda: io.load_predictions(path),
        lambda: io.load_score_matrices(path),
    ):
        try:
            read()
        except ReproError as exc:
            assert str(exc)


@HYPO
@given(
    i2t=st.lists(st.lists(st.floats(allow_nan=True), max_size=3), max_size=3),
    t2i=st.lists(st.lists(st.floats(allow_nan=True), max_size=3), max_size=3),
    captions=st.lists(st.lists(st.just("c"), max_size=2), max_size=3),
    as_npz=st.booleans(),
)
def test_score_matrices_give_a_score_or_a_repro_error(tmp_path, i2t, t2i, captions, as_npz):
    gold = write(tmp_path / "test.json", [{"image": f"{i}.jpg", "caption": c} for i, c in enumerate(captions)])
    if as_npz:
        try:
            np.savez(tmp_path / "s.npz", i2t=np.array(i2t, dtype=object), t2i=np.array(t2i, dtype=object))
        except ValueError:
            return
        preds = tmp_path / "s.npz"
    else:
        preds = write(tmp_path / "s.json", json.dumps({"i2t": i2t, "t2i": t2i}))
    score_or_repro_error(lambda: evaluate_files("recall", gold, preds))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    metric_data=st.one_of(
        metric_and_data, st.tuples(st.sampled_from(sorted(REGISTRY)), st.tuples(gold_items(), prediction_items()))
    )
)
def test_cli_gives_json_or_one_error_line(tmp_path, metric_data):
    metric, (gold, preds) = metric_data
    gold_path = write(tmp_path / "gold.json", json.dumps(gold))
    pred_path = write(tmp_path / "pred.json", json.dumps(preds))
    items = tmp_path / "items.json"
    result = run("-m", metric, "-a", gold_path, "-p", pred_path, "--json", "--per-item", items)
    if result.exit_code == 0:
        strict_json(result.stdout)
        strict_json(items.read_text())
    else:
        one_error_line(result)


# --- metric functions called directly --------------------------------------------------------------

numbers = st.one_of(
    st.floats(allow_nan=True), st.integers(-(10**30), 10**30), st.none(), st.booleans(), st.text(max_size=2)
)


@HYPO
@given(pairs=st.lists(st.tuples(numbers, numbers), max_size=5), variant=st.sampled_from(["psac", "tgif", "x"]))
def test_mse_function_gives_a_finite_score_or_a_repro_error(pairs, variant):
    from repro.metrics import mse

    result = score_or_repro_error(lambda: mse.evaluate([g for g, _ in pairs], [p for _, p in pairs], variant))
    if result is not None and all(abs(g) < 1e100 for g, _ in pairs):  # beyond: an infinite error, null in JSON
        assert math.isfinite(result.aggregate["mse"]) or not pairs


boxes = st.one_of(st.none(), st.lists(numbers, max_size=5), st.lists(st.floats(-20, 20), min_size=4, max_size=4))


@HYPO
@given(pairs=st.lists(st.tuples(boxes, boxes), max_size=5))
def test_grounding_function_gives_a_score_or_a_repro_error(pairs):
    from repro.metrics import grounding

    result = score_or_repro_error(lambda: grounding.evaluate([g for g, _ in pairs], [p for _, p in pairs]))
    if result is not None and pairs:
        assert 0 <= result.aggregate["overall"] <= 100


@HYPO
@given(
    threshold=st.floats(allow_nan=True), pairs=st.lists(st.tuples(st.text(max_size=3), st.text(max_size=3)), max_size=3)
)
def test_wups_threshold_is_checked_before_anything_is_looked_up(threshold, pairs):
    from repro.metrics import wups

    class NoWordNet:
        def synsets(self, word, pos=None):
            return []

    ok = threshold == -1 or 0 <= threshold <= 1
    try:
        wups.evaluate([g for g, _ in pairs], [p for _, p in pairs], threshold, wordnet=NoWordNet())
        assert ok
    except ReproError as exc:
        assert not ok and "threshold" in str(exc)


def test_npz_that_is_a_zip_of_something_else(tmp_path):
    path = tmp_path / "s.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("i2t.npy", b"not npy")
        z.writestr("t2i.npy", b"not npy")
    with pytest.raises(ReproError, match="s.npz"):
        io.load_score_matrices(path)
