"""`repro submit` driving the real `evalai` client against a loopback EvalAI stub (tests/evalai_stub.py)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from repro.cli import app
from tests.evalai_stub import PHASES, EvalAIStub

TOKEN = "tok-3f9a1c0d5e7b2a4c6e8f0a1b3c5d7e9f-secret"
QIDS = [458752000 + i for i in range(40)]
GQA_IDS = [f"20{i:05d}" for i in range(30)]


@pytest.fixture
def home(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME (set before the client is first imported) and cache folder."""
    home = sandbox / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(sandbox / "cache"))
    monkeypatch.delenv("EVALAI_API_URL", raising=False)
    return home


@pytest.fixture
def stub(home: Path):
    server = EvalAIStub(TOKEN).start()
    config = home / ".evalai"
    config.mkdir()
    (config / "host_url").write_text(server.url)  # the client's format: no trailing newline
    (config / "token.json").write_text(json.dumps({"token": TOKEN}))
    yield server
    server.stop()


def vqa_questions(sandbox: Path, ids: list[int] = QIDS) -> Path:
    path = sandbox / "data" / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    questions = [{"question_id": i, "image_id": i // 1000, "question": f"q{i}?"} for i in ids]
    path.write_text(json.dumps({"data_subtype": "test2015", "questions": questions}))
    return path


def vqa_predictions(path: Path, ids: list[int] = QIDS, lines: bool = False) -> Path:
    records = [{"question_id": i, "answer": "yes" if i % 2 else "2"} for i in ids]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in records) if lines else json.dumps(records))
    return path


def submit(runner, *args: str, input: str | None = None):
    return runner.invoke(app, ["submit", *args], input=input)


def one_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def records(sandbox: Path) -> list[dict]:
    path = sandbox / "results" / "submissions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- the file reaches the right challenge and phase -----------------------------------------------


def test_direct_upload_sends_the_file_to_challenge_and_phase(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "results" / "mcan-pa" / "MCAN+PA.test-dev.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--method", "MCAN+PA")
    assert result.exit_code == 0, result.output
    posts = stub.calls("POST", "/api/jobs/challenge/")
    assert [c.path for c in posts] == ["/api/jobs/challenge/830/challenge_phase/1793/submission/"]
    name, data = posts[0].files["input_file"]
    assert (name, data) == (preds.name, preds.read_bytes())
    assert posts[0].fields["method_name"] == "MCAN+PA" and posts[0].authorized
    (record,) = records(sandbox)
    sid = max(stub.submissions)
    assert record["submission_id"] == sid and record["phase"] == 1793 and record["challenge"] == 830
    assert record["sha256"] == hashlib.sha256(preds.read_bytes()).hexdigest()
    assert record["upload"] == "direct" and record["questions"] == len(QIDS)
    assert record["predictions"] == record["file"] == "mcan-pa/MCAN+PA.test-dev.json"  # relative to results/
    assert f"submission {sid}" in result.stdout
    assert "today 1" in result.stdout and "in all 4" in result.stdout  # remaining submissions shown


