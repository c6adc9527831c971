"""A library's log handler made while a test's CLI runner held the streams must not write into that closed stream
later (a logging error, with its traceback, in a later test's output; tests/conftest.py binds it first)."""

import importlib.util
import logging

import pytest
import typer
from typer.testing import CliRunner

# found, not imported: importing transformers here would bind its handler outside the runner, as the fix does
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")

app = typer.Typer()


@app.command()
def log_once() -> None:
    from transformers.utils import logging as transformers_logging

    transformers_logging.get_logger("transformers.repro_test").warning("a library log line")


def test_a_library_log_line_after_an_earlier_runner_raises_no_logging_error(monkeypatch):
    assert CliRunner().invoke(app, []).exit_code == 0  # the first log line of the process may be this one
    failed = []
    monkeypatch.setattr(logging, "raiseExceptions", True)
    monkeypatch.setattr(logging.Handler, "handleError", lambda self, record: failed.append(record.getMessage()))
    out = CliRunner().invoke(app, [])
    assert out.exit_code == 0
    assert failed == [] and "Logging error" not in out.output
