"""Hostile input, round 2: the EvalAI token, waits without end, special files, duplicates, Slurm
options, validation that changes numbers (each test fails on the code before these fixes)."""

from __future__ import annotations

import html
import json
import os
from urllib.parse import quote

import pytest

from repro.submit.evalai import Connection, _Recorder
from repro.terminal import printable
from tests import test_submit as _submit_tests
from tests.evalai_stub import EvalAIStub
from tests.test_submit import TOKEN, one_line, submit, vqa_predictions, vqa_questions

home, stub = _submit_tests.home, _submit_tests.stub  # the fixtures of tests/test_submit.py

# --- 1. the EvalAI token -----------------------------------------------------------------------------


@pytest.fixture
def other_host():
    """A second server (another port: another origin) that logs whether the token reached it."""
    server = EvalAIStub(TOKEN).start()
    yield server
    server.stop()


def test_a_next_link_to_another_host_is_not_followed(runner, sandbox, stub, other_host):
    stub.answer["/api/challenges/challenge/830/challenge_phase"] = (
        200,
        {"count": 9, "next": f"{other_host.url}/api/challenges/challenge/830/challenge_phase?page=2", "results": []},
    )
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--yes")
    assert result.exit_code == 1
    line = one_line(result)
    assert "another host" in line and "not followed" in line
    assert not [c for c in other_host.log if c.authorized]
    assert not stub.calls("POST")


def test_client_calls_to_another_host_go_without_the_token(stub, other_host):
    import evalai.utils.submissions as client

    conn = Connection(stub.url, TOKEN)
    with _Recorder(conn.host, (client,)):
        client.requests.get(f"{other_host.url}/api/jobs/submission/1", headers=conn.headers)
        client.requests.get(f"{stub.url}/api/jobs/submission/1", headers=conn.headers)
    assert [c.authorized for c in other_host.log] == [False]
    assert [c.authorized for c in stub.log] == [True]


@pytest.mark.parametrize("loop", ["self", "cycle", "endless"])
def test_pagination_that_never_ends_is_cut(runner, sandbox, stub, loop):
    base = "/api/challenges/challenge/830/challenge_phase"
    if loop == "self":
        stub.answer[base] = (200, {"next": f"{stub.url}{base}", "results": []})
    elif loop == "cycle":
        stub.answer[base] = (200, {"next": f"{stub.url}{base}?page=2", "results": []})
        stub.answer[f"{base}?page=2"] = (200, {"next": f"{stub.url}{base}", "results": []})
    else:
        for n in range(200):
            stub.answer[f"{base}?page={n}" if n else base] = (200, {"next": f"{stub.url}{base}?page={n + 1}"})
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-std", "-p", str(preds), "--yes")
    assert result.exit_code == 1
    assert "phase list" in one_line(result)
    assert len(stub.calls("GET", base)) <= 51


ECHOES = {
    "partial": TOKEN[5:17],
    "lower-cased": TOKEN.upper().lower()[3:20].upper(),
    "html-entity": "".join(f"&#{ord(c)};" for c in TOKEN),
    "html-hex-entity": "".join(f"&#x{ord(c):x};" for c in TOKEN[:12]),
    "twice-url-encoded": quote(quote(TOKEN, safe="").replace("-", "%2D"), safe=""),
    "url-encoded-every-char": "".join(f"%{ord(c):02x}" for c in TOKEN),
    "html-escaped-twice": html.escape("".join(f"&#{ord(c)};" for c in TOKEN)),
    "json-unicode": "".join(f"\\u{ord(c):04x}" for c in TOKEN[2:14]),
}


def _leaks(text: str) -> list[str]:
    """Runs of >= 6 token characters in `text` after decoding it every way a server may encode."""
    from urllib.parse import unquote

    decoded = text
    for _ in range(3):
        decoded = html.unescape(unquote(decoded))
    decoded = decoded.encode().decode("unicode_escape", errors="ignore").lower()
    low = TOKEN.lower()
    return [low[k : k + 6] for k in range(len(low) - 5) if low[k : k + 6] in decoded]


@pytest.mark.parametrize("form", sorted(ECHOES))
def test_every_echo_of_the_token_is_redacted(form):
    echoed = ECHOES[form]
    assert _leaks(echoed), "the echo must carry the token for the test to mean anything"
    text = Connection("http://h", TOKEN).redact(f"error: bad token {echoed} given")
    assert not _leaks(text), text
    assert text.startswith("error: bad token ") and text.endswith(" given")


