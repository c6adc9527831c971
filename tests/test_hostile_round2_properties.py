"""Property tests over the inputs of hostile round 2: whatever the value, each command ends with its answer or
one line saying what is wrong, never the boundary's catch-all `(internal error; ...)` or a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repro.cli import app
from repro.errors import ReproError
from repro.launch import slurm
from repro.submit.evalai import Connection
from repro.terminal import printable

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)


def clean(result) -> None:
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "internal error" not in text and "Traceback" not in text, text
    assert result.exit_code in (0, 1, 2), text
    if result.exit_code:
        assert len([line for line in result.stderr.splitlines() if line.startswith("error:")]) == 1, text


# --- repro eval: annotations, predictions, --round -----------------------------------------------


@FAST
@given(
    flag=scalars,
    answer=json_values,
    prediction=json_values,
    structural=json_values,
    digits=st.one_of(st.none(), st.integers(-20, 20)),
)
def test_eval_gqa_inputs_never_reach_the_catch_all(runner, tmp_path, flag, answer, prediction, structural, digits):
    gold = {"q1": {"answer": answer, "types": {"structural": structural}, "isBalanced": flag}}
    gold["q2"] = {"answer": "yes", "types": {"structural": "verify"}}
    (tmp_path / "g.json").write_text(json.dumps(gold))
    (tmp_path / "p.json").write_text(
        json.dumps([{"questionId": "q1", "prediction": prediction}, {"questionId": "q2", "prediction": "no"}])
    )
    words = ["eval", "-m", "gqa", "-a", str(tmp_path / "g.json"), "-p", str(tmp_path / "p.json"), "--json"]
    result = runner.invoke(app, words + ([] if digits is None else ["--round", str(digits)]))
    clean(result)
    if result.exit_code == 0:
        assert isinstance(flag, bool) or flag is None  # a non-boolean isBalanced is never scored
        assert digits is None or 0 <= digits <= 15


@FAST
@given(gold=json_values, preds=json_values, metric=st.sampled_from(["accuracy", "vqa", "anls", "mse", "textvqa"]))
def test_eval_any_json_never_reaches_the_catch_all(runner, tmp_path, gold, preds, metric):
    (tmp_path / "g.json").write_text(json.dumps(gold))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    clean(runner.invoke(app, ["eval", "-m", metric, "-a", str(tmp_path / "g.json"), "-p", str(tmp_path / "p.json")]))


# --- spec files: tolerance, seeds, jobs, claims -------------------------------------------------------


@FAST
@given(tolerance=scalars, seeds=st.one_of(scalars, st.lists(scalars, max_size=4)), jobs=scalars, over=scalars)
def test_spec_settings_never_reach_the_catch_all(runner, sandbox, tolerance, seeds, jobs, over):
    from repro.specs import parse_spec
    from tests.conftest import SPEC_TEXT, write_spec

    text = SPEC_TEXT.replace("tolerance: {default: 0.5, All: 0.25}", f"tolerance: {{default: {json.dumps(tolerance)}}}")
    smoke = f"smoke: {{seeds: {json.dumps(seeds)}, jobs: {json.dumps(jobs)}}}"
    claim = f"claims:\n  - {{text: t, row: Ours*, over: {json.dumps(over)}, column: All}}\n"
    text = text.replace("smoke: {tolerance: {default: 0.1}}", smoke).replace("scales:\n", claim + "scales:\n")
    path = write_spec(sandbox, text)
    try:
        parse_spec(path)
    except ReproError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
        return
    # every value accepted is one that cannot change numbers silently
    assert isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool) and 0 <= tolerance < float("inf")
    assert isinstance(seeds, list) and len(set(seeds)) == len(seeds) > 0
    assert all(type(s) is int and 0 <= s < 2**31 for s in seeds)
    assert type(jobs) is int and jobs >= 1
    assert over == "Cited"


# --- overrides --------------------------------------------------------------------------------------


@pytest.fixture
def table5(sandbox):
    from repro.paths import REPO_DIR

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    return sandbox


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(
        ["recipe.grad_clip", "recipe.lr", "recipe.epochs", "generator.train_images", "sizes.d_model", "model.fusion"]
    ),
    value=st.one_of(
        st.sampled_from([".nan", ".inf", "-.inf", "-1", "-0.5", "1e400", "[1, .nan]", "null", "~", "'x'", "[]"]),
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=10),
    ),
)
def test_overrides_never_reach_the_catch_all(runner, table5, key, value):
    if not value.strip():
        value = "x"
    result = runner.invoke(
        app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--dry-run", f"{key}={value}"]
    )
    clean(result)
    assert not (result.exit_code == 0 and value.strip() in (".nan", ".inf", "-.inf", "-1", "-0.5", "1e400"))


# --- Slurm: options and sacct's answer ------------------------------------------------------------


@FAST
@given(text=st.text(max_size=30))
def test_slurm_options_are_accepted_only_without_control_characters(text):
    try:
        options = slurm.SlurmOptions.parse(partition=text or None, options=[f"comment={text}", text or "x"])
    except ReproError as exc:
        assert "\n" not in str(exc).replace("\\n", "")
        return
    for value in [options.partition, *options.extra.keys(), *options.extra.values()]:
        if isinstance(value, str):
            assert not any(unicodedata.category(c) == "Cc" and ord(c) < 0x80 for c in value)


class _Watcher:
    """What `slurm._sacct` uses of submitit's watcher."""

    def __init__(self) -> None:
        import submitit

        self._real = submitit.slurm.slurm.SlurmInfoWatcher()
        self._info_dict: dict = {}

    def _make_command(self) -> list[str]:
        return ["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", "1000"]

    def read_info(self, text):
        return self._real.read_info(text)


