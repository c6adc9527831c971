"""`repro run` at the smoke scale on generated TextVQA files, and the test-set files it writes for `repro submit`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repro import specs
from repro.cli import app
from repro.paths import REPO_DIR
from tests.evalai_stub import EvalAIStub

TOKEN = "tok-sam4c-0123456789abcdef"


@pytest.fixture
def sa_sandbox(sandbox):
    folder = sandbox / "experiments" / "sa-m4c"
    folder.mkdir(parents=True)
    for name in ("sa-m4c-table2-ablations.yaml", "sa-m4c-sec6-spatial.yaml", "sa-m4c-table3-stvqa.yaml"):
        shutil.copy(REPO_DIR / "experiments" / "sa-m4c" / name, folder)
    specs.clear_cache()
    return sandbox


@pytest.mark.slow
def test_smoke_rows_train_score_and_write_evalai_predictions(sa_sandbox, runner, monkeypatch):
    args = ["run", "sa-m4c-table2-ablations", "--scale", "smoke", "--rows", "7 SA-M4C (ours)"]
    out = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    results = sa_sandbox / "results" / "sa-m4c" / "sa-m4c-table2-ablations"
    for name in ("7_SA-M4C_ours",):
        record = json.loads((results / f"{name}.smoke.json").read_text())
        assert record["split"] == "val" and 0.0 <= record["metrics"]["Accu.(val)"] <= 100.0
        assert record["extra"]["train"][0]["steps"] > 0
    raw = next((sa_sandbox / "data" / "synthetic").glob("textvqa-*"))
    # accuracy per kind of generated question: the overall one is their mean weighted by the kinds' sizes
    val = json.loads((raw / "TextVQA_0.5.1_val.json").read_text())["data"]
    sizes = {k: sum(q["question_kind"] == k for q in val) for k in ("spatial", "control")}
    (by_kind,) = record["extra"]["per_question_kind"]
    weighted = sum(by_kind[k] * n for k, n in sizes.items()) / len(val)
    assert set(by_kind) == {k for k, n in sizes.items() if n} and weighted == pytest.approx(
        record["metrics"]["Accu.(val)"]
    )
    # the test split's answers in the EvalAI TextVQA format, one per test question
    questions = raw / "TextVQA_0.5.1_test.json"
    qids = sorted(q["question_id"] for q in json.loads(questions.read_text())["data"])
    preds = results / "predictions" / "7_SA-M4C_ours.smoke.seed0.test.json"
    records = json.loads(preds.read_text())
    assert sorted(r["question_id"] for r in records) == qids and all(isinstance(r["answer"], str) for r in records)

    # `repro submit` checks the file against the test questions, then uploads to the EvalAI stub
    target = sa_sandbox / "data" / "textvqa" / "TextVQA_0.5.1_test.json"
    target.parent.mkdir(parents=True)
    shutil.copy(questions, target)
    smoke = runner.invoke(app, ["submit", "textvqa-test", "-p", str(preds), "--yes"])
    assert smoke.exit_code == 2 and "the smoke scale" in smoke.output  # never to a real server
    preds = Path(shutil.copy(preds, sa_sandbox / "7_SA-M4C_ours.seed0.test.json"))  # as a paper-scale run names it
    dry = runner.invoke(app, ["submit", "textvqa-test", "-p", str(preds), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    home = sa_sandbox / "home"
    (home / ".evalai").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(sa_sandbox / "cache"))
    monkeypatch.delenv("EVALAI_API_URL", raising=False)
    server = EvalAIStub(TOKEN).start()
    try:
        (home / ".evalai" / "host_url").write_text(server.url)
        (home / ".evalai" / "token.json").write_text(json.dumps({"token": TOKEN}))
        sent = runner.invoke(app, ["submit", "textvqa-test", "-p", str(preds), "--yes", "--method", "SA-M4C"])
        assert sent.exit_code == 0, sent.output
        (post,) = server.calls("POST", "/api/jobs/challenge/")
        assert post.path.startswith("/api/jobs/challenge/874/") and post.files["input_file"][1] == preds.read_bytes()
    finally:
        server.stop()
    # a file missing a test question is refused before anything is sent
    short = sa_sandbox / "short.json"
    short.write_text(json.dumps(records[1:]))
    refused = runner.invoke(app, ["submit", "textvqa-test", "-p", str(short), "--dry-run"])
    assert refused.exit_code != 0 and "Traceback" not in refused.output


def test_section6_subset_counts_come_from_the_val_questions(sa_sandbox, runner):
    out = runner.invoke(app, ["run", "sa-m4c-sec6-spatial", "--scale", "smoke", "--rows", "Spatial subsets"])
    assert out.exit_code == 0, out.output
    record = json.loads(
        (sa_sandbox / "results" / "sa-m4c" / "sa-m4c-sec6-spatial" / "Spatial_subsets.smoke.json").read_text()
    )
    raw = next((sa_sandbox / "data" / "synthetic").glob("textvqa-*"))
    val = json.loads((raw / "TextVQA_0.5.1_val.json").read_text())["data"]
    spatial = [q for q in val if q["question_kind"] == "spatial"]
    # every generated spatial question names a direction word and has an OCR token as its answer
    assert record["metrics"]["D_spa questions"] >= len(spatial) > 0
    assert 0 < record["metrics"]["D_spa+ocr questions"] <= record["metrics"]["D_spa questions"]


@pytest.mark.slow
def test_stvqa_rows_score_anls_and_write_the_task3_upload_file(sa_sandbox, runner):
    out = runner.invoke(app, ["run", "sa-m4c-table3-stvqa", "--scale", "smoke", "--rows", "5 SA-M4C (ours)"])
    assert out.exit_code == 0, out.output
    results = sa_sandbox / "results" / "sa-m4c" / "sa-m4c-table3-stvqa"
    metrics = json.loads((results / "5_SA-M4C_ours.smoke.json").read_text())["metrics"]
    assert 0.0 <= metrics["ANLS on val"] <= 1.0 and 0.0 <= metrics["VQA Accu. on val"] <= 100.0
    raw = next((sa_sandbox / "data" / "synthetic").glob("textvqa-*"))
    target = sa_sandbox / "data" / "st-vqa" / "test_task_3.json"
    target.parent.mkdir(parents=True)
    shutil.copy(raw / "test_task_3.json", target)
    smoke = results / "predictions" / "5_SA-M4C_ours.smoke.seed0.test.json"
    assert runner.invoke(app, ["submit", "stvqa-test", "-p", str(smoke)]).exit_code == 2
    preds = Path(shutil.copy(smoke, smoke.with_name("5_SA-M4C_ours.seed0.test.json")))  # a paper-scale run's name
    assert runner.invoke(app, ["submit", "stvqa-test", "-p", str(preds), "--dry-run"]).exit_code == 0
    written = runner.invoke(app, ["submit", "stvqa-test", "-p", str(preds)], env={"COLUMNS": "300"})
    assert written.exit_code == 0, written.output
    upload = next(results.glob("predictions/*.stvqa-test/stvqa_task3_submission.json"))
    assert json.loads(upload.read_text()) == json.loads(preds.read_text())
    assert "rrc.cvc.uab.es" in written.output and "upload it by hand" in written.output
