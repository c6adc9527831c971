"""`repro eval` end to end through the CLI: official and generic files, output forms, bad input."""

import json

import pytest
from typer.testing import CliRunner

from repro.cli import app

runner = CliRunner()


def write(path, data):
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def vqa_files(tmp_path):
    anns = {
        "annotations": [
            {
                "question_id": 1,
                "question_type": "is the",
                "answer_type": "yes/no",
                "answers": [{"answer": "yes", "answer_id": i + 1} for i in range(10)],
            },
            {
                "question_id": 2,
                "question_type": "how many",
                "answer_type": "number",
                "answers": [{"answer": a, "answer_id": i + 1} for i, a in enumerate(["2"] * 2 + ["3"] * 8)],
            },
        ]
    }
    questions = {"questions": [{"question_id": 1, "question": "?"}, {"question_id": 2, "question": "?"}]}
    preds = [{"question_id": 1, "answer": "yes"}, {"question_id": 2, "answer": "two"}]
    return write(tmp_path / "a.json", anns), write(tmp_path / "q.json", questions), write(tmp_path / "p.json", preds)


def run(*args):
    return runner.invoke(app, ["eval", *map(str, args)])


def one_error_line(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_vqa_official_files_json_and_per_item(vqa_files, tmp_path):
    anns, questions, preds = vqa_files
    items = tmp_path / "items.json"
    result = run(
        "--metric",
        "vqa",
        "--annotations",
        anns,
        "--questions",
        questions,
        "--predictions",
        preds,
        "--json",
        "--per-item",
        items,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["metric"] == "vqa" and out["n"] == 2
    assert out["overall"] == pytest.approx(80.0) and out["number"] == pytest.approx(60.0)
    assert json.loads(items.read_text()) == {"1": 100.0, "2": pytest.approx(60.0)}


def test_round_two_gives_official_rounding(tmp_path):
    anns = [{"question_id": q, "answers": ["a"] * 3 + ["b"] * 7} for q in range(3)]
    preds = [{"question_id": 0, "answer": "a"}, {"question_id": 1, "answer": "b"}, {"question_id": 2, "answer": "b"}]
    args = (
        "--metric",
        "vqa",
        "--annotations",
        write(tmp_path / "a.json", anns),
        "--predictions",
        write(tmp_path / "p.json", preds),
        "--json",
    )
    assert json.loads(run(*args).output)["overall"] == pytest.approx(96.6666666)
    assert json.loads(run(*args, "--round", "2").output)["overall"] == 96.67


def test_rich_table_by_default(vqa_files):
    anns, _, preds = vqa_files
    result = run("--metric", "vqa", "--annotations", anns, "--predictions", preds)
    assert result.exit_code == 0 and "overall" in result.output and "per_question_type / how many" in result.output


def test_variant_2016(vqa_files, tmp_path):
    anns, _, _ = vqa_files
    preds = write(tmp_path / "p2.json", [{"question_id": 1, "answer": "Yes"}, {"question_id": 2, "answer": "3"}])
    new = json.loads(run("--metric", "vqa", "-a", anns, "-p", preds, "--json").output)
    old = json.loads(run("--metric", "vqa", "-a", anns, "-p", preds, "--json", "--variant", "2016").output)
    assert new["yes/no"] == 0.0 and old["yes/no"] == 100.0


def test_anls_generic_with_per_item(tmp_path):
    anns = write(
        tmp_path / "gt.json", {"data": [{"questionId": 7, "answers": ["ab"]}, {"questionId": 8, "answers": ["xy"]}]}
    )
    preds = write(tmp_path / "pred.json", [{"questionId": 7, "answer": "ac"}, {"questionId": 8, "answer": "XY"}])
    items = tmp_path / "items.json"
    result = run("--metric", "anls", "--annotations", anns, "--predictions", preds, "--json", "--per-item", items)
    from repro import __version__

    # the metric's variant and the toolkit version say which scorer produced the number
    assert json.loads(result.output) == {
        "metric": "anls",
        "anls": 0.75,
        "n": 2,
        "variant": "rrc",
        "toolkit_version": __version__,
    }
    assert json.loads(items.read_text()) == {"7": 0.5, "8": 1.0}


def test_tgif_count_csv_and_mse(tmp_path):
    csv = write(
        tmp_path / "Test_count_question.csv",
        "gif_name\tquestion\tanswer\tvid_id\tkey\ng1\thow many\t0\tCOUNT1\t1\ng2\thow many\t3\tCOUNT2\t2\n",
    )
    preds = write(
        tmp_path / "p.json", [{"question_id": "COUNT1", "answer": 0.3}, {"question_id": "COUNT2", "answer": 4.5}]
    )
    psac = json.loads(run("--metric", "mse", "-a", csv, "-p", preds, "--json").output)
    tgif = json.loads(run("--metric", "mse", "-a", csv, "-p", preds, "--json", "--variant", "tgif").output)
    assert psac["mse"] == 0.5 and tgif["mse"] == 1.0  # 4.5 rounds to 4


def test_cocoqa_text_files_accuracy(tmp_path):
    split = tmp_path / "test"
    split.mkdir()
    (split / "answers.txt").write_text("dog\nred\n")
    (split / "types.txt").write_text("0\n2\n")
    preds = write(tmp_path / "pred.txt", "dog\nblue\n")
    out = json.loads(run("--metric", "accuracy", "-a", split, "-p", preds, "--json").output)
    assert out["accuracy"] == 50.0 and out["per_type"] == {"object": 100.0, "color": 0.0}


def test_wups_threshold_zero(tmp_path):
    from repro.errors import ReproError
    from repro.metrics import wordnet

    try:
        wordnet.load()
    except ReproError as exc:
        pytest.skip(f"WordNet 3.0 unavailable: {exc}")
    anns = write(tmp_path / "gt.json", [{"question_id": 1, "answer": "car"}])
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "truck"}])
    out = json.loads(run("--metric", "wups", "--threshold", "0.0", "-a", anns, "-p", preds, "--json").output)
    assert out["wups@0.0"] == pytest.approx(100 * 11 / 12)


