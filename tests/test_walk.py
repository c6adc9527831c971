"""The walk from `repro run` to the training step stays short: the call stack at the first loss of
`repro run mcan-pa-table5-ablation` passes through the command, the local launcher, the unit, the family's
hooks, the shared `train_units`, the store of shared trainings and the trainer, and nothing else of the toolkit."""

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
    # a family whose rows share trainings (`Hooks.evaluation_fields`) also passes through the store's two files
    store = {"repro/shared_training.py", "repro/weights_store.py"}
    assert len([f for f in files if f not in store]) <= 8, files


def test_a_run_resolves_each_row_once_and_each_unit_once(sandbox, runner, monkeypatch):
    """From `run_request` to the first training step of `repro run mcan-pa-table5-ablation --scale synthetic`: the
    family table is asked for a row's hooks once per row, and the configuration that decides a unit's numbers is
    resolved once per row (its seeds share it; at most once per unit): the plan resolves them, the launcher and
    the report read the plan's units."""
    from repro import families, run
    from repro.train import trainer

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir()
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    specs.clear_cache()
    calls = {"for_row": [], "resolved_config": [], "steps": 0}
    real_for_row, real_resolved = families.for_row, run.resolved_config

    def for_row(row):
        calls["for_row"].append(row.name)
        return real_for_row(row)

    def resolved_config(spec, row, *args, **kwargs):
        calls["resolved_config"].append(row.name)
        return real_resolved(spec, row, *args, **kwargs)

    def at_the_step(*args, **kwargs):
        calls["steps"] += 1
        raise _AtTheStep()

    monkeypatch.setattr(families, "for_row", for_row)
    monkeypatch.setattr(run, "resolved_config", resolved_config)
    monkeypatch.setattr(trainer, "compute_loss", at_the_step)
    runner.invoke(app, ["run", "mcan-pa-table5-ablation", "--scale", "synthetic", "--seeds", "0,1", "-j", "1"])
    rows = [r.name for r in specs.resolve("mcan-pa-table5-ablation").runnable_rows]
    assert calls["steps"] == 1, "the run never reached a training step"
    assert sorted(calls["for_row"]) == sorted(rows), calls["for_row"]  # once per row, every row
    assert sorted(calls["resolved_config"]) == sorted(rows), calls["resolved_config"]  # 20 units, 10 rows