def test_large_upload_uses_presigned_flow_and_looks_up_the_phase(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--yes", "--large")
    assert result.exit_code == 0, result.output
    test_std = next(p["id"] for p in PHASES[830] if p["name"] == "Test-Standard Phase")
    paths = [c.path for c in stub.calls("POST")]
    sid = max(stub.submissions)
    assert paths == [
        f"/api/jobs/phases/{test_std}/get_submission_file_presigned_url/",
        f"/api/jobs/phases/{test_std}/finish_submission_file_upload/{sid}/",
        f"/api/jobs/phases/{test_std}/send_submission_message/{sid}/",
    ]
    assert stub.uploads[sid] == {1: preds.read_bytes()}
    finish = stub.calls("POST", f"/api/jobs/phases/{test_std}/finish")[0]
    assert json.loads(finish.fields["parts"]) == [{"ETag": f'"etag-{preds.stat().st_size}"', "PartNumber": 1}]
    assert not stub.calls("POST", "/api/jobs/challenge/")  # never the direct route
    (record,) = records(sandbox)
    assert (record["phase"], record["upload"], record["submission_id"]) == (test_std, "presigned", sid)

    # the phase id is cached: a second submission does not list the phases again
    def listed() -> int:
        return sum(c.path == "/api/challenges/challenge/830/challenge_phase" for c in stub.log)

    assert listed() == 1
    assert submit(runner, "vqa2-test-std", "-p", str(preds), "--yes", "--large").exit_code == 0
    assert listed() == 1
    assert len(records(sandbox)) == 2


def test_gqa_goes_to_its_challenge_with_its_format(runner, sandbox, stub):
    qpath = sandbox / "data" / "gqa" / "submission_all_questions.json"
    qpath.parent.mkdir(parents=True)
    qpath.write_text(json.dumps({q: {"imageId": "n1", "question": "?"} for q in GQA_IDS}))
    preds = sandbox / "gqa.json"
    preds.write_text(json.dumps([{"questionId": q, "prediction": "no"} for q in GQA_IDS]))
    result = submit(runner, "gqa-test", "-p", str(preds), "--yes")
    assert result.exit_code == 0, result.output
    (post,) = stub.calls("POST")
    assert post.path == "/api/jobs/challenge/225/challenge_phase/602/submission/"
    assert post.files["input_file"][1] == preds.read_bytes()


def test_json_lines_are_converted_never_uploaded_as_is(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.jsonl", lines=True)
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 0, result.output
    name, data = stub.calls("POST")[0].files["input_file"]
    assert name.endswith(".json") and data != preds.read_bytes()
    sent = json.loads(data)
    assert isinstance(sent, list) and sent == [json.loads(line) for line in preds.read_text().splitlines()]


# --- nothing incomplete leaves the machine ------------------------------------------------------


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("missing", "3 of 40 test2015 questions missing (e.g. 458752000, 458752001, 458752002)"),
        ("duplicate", "1 duplicate question_ids (e.g. 458752005)"),
        ("unknown", "1 question_ids not in test2015 (e.g. 999)"),
        ("answer-int", "answer 7 is int, not a string"),
        ("id-str", "question_id '458752000' is str, not int"),
    ],
)
def test_bad_file_is_refused_before_any_request(runner, sandbox, stub, case, fragment):
    vqa_questions(sandbox)
    records_ = [{"question_id": i, "answer": "yes"} for i in QIDS]
    if case == "missing":
        records_ = records_[3:]
    elif case == "duplicate":
        records_.append({"question_id": QIDS[5], "answer": "no"})
    elif case == "unknown":
        records_.append({"question_id": 999, "answer": "no"})
    elif case == "answer-int":
        records_[4]["answer"] = 7
    elif case == "id-str":
        records_[0]["question_id"] = str(QIDS[0])
    preds = sandbox / "p.json"
    preds.write_text(json.dumps(records_))
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--yes")
    assert result.exit_code == 2
    line = one_line(result)
    assert fragment in line and "nothing sent" in line
    assert stub.log == []  # not even a phase lookup
    assert records(sandbox) == []


def test_missing_question_file_is_refused_before_any_request(runner, sandbox, stub):
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 2
    assert "v2_OpenEnded_mscoco_test2015_questions.json not found; run `repro download vqa2`" in one_line(result)
    assert stub.log == []


def test_test_dev_needs_all_of_test2015(runner, sandbox, stub):
    """A test-dev-sized file (a subset of test2015) is incomplete for the server and never sent."""
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json", ids=QIDS[:25])
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 2 and "15 of 40 test2015 questions missing" in one_line(result)
    assert stub.log == []


def test_dry_run_makes_no_request(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "nothing was sent" in result.stdout and "every one of 40 questions" in result.stdout
    assert stub.log == []


def test_declining_the_confirmation_sends_nothing(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), input="n\n")
    assert result.exit_code == 1
    assert "Test-Standard Phase" in result.stdout and "today 1" in result.stdout
    assert stub.calls("POST") == [] and records(sandbox) == []
    result = submit(runner, "vqa2-test-std", "-p", str(preds), input="y\n")
    assert result.exit_code == 0, result.output
    assert len(stub.calls("POST")) == 1