def test_recall_albef_json_and_npz(tmp_path):
    import numpy as np

    anns = write(
        tmp_path / "test.json", [{"image": "a.jpg", "caption": ["x", "y"]}, {"image": "b.jpg", "caption": ["z"]}]
    )
    np.savez(
        tmp_path / "scores.npz",
        i2t=np.array([[0.9, 0.1, 0.0], [0.0, 0.1, 0.9]]),
        t2i=np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]),
    )
    out = json.loads(run("--metric", "recall", "-a", anns, "-p", tmp_path / "scores.npz", "--json").output)
    assert out["tr@1"] == 100.0 and out["ir@1"] == pytest.approx(200 / 3)


# --- bad input: one line, exit 2 ------------------------------------------------------------------


def test_unreadable_json(tmp_path, vqa_files):
    anns, _, _ = vqa_files
    bad = write(tmp_path / "bad.json", '[{"question_id": 1,')
    one_error_line(run("--metric", "vqa", "-a", anns, "-p", bad), "bad.json:1:", "not valid JSON")


def test_missing_file(tmp_path, vqa_files):
    anns, _, _ = vqa_files
    one_error_line(run("--metric", "vqa", "-a", anns, "-p", tmp_path / "nope.json"), "no such file")


def test_prediction_for_unknown_question(tmp_path, vqa_files):
    anns, _, _ = vqa_files
    preds = write(
        tmp_path / "p.json",
        [{"question_id": 1, "answer": "a"}, {"question_id": 2, "answer": "a"}, {"question_id": 99, "answer": "a"}],
    )
    one_error_line(run("--metric", "vqa", "-a", anns, "-p", preds), "unknown question", "99")


def test_missing_predictions_counts_and_lists_ids(tmp_path):
    anns = write(tmp_path / "a.json", [{"question_id": q, "answer": "x"} for q in range(20)])
    preds = write(tmp_path / "p.json", [{"question_id": 0, "answer": "x"}])
    one_error_line(
        run("--metric", "accuracy", "-a", anns, "-p", preds), "missing predictions for 19 of 20", "1, 2, 3, 4, 5, ..."
    )


def test_duplicate_prediction_ids(tmp_path, vqa_files):
    anns, _, _ = vqa_files
    preds = write(tmp_path / "p.json", [{"question_id": 1, "answer": "a"}, {"question_id": 1, "answer": "b"}])
    one_error_line(run("--metric", "vqa", "-a", anns, "-p", preds), "duplicate prediction id", "1")


def test_duplicate_annotation_ids(tmp_path):
    anns = write(tmp_path / "a.json", [{"question_id": 3, "answer": "x"}, {"question_id": 3, "answer": "y"}])
    preds = write(tmp_path / "p.json", [{"question_id": 3, "answer": "x"}])
    one_error_line(run("--metric", "accuracy", "-a", anns, "-p", preds), "duplicate question id", "3")


def test_wrong_answer_count_for_vqa(tmp_path):
    anns = write(tmp_path / "a.json", [{"question_id": 5, "answers": ["x"] * 9}])
    preds = write(tmp_path / "p.json", [{"question_id": 5, "answer": "x"}])
    one_error_line(run("--metric", "vqa", "-a", anns, "-p", preds), "question 5 has 9 human answers")


def test_unknown_metric_and_variant(vqa_files):
    anns, _, preds = vqa_files
    one_error_line(run("--metric", "bleu", "-a", anns, "-p", preds), "unknown metric")
    one_error_line(run("--metric", "vqa", "-a", anns, "-p", preds, "--variant", "2015"), "unknown vqa variant")
    one_error_line(run("--metric", "accuracy", "-a", anns, "-p", preds, "--variant", "x"), "--variant applies to")


def test_questions_file_that_does_not_match(tmp_path, vqa_files):
    anns, _, preds = vqa_files
    questions = write(tmp_path / "q.json", {"questions": [{"question_id": 1}]})
    one_error_line(run("--metric", "vqa", "-a", anns, "--questions", questions, "-p", preds), "do not match")


def test_bad_tgif_answer(tmp_path):
    csv = write(tmp_path / "c.csv", "gif_name\tquestion\tanswer\tvid_id\ng\tq\tmany\tC1\n")
    preds = write(tmp_path / "p.json", [{"question_id": "C1", "answer": 1}])
    one_error_line(run("--metric", "mse", "-a", csv, "-p", preds), "c.csv:2", "not an integer")