@pytest.mark.parametrize("form", ["partial", "html-entity", "twice-url-encoded"])
def test_server_echo_of_the_token_never_reaches_the_terminal(runner, sandbox, stub, form):
    stub.fail["submit"] = (403, {"detail": f"Invalid token {ECHOES[form]}"})
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 1
    assert not _leaks(result.output + result.stderr)


ESCAPES = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]2;title\x1b\\\x9b31m\x1bc\x07\x00"


def test_printable_drops_escape_sequences_and_controls():
    assert printable(f"a{ESCAPES}b\nc") == "ab c"
    assert printable(f"l1\x1b[31m\nl2{ESCAPES}", one_line=False) == "l1\nl2"


def test_server_text_is_printed_without_escape_sequences(runner, sandbox, stub):
    stub.fail["submit"] = (400, {"detail": f"bad{ESCAPES}request"})
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 1
    assert "badrequest" in one_line(result)
    assert not any(c in result.output + result.stderr for c in "\x1b\x07\x00\x9b")


def test_a_failed_jobs_stderr_is_printed_without_escape_sequences(runner, sandbox, stub):
    stub.outcome = "failed"
    stub.stderr_text = f"Traceback\nKeyError: {ESCAPES}'answer'\n"
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait")
    assert result.exit_code == 1
    (kept,) = (sandbox / "results" / "submissions").glob("*.stderr.txt")  # the server's log: in a file, not printed
    assert "KeyError:" in kept.read_text() and str(kept) in result.stderr
    assert not any(c in result.output + result.stderr for c in "\x1b\x07\x00\x9b")


def test_a_result_with_escape_sequences_is_printed_plain(runner, sandbox, stub):
    stub.result = [{f"test{ESCAPES}-dev": {"overall": f"71.0{ESCAPES}5"}}]
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait")
    assert result.exit_code == 0, result.output
    assert "71.0" not in result.output  # text where a number belongs is no number: only the file holds it
    assert "the server's result file:" in result.output
    assert not any(c in result.output + result.stderr for c in "\x1b\x07\x00\x9b")


# --- 2. no wait without end --------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["phase", "submit", "poll"])
def test_a_server_trickling_bytes_is_cut_at_the_deadline(runner, sandbox, stub, monkeypatch, route):
    monkeypatch.setenv("REPRO_EVALAI_DEADLINE_S", "1")
    stub.trickle[route] = 0.2  # a byte every 0.2 s: each read is quick, the answer never ends in time
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes", "--wait", "--poll", "0.01")
    assert result.exit_code == 1
    assert "within 1 s" in one_line(result) and "REPRO_EVALAI_DEADLINE_S" in result.stderr


def test_the_evalai_deadline_setting_is_checked(runner, sandbox, stub, monkeypatch):
    monkeypatch.setenv("REPRO_EVALAI_DEADLINE_S", "nan")
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / "p.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 2 and "REPRO_EVALAI_DEADLINE_S" in one_line(result)


def _download_entry(tmp_path, monkeypatch, url: str, sha256: str | None = None):
    from tests.test_download import entry_for

    files = [{"url": url, **({"sha256": sha256} if sha256 else {})}]
    return entry_for(tmp_path, monkeypatch, "net", files)


@pytest.mark.parametrize("stall", ["silent", "mute", "trickle"])
def test_a_stalling_download_ends_within_its_settings(tmp_path, monkeypatch, stall):
    from repro.data.download import FetchOptions, download_dataset
    from repro.errors import ReproError
    from tests._loopback import FileServer

    monkeypatch.setenv("REPRO_DOWNLOAD_TIMEOUT_S", "0.5")
    monkeypatch.setenv("REPRO_DOWNLOAD_MIN_RATE", "100")
    monkeypatch.setenv("REPRO_DOWNLOAD_DEADLINE_S", "2")
    options = FetchOptions.from_env()
    assert (options.timeout, options.min_rate, options.deadline) == (0.5, 100, 2)
    options.backoff = 0.1
    with FileServer({"/f.bin": b"x" * 5000}) as server:
        getattr(server, stall)["/f.bin"] = 0.05 if stall == "trickle" else 30.0
        entry = _download_entry(tmp_path, monkeypatch, server.url("/f.bin"))
        with pytest.raises(ReproError) as info:
            download_dataset(entry, tmp_path / "data", options=options)
    assert "\n" not in str(info.value) and info.value.exit_code == 1
    if stall == "trickle":
        assert "REPRO_DOWNLOAD_MIN_RATE" in str(info.value)
        assert 0 < server.sent["/f.bin"] < 5000
        assert len(server.gets("/f.bin")) == 1  # a mirror too slow is not tried again


