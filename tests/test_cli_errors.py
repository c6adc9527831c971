"""The CLI's error boundary: one line and an exit code, a traceback only when asked for."""

from __future__ import annotations

import pytest

from repro import specs
from repro.cli import app


def _boom(*args, **kwargs):
    raise RuntimeError("something unforeseen")


def _disk_full(*args, **kwargs):
    raise OSError(28, "No space left on device", "/data/x.part")


@pytest.mark.parametrize(
    "failure, code, text",
    [(_boom, 1, "internal error: something unforeseen"), (_disk_full, 2, "/data/x.part: No space left on device")],
)
def test_unexpected_and_system_failures_are_one_line(demo_spec, runner, monkeypatch, failure, code, text):
    monkeypatch.setattr(specs, "load_all", failure)
    out = runner.invoke(app, ["list"])
    assert out.exit_code == code and text in out.output and "Traceback" not in out.output
    assert "Error" not in out.output  # no exception class name without --debug
    assert len([line for line in out.output.splitlines() if line.strip()]) == 1


def test_debug_shows_the_traceback(demo_spec, runner, monkeypatch):
    monkeypatch.setattr(specs, "load_all", _boom)
    monkeypatch.setenv("REPRO_DEBUG", "0")  # restored after the test: --debug sets it for the process
    out = runner.invoke(app, ["--debug", "list"])
    assert isinstance(out.exception, RuntimeError)


def test_check_fails_when_its_folders_do_not_exist(sandbox, runner, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(sandbox / "nope"))
    out = runner.invoke(app, ["check"])
    assert out.exit_code == 2 and "no such results folder" in out.output
    monkeypatch.setenv("REPRO_RESULTS", str(sandbox / "results"))
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(sandbox / "nope"))
    specs.clear_cache()
    out = runner.invoke(app, ["check"])
    assert out.exit_code == 2 and "no such experiments folder" in out.output


def test_help_has_a_short_option(runner):
    out = runner.invoke(app, ["-h"])
    assert out.exit_code == 0 and "Usage" in out.output
