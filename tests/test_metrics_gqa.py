"""GQA accuracy with the binary / open split (official eval.py rules) on a hand-computed fixture."""

import json

import pytest
from typer.testing import CliRunner

from repro.cli import app
from repro.errors import ReproError
from repro.metrics import files, gqa


def _q(answer, structural, balanced=True):
    return {
        "imageId": "n1",
        "question": "?",
        "answer": answer,
        "isBalanced": balanced,
        "types": {"structural": structural},
    }


# 6 balanced questions (3 binary: verify, logical, compare; 3 open: query) and one unbalanced one.
QUESTIONS = {
    "01": _q("yes", "verify"),
    "02": _q("no", "logical"),
    "03": _q("left", "compare"),
    "04": _q("cat", "query"),
    "05": _q("red", "query"),
    "06": _q("table", "query"),
    "07": _q("dog", "query", balanced=False),
}
# right: 01 (binary), 03 (binary), 04 (open); wrong: 02, 05 ("Red": no case folding), 06 (" table": no trimming);
# 07 is wrong but not balanced, so it does not count.
PREDICTIONS = [
    {"questionId": "01", "prediction": "yes"},
    {"questionId": "02", "prediction": "yes"},
    {"questionId": "03", "prediction": "left"},
    {"questionId": "04", "prediction": "cat"},
    {"questionId": "05", "prediction": "Red"},
    {"questionId": "06", "prediction": " table"},
    {"questionId": "07", "prediction": "cat"},
]


def test_binary_open_overall_by_hand(tmp_path):
    (tmp_path / "q.json").write_text(json.dumps(QUESTIONS))
    (tmp_path / "p.json").write_text(json.dumps(PREDICTIONS))
    r = files.evaluate_files("gqa", tmp_path / "q.json", tmp_path / "p.json")
    assert r.n == 6
    assert r.aggregate["binary"] == pytest.approx(100 * 2 / 3)
    assert r.aggregate["open"] == pytest.approx(100 * 1 / 3)
    assert r.aggregate["overall"] == pytest.approx(50.0)
    assert r.aggregate["per_structural_type"]["query"] == pytest.approx(100 / 3)
    assert r.per_item["05"] == 0.0 and r.per_item["04"] == 100.0 and "07" not in r.per_item


def test_cli_json_and_missing_prediction(tmp_path):
    (tmp_path / "q.json").write_text(json.dumps(QUESTIONS))
    (tmp_path / "p.json").write_text(json.dumps(PREDICTIONS))
    runner = CliRunner()
    out = runner.invoke(
        app, ["eval", "--metric", "gqa", "-a", str(tmp_path / "q.json"), "-p", str(tmp_path / "p.json"), "--json"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["overall"] == pytest.approx(50.0) and data["n"] == 6
    (tmp_path / "short.json").write_text(json.dumps(PREDICTIONS[1:]))
    bad = runner.invoke(
        app, ["eval", "--metric", "gqa", "-a", str(tmp_path / "q.json"), "-p", str(tmp_path / "short.json")]
    )
    assert bad.exit_code != 0 and "missing predictions" in bad.output and "Traceback" not in bad.output


def test_bad_question_file_is_one_error(tmp_path):
    (tmp_path / "q.json").write_text(json.dumps({"01": {"answer": "yes"}}))
    (tmp_path / "p.json").write_text(json.dumps(PREDICTIONS[:1]))
    with pytest.raises(ReproError, match="types"):
        files.evaluate_files("gqa", tmp_path / "q.json", tmp_path / "p.json")
    with pytest.raises(ReproError, match="gqa: 1 questions"):
        gqa.evaluate(["a"], ["a", "b"], ["1"], ["query"])
    (tmp_path / "answers.txt").write_text("yes\n")  # a text answer file has no question types
    (tmp_path / "p0.json").write_text(json.dumps([{"question_id": 0, "answer": "yes"}]))
    with pytest.raises(ReproError, match="needs a GQA questions json"):
        files.evaluate_files("gqa", tmp_path / "answers.txt", tmp_path / "p0.json")


def test_generic_list_form_scores_the_same(tmp_path):
    items = [{"question_id": qid, **record} for qid, record in QUESTIONS.items()]
    (tmp_path / "q.json").write_text(json.dumps(items))
    (tmp_path / "p.json").write_text(
        json.dumps([{"question_id": p["questionId"], "answer": p["prediction"]} for p in PREDICTIONS])
    )
    r = files.evaluate_files("gqa", tmp_path / "q.json", tmp_path / "p.json")
    assert (r.n, r.aggregate["binary"], r.aggregate["overall"]) == (6, pytest.approx(200 / 3), pytest.approx(50.0))