def test_download_settings_are_checked(monkeypatch):
    from repro.data.download import FetchOptions
    from repro.errors import ReproError

    monkeypatch.setenv("REPRO_DOWNLOAD_TIMEOUT_S", "-1")
    with pytest.raises(ReproError, match="REPRO_DOWNLOAD_TIMEOUT_S"):
        FetchOptions.from_env()


def test_a_redirect_without_location_is_an_error_not_an_empty_file(tmp_path, monkeypatch):
    from repro.data.download import download_dataset
    from repro.errors import ReproError
    from tests._loopback import FileServer

    with FileServer({}) as server:
        server.redirects["/r.bin"] = None
        entry = _download_entry(tmp_path, monkeypatch, server.url("/r.bin"))
        with pytest.raises(ReproError, match="without a Location"):
            download_dataset(entry, tmp_path / "data")
    folder = tmp_path / "data" / "net"
    assert not (folder / "r.bin").exists()
    record = folder / ".repro-verified.json"
    assert not record.exists() or "r.bin" not in record.read_text()  # no digest recorded


def test_offline_download_is_one_line_within_seconds(runner, tmp_path, monkeypatch):
    from repro.cli import app

    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    url = "http://repro-test.invalid/vqa.zip"
    _download_entry(tmp_path, monkeypatch, url, "0" * 64)
    result = runner.invoke(app, ["download", "net"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert url in line and "does not resolve" in line and "--catalog" in line and "by hand" in line


# --- Slurm: hung commands, garbage sacct, injected options -------------------------------------------

SLURM_WORDS = ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--launcher", "slurm"]


@pytest.fixture
def cluster(sandbox, monkeypatch):
    from tests import test_launch_slurm

    yield from test_launch_slurm.cluster.__wrapped__(sandbox, monkeypatch)


def _replace_command(cluster, name: str, script: str) -> None:
    path = cluster / "bin" / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def _units_json(cluster) -> None:
    root = cluster / "data" / "runs" / "slurm" / "mcan-pa-table5-ablation" / "smoke"
    root.mkdir(parents=True)
    unit = {"row": "MCAN", "seed": 0, "job_id": "1000_0", "stdout": "o", "stderr": "e"}
    unit |= {"submitted": "2020-01-01T00:00:00+00:00", "resources": {}}
    (root / "units.json").write_text(json.dumps({"units": [unit]}))


def test_a_hung_sbatch_ends_at_the_slurm_timeout(cluster, runner, monkeypatch):
    monkeypatch.setenv("REPRO_SLURM_TIMEOUT_S", "1")
    _replace_command(cluster, "sbatch", "exec sleep 30")
    result = runner.invoke(app_(), SLURM_WORDS)
    assert result.exit_code == 2
    line = one_line(result)
    assert "`sbatch` did not answer within 1 s" in line and "REPRO_SLURM_TIMEOUT_S" in line


@pytest.mark.parametrize(
    "script, fragment",
    [
        ("exec sleep 30", "did not answer within 1 s"),
        ("echo 'garbage|x'; echo '1|2'", "not its job table: 'garbage|x 1|2'"),
        ("printf 'JobID|Other\\n1000_0|x\\n'", "not its job table"),
    ],
)
def test_a_hung_or_garbage_sacct_is_one_line(cluster, runner, monkeypatch, script, fragment):
    monkeypatch.setenv("REPRO_SLURM_TIMEOUT_S", "1")
    _units_json(cluster)
    _replace_command(cluster, "sacct", script)
    result = runner.invoke(app_(), ["run", "table5-ablation", "--scale", "smoke", "--status"])
    assert result.exit_code == 2
    line = one_line(result)
    assert "`sacct -o JobID,State,NodeList" in line and fragment in line
    assert "KeyError" not in line and "internal error" not in line


@pytest.mark.parametrize(
    "words",
    [
        ["--slurm-opt", "comment=a\n#SBATCH --wrap=rm -rf ~"],
        ["--slurm-opt", "comment=a\x00b"],
        ["--slurm-opt", "comment=\x1b[2J"],
        ["--partition", "debug\nhostname"],
        ["--account", "a\rb"],
    ],
)
def test_slurm_options_with_newlines_or_controls_are_refused(cluster, runner, words):
    result = runner.invoke(app_(), [*SLURM_WORDS, *words])
    assert result.exit_code == 2
    assert "control characters" in one_line(result)
    assert not list((cluster / "slurm-state").glob("*.sh"))  # nothing reached sbatch


def test_slurm_option_values_reach_the_script_quoted(cluster, runner):
    result = runner.invoke(app_(), [*SLURM_WORDS, "--slurm-opt", "comment=a b;$(touch x)"])
    assert result.exit_code == 0, result.output
    (script,) = (cluster / "slurm-state").glob("*.sh")
    assert "#SBATCH --comment='a b;$(touch x)'\n" in script.read_text()


def app_():
    from repro.cli import app

    return app


# --- 3. inputs of repro eval: regular files only, capped -------------------------------------------


@pytest.fixture
def eval_files(tmp_path):
    gold, preds = tmp_path / "g.json", tmp_path / "p.json"
    gold.write_text('[{"question_id": 1, "answer": "a"}, {"question_id": 2, "answer": "b"}]')
    preds.write_text('[{"question_id": 1, "answer": "a"}, {"question_id": 2, "answer": "c"}]')
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return gold, preds, fifo


@pytest.mark.parametrize(
    "which, special, kind",
    [
        ("-p", "fifo", "a FIFO"),
        ("-a", "fifo", "a FIFO"),
        ("-p", "/dev/zero", "a character device"),
        ("-a", "/dev/zero", "a character device"),
    ],
)
def test_eval_refuses_special_files_without_reading_them(runner, eval_files, which, special, kind):
    gold, preds, fifo = eval_files
    path = str(fifo) if special == "fifo" else special
    words = {"-a": str(gold), "-p": str(preds)}
    words[which] = path
    args = [arg for pair in words.items() for arg in pair]
    result = runner.invoke(app_(), ["eval", "-m", "accuracy", *args, "--json"])
    assert result.exit_code == 2
    line = one_line(result)
    assert path in line and kind in line and "not a regular file" in line


def test_eval_refuses_a_special_file_as_score_matrices(runner, eval_files):
    gold, _, fifo = eval_files
    result = runner.invoke(app_(), ["eval", "-m", "recall", "-a", str(gold), "-p", str(fifo)])
    assert result.exit_code == 2 and "a FIFO" in one_line(result)


def test_eval_inputs_are_capped_at_the_documented_size(runner, eval_files, monkeypatch):
    gold, preds, _ = eval_files
    monkeypatch.setenv("REPRO_EVAL_MAX_BYTES", "40")
    result = runner.invoke(app_(), ["eval", "-m", "accuracy", "-a", str(gold), "-p", str(preds)])
    assert result.exit_code == 2
    assert "over the 40 bytes" in one_line(result) and "REPRO_EVAL_MAX_BYTES" in result.stderr
    monkeypatch.setenv("REPRO_EVAL_MAX_BYTES", "1000")
    result = runner.invoke(app_(), ["eval", "-m", "accuracy", "-a", str(gold), "-p", str(preds), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["accuracy"] == 50.0


# --- 4. duplicates; 6. spec values that change numbers -----------------------------------------------


@pytest.mark.parametrize(
    "words, fragment",
    [
        (["--rows", "MCAN,MCAN"], "--rows names 'MCAN' more than once"),
        (["--rows", "MCAN, MCAN ,MCAN+PE"], "--rows names 'MCAN' more than once"),
        (["--rows", "MCAN", "--seeds", "0,0"], "names a seed twice"),
        (["--rows", "MCAN", "--seeds", "1,2,1"], "names a seed twice"),
    ],
)
def test_duplicate_rows_or_seeds_are_refused(runner, sandbox, words, fragment):
    import shutil

    from repro.paths import REPO_DIR

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    result = runner.invoke(app_(), ["run", "table5-ablation", "--scale", "smoke", *words, "-j", "2", "--force"])
    assert result.exit_code == 2
    assert fragment in one_line(result)
    assert not (sandbox / "data" / "runs").exists()  # nothing trained


def _spec_with(sandbox, old: str, new: str):
    from tests.conftest import SPEC_TEXT, write_spec

    assert old in SPEC_TEXT
    return write_spec(sandbox, SPEC_TEXT.replace(old, new))


CLAIM = "claims:\n  - {text: t, row: Ours*, over: Ours*, column: All}\n"


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        ("tolerance: {default: 0.5, All: 0.25}", "tolerance: {default: .inf}", "finite non-negative"),
        ("tolerance: {default: 0.5, All: 0.25}", "tolerance: {default: .nan}", "finite non-negative"),
        ("tolerance: {default: 0.5, All: 0.25}", "tolerance: {default: -1}", "finite non-negative"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {tolerance: {All: .inf}}", "finite non-negative"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: [0, 1, 0]}", "seeds names 0 more than once"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: [abc]}", "a seed is an integer"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: [99999999999]}", "a seed is an integer"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: [-1]}", "a seed is an integer"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: [1.5]}", "a seed is an integer"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: [true]}", "a seed is an integer"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {seeds: []}", "no seed"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {jobs: 0}", "jobs is a positive integer"),
        ("smoke: {tolerance: {default: 0.1}}", "smoke: {jobs: two}", "jobs is a positive integer"),
        ("scales:\n", CLAIM + "scales:\n", "over itself"),
    ],
)
def test_spec_values_that_change_numbers_are_refused(runner, sandbox, old, new, fragment):
    _spec_with(sandbox, old, new)
    result = runner.invoke(app_(), ["list"])
    assert result.exit_code == 2, result.output
    assert "t1-demo.yaml:" in result.output and fragment in result.output
    assert "Traceback" not in result.output