def test_no_submission_left_today_is_refused_before_upload(runner, sandbox, stub):
    vqa_questions(sandbox)
    stub.remaining[1794] = {
        "remaining_submissions_today_count": 0,
        "remaining_submissions_this_month_count": 4,
        "remaining_submissions_count": 3,
    }
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--yes")
    assert result.exit_code == 2
    assert "no submissions left today" in one_line(result)
    assert stub.calls("POST") == []


# --- the token --------------------------------------------------------------------------------


def test_token_never_appears_in_output_records_or_cache(runner, sandbox, stub, home):
    (home / ".evalai" / "token.json").unlink()
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    outputs = []
    for args in (
        ["vqa2-test-std", "-p", str(preds), "--yes", "--large", "--token", TOKEN, "--wait", "--poll", "0.01"],
        ["vqa2-test-dev", "-p", str(preds), "--yes", "--token", TOKEN],
    ):
        result = submit(runner, *args)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    # a server that echoes the credentials back in an error body
    stub.fail["submit"] = (403, {"error": f"Bearer {TOKEN} may not submit"})
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--token", TOKEN)
    assert result.exit_code == 1 and "may not submit" in one_line(result)
    outputs.append(result.output)
    assert all(c.authorized for c in stub.log if c.path.startswith("/api/"))
    stored = [
        p.read_text()
        for p in sandbox.rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".json") and "data" not in p.parts and p.parent.name != ".evalai"
    ]
    for text in outputs + stored:
        assert TOKEN not in text
    assert not (home / ".evalai" / "token.json").exists()  # --token is not written to disk


def test_missing_token_is_one_line(runner, sandbox, stub, home):
    (home / ".evalai" / "token.json").unlink()
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 2 and "no EvalAI token" in one_line(result)
    assert stub.log == []


# --- waiting for the result ------------------------------------------------------------------------


def test_wait_polls_until_finished_and_shows_the_result(runner, sandbox, stub):
    vqa_questions(sandbox)
    stub.polls_before_done = 2
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait", "--poll", "0.01")
    assert result.exit_code == 0, result.output
    sid = max(stub.submissions)
    assert len(stub.calls("GET", f"/api/jobs/submission/{sid}")) == 3
    assert "finished" in result.stdout and "71.05" in result.stdout and "54.86" in result.stdout
    (record,) = records(sandbox)
    assert record["status"] == "finished" and record["result"] == stub.result


