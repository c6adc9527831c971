"""Local parts of `repro submit`: the target catalog, pre-flight checks, files, records, configuration."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.errors import ReproError
from repro.submit import SubmitOptions, _is_large
from repro.submit.check import (
    PredictionFormat,
    check_coverage,
    get_target,
    load_targets,
    preflight,
    read_predictions,
    write_upload_file,
)
from repro.submit.evalai import Connection, resolve_connection
from repro.submit.records import add_record, read_records, records_path, update_record

VQA = PredictionFormat("question_id", int, "answer")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def vqa_questions(sandbox: Path, ids) -> Path:
    return write(
        sandbox / "data" / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json",
        json.dumps({"questions": [{"question_id": i, "question": "?"} for i in ids]}),
    )


# --- catalog ----------------------------------------------------------------------------------


def test_catalog_matches_the_published_challenges():
    targets = load_targets()
    assert {"vqa2-test-dev", "vqa2-test-std", "textvqa-test", "gqa-test-dev", "gqa-test"} <= set(targets)
    assert (targets["vqa2-test-dev"].challenge, targets["vqa2-test-dev"].phase) == (830, 1793)
    assert targets["vqa2-test-std"].challenge == 830 and targets["vqa2-test-std"].phase_names
    assert targets["textvqa-test"].challenge == 874 and targets["gqa-test"].challenge == 225
    # VQA v2 requires all of test2015 even for test-dev; GQA all of submission_all_questions
    assert targets["vqa2-test-dev"].questions.path == targets["vqa2-test-std"].questions.path
    assert targets["vqa2-test-dev"].questions.path.endswith("v2_OpenEnded_mscoco_test2015_questions.json")
    assert targets["gqa-test-dev"].questions.path == "gqa/submission_all_questions.json"
    assert targets["gqa-test"].prediction == PredictionFormat("questionId", str, "prediction")
    for name in ("vqa1-test", "stvqa-test", "nlvr2-test-u"):
        assert not targets[name].on_evalai and "{file}" in targets[name].instructions


def test_malformed_catalog_names_the_target(tmp_path):
    path = write(tmp_path / "targets.yaml", "broken:\n  title: x\n  server: evalai\n")
    with pytest.raises(ReproError, match=r"targets.yaml: target broken: malformed"):
        load_targets(path)


# --- reading and checking -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty file"),
        ("question_id,answer\n1,yes\n", "not JSON"),
        ('[{"question_id": 1, "answer": "yes"},\n {"question_id": 2 "answer": "no"}]', r"p.json:2:\d+: not valid JSON"),
        ('{"question_id": 1, "answer": "yes"}\n{"question_id": 2, "answer": }\n', r"p.json:2: not valid JSON lines"),
    ],
)
def test_unreadable_predictions_say_where(tmp_path, text, message):
    with pytest.raises(ReproError, match=message):
        read_predictions(write(tmp_path / "p.json", text))


def test_json_lines_are_read_with_their_kind(tmp_path):
    entries, kind = read_predictions(
        write(tmp_path / "p.jsonl", '{"question_id": 1, "answer": "a"}\n\n{"question_id": 2, "answer": "b"}\n')
    )
    assert kind == "lines" and [e["question_id"] for e in entries] == [1, 2]


def test_malformed_entries_are_counted(sandbox):
    vqa_questions(sandbox, range(10))
    records = [{"question_id": i, "answer": "a"} for i in range(10)]
    for r in records[3:6]:
        del r["answer"]
    path = write(sandbox / "p.json", json.dumps(records))
    with pytest.raises(ReproError) as info:
        preflight(get_target("vqa2-test-dev"), path)
    assert str(info.value).startswith(f"{path}: entry 4 has no 'answer'")
    assert "(3 entries like this)" in str(info.value)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 29)), st.sets(st.integers(0, 29)), st.sets(st.integers(100, 120)))
def test_coverage_reports_exactly_what_is_wrong(dropped, doubled, unknown):
    required = set(range(30))
    ids = [i for i in range(30) if i not in dropped] + [i for i in doubled if i not in dropped] + sorted(unknown)
    records = [{"question_id": i, "answer": "a"} for i in ids]
    doubled -= dropped
    if not (dropped or doubled or unknown):
        check_coverage(records, VQA, required, Path("p.json"), "test2015")
        return
    with pytest.raises(ReproError) as info:
        check_coverage(records, VQA, required, Path("p.json"), "test2015")
    message = str(info.value)
    assert (f"{len(dropped)} of 30 test2015 questions missing" in message) == bool(dropped)
    assert (f"{len(doubled)} duplicate question_ids" in message) == bool(doubled)
    assert (f"{len(unknown)} question_ids not in test2015" in message) == bool(unknown)
    if dropped:
        quoted = re.search(r"missing \(e\.g\. ([\d, ]+)\)", message).group(1)
        assert {int(x) for x in quoted.split(", ")} <= dropped


def test_extra_keys_are_dropped_into_a_converted_file(sandbox):
    vqa_questions(sandbox, range(4))
    source = write(
        sandbox / "preds.json",
        json.dumps([{"question_id": i, "answer": "a", "image_id": 9, "pred_source": "ocr"} for i in range(4)]),
    )
    check = preflight(get_target("vqa2-test-dev"), source)
    assert "dropped" in check.converted
    assert not (sandbox / "preds.vqa2-test-dev.json").exists()  # checking writes nothing
    out = write_upload_file(check)
    assert out == sandbox / "preds.vqa2-test-dev.json"
    assert json.loads(out.read_text()) == [{"question_id": i, "answer": "a"} for i in range(4)]
    assert check.size == out.stat().st_size
    assert [p.name for p in sandbox.iterdir() if p.name.startswith(".")] == []  # no temp files left


def test_a_clean_array_is_sent_as_is(sandbox):
    vqa_questions(sandbox, range(4))
    source = write(sandbox / "preds.json", json.dumps([{"question_id": i, "answer": "a"} for i in range(4)]))
    check = preflight(get_target("vqa2-test-dev"), source)
    assert not check.converted and write_upload_file(check) == source


def test_size_limit_and_upload_path(sandbox):
    vqa_questions(sandbox, range(200))
    source = write(sandbox / "p.json", json.dumps([{"question_id": i, "answer": "yes"} for i in range(200)]))
    target = get_target("vqa2-test-dev")
    check = preflight(target, source)
    opts = SubmitOptions(target.name, source)
    assert not _is_large(check, opts) and _is_large(check, dataclasses.replace(opts, large=True))
    small_direct = dataclasses.replace(target, direct_upload_max_mb=check.size / 2 / 1024 / 1024)
    assert _is_large(preflight(small_direct, source), opts)
    tiny = dataclasses.replace(target, max_file_mb=check.size / 2 / 1024 / 1024)
    with pytest.raises(ReproError, match="over the server's .* limit; nothing sent"):
        preflight(tiny, source)


def test_question_ids_are_cached_until_the_file_changes(sandbox, cache):
    source = write(sandbox / "p.json", json.dumps([{"question_id": i, "answer": "a"} for i in range(5)]))
    qfile = vqa_questions(sandbox, range(5))
    assert preflight(get_target("vqa2-test-dev"), source).question_count == 5
    (cached,) = (cache / "repro" / "question-ids").iterdir()
    assert json.loads(cached.read_text())["ids"] == [0, 1, 2, 3, 4]
    vqa_questions(sandbox, range(6))  # the file changes: the cache is not trusted
    os.utime(qfile, ns=(1, 1))
    with pytest.raises(ReproError, match="1 of 6 test2015 questions missing"):
        preflight(get_target("vqa2-test-dev"), source)


def test_question_file_of_the_wrong_kind(sandbox):
    write(sandbox / "data" / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json", json.dumps({"data": []}))
    source = write(sandbox / "p.json", json.dumps([{"question_id": 1, "answer": "a"}]))
    with pytest.raises(ReproError, match="no 'questions' with 'question_id' in it; is it the test2015 question file"):
        preflight(get_target("vqa2-test-dev"), source)
    other = write(sandbox / "q.json", json.dumps({"questions": [{"question_id": 1}]}))
    assert preflight(get_target("vqa2-test-dev"), source, questions=other).question_count == 1


# --- records ------------------------------------------------------------------------------------


def test_records_are_appended_and_updated_whole(sandbox):
    add_record({"submission_id": 1, "host": "h", "status": "submitted"})
    add_record({"submission_id": 2, "host": "h", "status": "submitted"})
    update_record(1, "h", status="finished", result=[{"test-dev": {"overall": 70.1}}])
    update_record(1, "other-host", status="failed")
    assert [(r["submission_id"], r["status"]) for r in read_records()] == [(1, "finished"), (2, "submitted")]
    assert sorted(p.name for p in records_path().parent.iterdir()) == ["submissions.jsonl", "submissions.jsonl.lock"]


_APPENDER = """
import sys
from repro.submit.records import add_record
for n in range(int(sys.argv[2])):
    add_record({"submission_id": n, "host": sys.argv[1]})