@FAST
@given(output=st.one_of(st.text(max_size=80), st.binary(max_size=80).map(lambda b: b.decode("latin-1"))))
def test_any_sacct_output_is_a_table_or_one_line(monkeypatch, output):
    done = subprocess.CompletedProcess(["sacct"], 0, stdout=output.encode("utf-8", "surrogateescape"), stderr=b"")
    monkeypatch.setattr(slurm.subprocess, "run", lambda *a, **k: done)
    watcher = _Watcher()
    try:
        slurm._sacct(watcher)
    except ReproError as exc:
        message = str(exc)
        assert message.startswith("`sacct -o JobID,State,NodeList") and "\n" not in message
        assert printable(message) == message
        return
    assert all("State" in v for v in watcher._info_dict.values())


# --- server text: redaction and printing ----------------------------------------------------------

TOKEN = "e4b1c9d0a7f3428b9c6d1e2f3a4b5c6d7e8f9a0b"


def _encodings(piece: str) -> st.SearchStrategy[str]:
    from urllib.parse import quote

    return st.sampled_from(
        [
            piece,
            piece.upper(),
            quote(piece, safe=""),
            "".join(f"%{ord(c):02X}" for c in piece),
            "".join(f"%25{ord(c):02x}" for c in piece),
            "".join(f"&#{ord(c)};" for c in piece),
            "".join(f"&#x{ord(c):X};" for c in piece),
            "".join(f"&amp;#{ord(c)};" for c in piece),
            "".join(f"\\u{ord(c):04x}" for c in piece),
        ]
    )


@FAST
@given(data=st.data(), start=st.integers(0, len(TOKEN) - 6), length=st.integers(6, len(TOKEN)))
def test_any_echo_of_six_token_characters_is_redacted(data, start, length):
    from tests.test_hostile_round2 import _leaks

    piece = TOKEN[start : start + length]
    if len(piece) < 6:
        return
    before = data.draw(st.text(alphabet="xyz !:<>\"'", max_size=10))
    after = data.draw(st.text(alphabet="xyz !:<>\"'", max_size=10))
    echoed = data.draw(_encodings(piece))
    text = Connection("http://h", TOKEN).redact(f"{before}{echoed}{after}")
    assert not [gram for gram in _leaks(text) if gram in TOKEN.lower()], text


@FAST
@given(text=st.text(max_size=60))
def test_printable_leaves_no_control_character(text):
    out = printable(text)
    assert not any(unicodedata.category(c) == "Cc" for c in out), repr(out)
    assert "\x1b" not in printable(text, one_line=False)


def test_the_properties_see_the_real_catch_all(runner, tmp_path, monkeypatch):
    """`clean` would notice the boundary's catch-all: an unexpected exception still ends in it."""
    from repro.cli import evaluate

    def boom(*args, **kwargs):
        raise KeyError("JobID")

    monkeypatch.setattr(evaluate, "evaluate_with_progress", boom)
    (tmp_path / "g.json").write_text("[]")
    result = runner.invoke(
        app, ["eval", "-m", "accuracy", "-a", str(tmp_path / "g.json"), "-p", str(tmp_path / "g.json")]
    )
    with pytest.raises(AssertionError):
        clean(result)