def test_status_later_shows_progress_then_result(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    assert submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes").exit_code == 0
    sid = max(stub.submissions)
    first = submit(runner, "--status", str(sid))
    assert first.exit_code == 0 and "running" in first.stdout
    later = submit(runner, "--status", str(sid), "--wait", "--poll", "0.01")
    assert later.exit_code == 0, later.output
    assert "71.05" in later.stdout
    assert records(sandbox)[0]["status"] == "finished"


def test_failed_evaluation_is_one_line_with_the_servers_error(runner, sandbox, stub):
    vqa_questions(sandbox)
    stub.outcome = "failed"
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait", "--poll", "0.01")
    assert result.exit_code == 1
    line = one_line(result)
    sid = max(stub.submissions)
    kept = sandbox / "results" / "submissions" / f"{sid}.stderr.txt"
    assert line.endswith(f"submission {sid} failed on the server; its error log is in {kept}")
    assert "KeyError: 'answer'" in kept.read_text()  # the server's text, in a file, never printed
    assert records(sandbox)[0]["status"] == "failed"


def test_wait_retries_server_hiccups_and_gives_up_after_the_timeout(runner, sandbox, stub, monkeypatch):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    stub.fail["poll"], stub.fail_times["poll"] = (503, "<html>Service Unavailable</html>"), 2
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait", "--poll", "0.01")
    assert result.exit_code == 0, result.output
    assert "71.05" in result.stdout
    stub.polls_before_done = 10**6
    clock = FakeClock()
    monkeypatch.setattr("repro.submit.time", clock)  # the wait's clock and sleep: time passes only in sleep()
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait", "--poll", "0.01", "--timeout", "0.05")
    assert result.exit_code == 1
    sid = max(stub.submissions)
    assert f"submission {sid} is still running" in one_line(result)
    assert f"repro submit --status {sid} --wait" in one_line(result)
    # backoff, not a busy loop: sleeps of 0.01, 0.015, 0.0225 s, then the next (0.034) would pass the timeout
    assert clock.sleeps == pytest.approx([0.01, 0.015, 0.0225])
    assert len(stub.calls("GET", f"/api/jobs/submission/{sid}")) == 4


class FakeClock:
    """`time` for repro.submit: monotonic() moves only when sleep() is called, and the sleeps are counted."""

    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_file_type_the_phase_does_not_accept(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.predictions")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 2
    assert "accepts .json, .zip, .txt files, not p.predictions" in one_line(result)
    assert stub.calls("POST") == []


def test_unknown_submission_status(runner, sandbox, stub):
    result = submit(runner, "--status", "424242")
    assert result.exit_code == 1 and "Submission 424242 does not exist" in one_line(result)


# --- server errors become one clear line ---------------------------------------------------------


@pytest.mark.parametrize(
    "route, status, body, fragment",
    [
        (
            "submit",
            403,
            {"error": "The maximum number of submission for today has been reached"},
            "The maximum number of submission for today has been reached",
        ),
        (
            "submit",
            406,
            {"error": "Sorry, cannot accept submissions since challenge phase is not active"},
            "challenge phase is not active",
        ),
        ("submit", 401, {"detail": "Invalid token"}, "EvalAI rejected the token (HTTP 401: Invalid token)"),
        ("submit", 401, {"detail": "Given token not valid for any token type"}, "EvalAI rejected the token"),
        ("submit", 502, "<html><body><h1>502 Bad Gateway</h1></body></html>", "EvalAI server error (HTTP 502"),
        ("submit", 500, {"error": "boom"}, "EvalAI server error (HTTP 500 boom)"),
        (
            "presign",
            403,
            {"error": "The maximum number of submissions has been reached"},
            "The maximum number of submissions has been reached",
        ),
        ("phase", 406, {"error": "Challenge is not active"}, "Challenge is not active"),
    ],
)
def test_server_errors_become_one_clear_line(runner, sandbox, stub, route, status, body, fragment):
    vqa_questions(sandbox)
    stub.fail[route] = (status, body)
    preds = vqa_predictions(sandbox / "p.json")
    args = ["vqa2-test-dev", "-p", str(preds), "--yes"] + (["--large"] if route == "presign" else [])
    result = submit(runner, *args)
    assert result.exit_code == 1
    assert fragment in one_line(result)
    assert records(sandbox) == []


def test_failed_storage_upload_is_not_queued(runner, sandbox, stub):
    vqa_questions(sandbox)
    stub.fail["s3"] = (403, "<Error><Code>AccessDenied</Code></Error>")
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--yes", "--large")
    assert result.exit_code == 1
    line = one_line(result)
    assert "uploading the file to EvalAI's storage failed (HTTP 403" in line and "not queued" in line
    assert not stub.calls("POST", "/api/jobs/phases/1794/send_submission_message")
    assert not stub.calls("POST", "/api/jobs/phases/1794/finish_submission_file_upload")


def test_unreachable_server(runner, sandbox, stub):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    stub.stop()
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 1 and "could not reach EvalAI" in one_line(result)


def test_unknown_phase_name_lists_the_phases(runner, sandbox, stub, monkeypatch):
    monkeypatch.setitem(PHASES, 874, [{"id": 9, "name": "Renamed Phase"}])
    path = sandbox / "data" / "textvqa" / "TextVQA_0.5.1_test.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"data": [{"question_id": i, "question": "?"} for i in range(5)]}))
    preds = sandbox / "t.json"
    preds.write_text(json.dumps([{"question_id": i, "answer": "a"} for i in range(5)]))
    result = submit(runner, "textvqa-test", "-p", str(preds), "--yes")
    assert result.exit_code == 2
    line = one_line(result)
    assert "9 'Renamed Phase'" in line and "--phase" in line
    assert submit(runner, "textvqa-test", "-p", str(preds), "--yes", "--phase", "9").exit_code == 0
    assert [c.path for c in stub.calls("POST")] == ["/api/jobs/challenge/874/challenge_phase/9/submission/"]


# --- servers outside EvalAI -------------------------------------------------------------------------


def test_vqa1_gets_the_named_results_zip(runner, sandbox, stub):
    qpath = sandbox / "data" / "vqa1" / "OpenEnded_mscoco_test-dev2015_questions.json"
    qpath.parent.mkdir(parents=True)
    qpath.write_text(json.dumps({"questions": [{"question_id": i, "image_id": 1, "question": "?"} for i in QIDS]}))
    preds = vqa_predictions(sandbox / "v1.jsonl", lines=True)
    result = submit(runner, "vqa1-test-dev", "-p", str(preds), "--method", "mcanpa")
    assert result.exit_code == 0, result.output
    out = sandbox / "v1.vqa1-test-dev" / "results.zip"
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ["vqa_OpenEnded_mscoco_test-dev2015_mcanpa_results.json"]
        assert len(json.loads(archive.read(archive.namelist()[0]))) == len(QIDS)
    assert "codalab.org/competitions/6961" in result.stdout and stub.log == []


def test_nlvr2_gets_a_csv_and_email_instructions(runner, sandbox, stub):
    preds = sandbox / "nlvr2.json"
    preds.write_text(
        json.dumps(
            [{"identifier": "test2-0-1-0", "prediction": "True"}, {"identifier": "test2-0-1-1", "prediction": "False"}]
        )
    )
    result = submit(runner, "nlvr2-test-u", "-p", str(preds))
    assert result.exit_code == 0, result.output
    out = sandbox / "nlvr2.nlvr2-test-u" / "nlvr2_predictions.csv"
    assert out.read_text() == "test2-0-1-0,True\ntest2-0-1-1,False\n"
    assert "nlvr@googlegroups.com" in result.stdout and "coverage not checked" in result.stdout
    preds.write_text(json.dumps([{"identifier": "test2-0-1-0", "prediction": "yes"}]))
    bad = submit(runner, "nlvr2-test-u", "-p", str(preds))
    assert bad.exit_code == 2 and "is not one of True, False" in one_line(bad)


def test_target_list_and_unknown_target(runner, sandbox):
    listing = submit(runner)
    assert listing.exit_code == 0 and "vqa2-test-std" in listing.stdout and "gqa-test-dev" in listing.stdout
    result = submit(runner, "vqa3-test", "-p", "x.json")
    assert result.exit_code == 2 and "unknown submission target 'vqa3-test'" in one_line(result)


def test_the_token_is_redacted_in_every_spelling_a_server_may_echo():
    from urllib.parse import quote, quote_plus

    from repro.submit.evalai import Connection

    token = "abc/def+g h=ij&k"
    conn = Connection(host="http://127.0.0.1:1", token=token)
    for echoed in (
        token,
        quote(token, safe=""),
        quote(token, safe="").lower(),
        quote_plus(token),
        '"abc/def+g h=ij&k"',
    ):
        text = conn.redact(f"error: bad token {echoed} given")
        assert "***" in text and "def" not in text, echoed


def test_the_client_session_leaves_requests_alone_for_the_rest_of_the_process(stub):
    """Only the client's own modules see the recorder: the `requests` module, and a call through it from
    another thread while the client works, are untouched and unrecorded."""
    import threading

    import evalai.utils.submissions as client
    import requests

    from repro.submit.evalai import Connection, _client_session

    original = requests.get
    conn = Connection(stub.url, TOKEN)
    url = f"{stub.url}/api/challenges/challenge/830/challenge_phase"
    elsewhere: dict = {}

    def other_thread() -> None:
        elsewhere["get"] = requests.get
        elsewhere["status"] = requests.get(url, headers=conn.headers, timeout=30).status_code

    with _client_session(conn) as (recorder, _):
        assert client.requests.get is not original and client.requests.exceptions is requests.exceptions
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(60)
        client.requests.get(url, headers=conn.headers)
    assert elsewhere == {"get": original, "status": 200}
    assert requests.get is original and client.requests is requests
    assert [(c.method, c.url) for c in recorder.calls] == [("GET", url)]
    assert len(stub.calls("GET", "/api/challenges/challenge/830/challenge_phase")) == 2