"""


def test_two_processes_appending_at_once_lose_no_record(sandbox):
    import subprocess

    count = 40
    workers = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, host, str(count)], env=os.environ.copy())
        for host in ("a", "b")
    ]
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    written = read_records()
    assert len(written) == 2 * count
    for host in ("a", "b"):  # each process's records all there, in its own order
        assert [r["submission_id"] for r in written if r["host"] == host] == list(range(count))


def test_a_records_lock_held_too_long_is_one_line(sandbox, monkeypatch):
    from filelock import FileLock

    import repro.submit.records as records

    monkeypatch.setattr(records, "LOCK_TIMEOUT_S", 0.2)
    records_path().parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(records_path()) + ".lock"):
        with pytest.raises(ReproError, match=r"another repro submit still holds .*submissions.jsonl.lock after 0.2 s"):
            add_record({"submission_id": 1, "host": "h"})
    assert read_records() == []


def test_corrupt_records_file_is_one_line(sandbox):
    write(records_path(), '{"submission_id": 1}\n{oops\n')
    with pytest.raises(ReproError, match=r"submissions.jsonl:2: not a JSON record"):
        read_records()


# --- configuration ------------------------------------------------------------------------------


def test_connection_follows_the_clients_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("EVALAI_API_URL", "http://env.example:8000/")
    write(tmp_path / ".evalai" / "token.json", json.dumps({"token": "abc"}))
    assert resolve_connection() == Connection("http://env.example:8000", "abc")
    write(tmp_path / ".evalai" / "host_url", "http://file.example:9000")
    assert resolve_connection().host == "http://file.example:9000"
    other = write(tmp_path / "other.json", json.dumps({"token": "xyz"}))
    conn = resolve_connection("https://eval.ai", str(other))
    assert conn == Connection("https://eval.ai", "xyz")
    assert "xyz" not in repr(conn) and "xyz" not in str(conn)
    assert resolve_connection(token="literal").token == "literal"
    with pytest.raises(ReproError, match="not an http"):
        resolve_connection("ftp://x")
    (tmp_path / ".evalai" / "token.json").write_text("[]")
    with pytest.raises(ReproError, match=r"token.json: no \"token\" string"):
        resolve_connection()


def test_missing_client_is_one_line(monkeypatch):
    from repro.submit.evalai import _import_client

    monkeypatch.setitem(sys.modules, "evalai.utils.common", None)  # as if the client were not installed
    with pytest.raises(ReproError, match=r"evalai client is not importable .*pip install --no-deps evalai==1.3.18"):
        _import_client()
