"""`repro attention --device`: checked like `repro run --device`, and the family draws the maps with the unit's
device set (`RunContext.device`, and `use_device` for whatever the family builds)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from repro.cli import app
from repro.errors import ReproError

ARGS = ["attention", "mcan-pa-table5-ablation", "--row", "MCAN+PA (ours)", "--question", "6003", "-o", "a.png"]


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """The family's attention hook replaced by one that records the device it is given, then stops."""
    import dataclasses

    from repro import families
    from repro.families import base
    from repro.train import distributed

    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    got: dict[str, object] = {}

    def attention(ctx, question):
        got.update(ctx=ctx.device, requested=distributed._requested, question=question)
        raise ReproError("stub: maps not drawn")

    real = families.for_row
    monkeypatch.setattr(families, "for_row", lambda row: dataclasses.replace(real(row), attention=attention))
    monkeypatch.setattr(base, "with_data", lambda ctx: ctx)
    return got


def test_device_reaches_the_family_and_is_reset_after(seen):
    from repro.train import distributed

    result = CliRunner().invoke(app, [*ARGS, "--device", "cpu"])
    assert result.exit_code != 0 and "stub: maps not drawn" in result.output
    assert seen == {"ctx": "cpu", "requested": "cpu", "question": 6003}
    assert distributed._requested is None


def test_no_device_means_auto(seen):
    CliRunner().invoke(app, ARGS)
    assert seen["ctx"] is None and seen["requested"] is None


def test_bad_device_is_one_line(seen):
    result = CliRunner().invoke(app, [*ARGS, "--device", "gpu0"])
    assert result.exit_code != 0 and not seen
    assert "--device gpu0: not a device" in result.output and "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_cuda_without_a_gpu_is_refused_before_anything_runs(seen):
    result = CliRunner().invoke(app, [*ARGS, "--device", "cuda:0"])
    assert result.exit_code != 0 and not seen
    assert "no CUDA GPU on this machine" in result.output
