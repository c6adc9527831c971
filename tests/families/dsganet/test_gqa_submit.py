"""`repro submit gqa-test-dev --dry-run`: pre-flight passes on a complete file, refuses an incomplete one."""

import json

from repro.cli import app

GQA_IDS = [f"0{i:07d}" for i in range(25)]  # GQA ids are strings; leading zeros are part of the id


def _files(sandbox, ids):
    qpath = sandbox / "data" / "gqa" / "submission_all_questions.json"
    qpath.parent.mkdir(parents=True, exist_ok=True)
    qpath.write_text(json.dumps({q: {"imageId": "n1", "question": "Is it red?"} for q in GQA_IDS}))
    preds = sandbox / "gqa_predictions.json"
    preds.write_text(json.dumps([{"questionId": q, "prediction": "yes"} for q in ids]))
    return preds


def test_complete_file_passes_preflight(runner, sandbox):
    preds = _files(sandbox, GQA_IDS)
    result = runner.invoke(app, ["submit", "gqa-test-dev", "-p", str(preds), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "nothing was sent" in result.stdout and "every one of 25 questions" in result.stdout


def test_incomplete_file_is_refused(runner, sandbox):
    preds = _files(sandbox, GQA_IDS[:-3])
    result = runner.invoke(app, ["submit", "gqa-test-dev", "-p", str(preds), "--dry-run"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "0000022" in result.output  # a missing id is named