def _gqa(tmp_path, flags: list) -> tuple:
    gold = {
        f"q{i}": {"answer": "yes", "types": {"structural": "verify"}, **({} if f is None else {"isBalanced": f})}
        for i, f in enumerate(flags)
    }
    preds = [{"questionId": f"q{i}", "prediction": "yes" if i == 0 else "no"} for i in range(len(flags))]
    (tmp_path / "gq.json").write_text(json.dumps(gold))
    (tmp_path / "gp.json").write_text(json.dumps(preds))
    return str(tmp_path / "gq.json"), str(tmp_path / "gp.json")


@pytest.mark.parametrize(
    "flags, fragment",
    [
        ([True, "false"], "isBalanced must be true or false, got 'false'"),
        ([True, 0], "isBalanced must be true or false"),
        ([False, False], "no question has isBalanced true"),
    ],
)
def test_gqa_balanced_flags_are_booleans_and_some_must_be_true(runner, tmp_path, flags, fragment):
    gold, preds = _gqa(tmp_path, flags)
    result = runner.invoke(app_(), ["eval", "-m", "gqa", "-a", gold, "-p", preds, "--json"])
    assert result.exit_code == 2
    assert fragment in one_line(result)


def test_gqa_counts_only_balanced_questions(runner, tmp_path):
    gold, preds = _gqa(tmp_path, [True, False, None])  # absent: balanced, as in a *_balanced_* file
    result = runner.invoke(app_(), ["eval", "-m", "gqa", "-a", gold, "-p", preds, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["overall"] == 50.0


def test_gqa_function_refuses_no_balanced_question():
    from repro.errors import ReproError
    from repro.metrics import gqa

    with pytest.raises(ReproError, match="none of the 2 questions is balanced"):
        gqa.evaluate(["a", "b"], ["a", "b"], [1, 2], ["verify", "query"], [False, False])


@pytest.mark.parametrize("digits", ["-1", "-3", "16"])
def test_eval_round_out_of_range_is_refused(runner, eval_files, digits):
    gold, preds, _ = eval_files
    result = runner.invoke(app_(), ["eval", "-m", "accuracy", "-a", str(gold), "-p", str(preds), "--round", digits])
    assert result.exit_code == 2 and "--round takes 0 to 15 digits" in one_line(result)


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("recipe.grad_clip=.nan", "must be a finite number"),
        ("recipe.grad_clip=.inf", "must be a finite number"),
        ("recipe.lr=-0.1", "must not be negative"),
        ("generator.train_images=-1", "must not be negative"),
        ("sizes.d_model=-8", "must not be negative"),
    ],
)
def test_overrides_that_change_numbers_silently_are_refused(runner, sandbox, override, fragment):
    import shutil

    from repro.paths import REPO_DIR

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    words = ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--dry-run", override]
    result = runner.invoke(app_(), words)
    assert result.exit_code == 2
    line = one_line(result)
    assert line.startswith(f"error: {override}") and fragment in line
