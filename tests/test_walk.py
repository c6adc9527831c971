"""The walk from `repro run` to the training step stays short: the call stack at the first loss of
`repro run mcan-pa-table5-ablation` passes through the command, the local launcher, the unit, the family's
hooks, the shared `train_units` and the trainer, and nothing else of the toolkit."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from repro import specs
from repro.cli import app
from repro.paths import PACKAGE_DIR, REPO_DIR


class _AtTheStep(Exception):
    pass


def test_the_walk_from_repro_run_to_the_training_step_enters_at_most_8_files(sandbox, runner, monkeypatch):
    from repro.train import trainer

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir()
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    specs.clear_cache()
    stack: list[str] = []

    def at_the_step(*args, **kwargs):
        stack.extend(f.filename for f in inspect.stack() if Path(f.filename).is_relative_to(PACKAGE_DIR))
        raise _AtTheStep()

    monkeypatch.setattr(trainer, "compute_loss", at_the_step)  # the recipe's loss, as the trainer calls it
    runner.invoke(app, ["run", "mcan-pa-table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--seeds", "0"])
    files = list(dict.fromkeys(str(Path(f).relative_to(PACKAGE_DIR.parent)) for f in reversed(stack)))
    if not files:
        pytest.fail("the run never reached a training step")
    assert files[-1] == "repro/train/trainer.py" and "repro/families/base.py" in files, files
    assert len(files) <= 8, files
