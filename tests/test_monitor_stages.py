"""`repro run`'s progress for a unit that trains in stages (psac's tasks, each in a folder of the unit's workdir):
the unit's share done is its stages' fractions weighted by their planned work (`stages.json`), so the estimate
does not take the current stage for the whole unit."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from repro.monitor import RunMonitor, Unit, describe, unit_progress
from repro.train.stage_plan import read_stages, write_stages


def _log(folder, step, steps, epoch=1, epochs=2):
    folder.mkdir(parents=True, exist_ok=True)
    line = {"epoch": epoch, "epochs": epochs, "step": step, "steps": steps, "loss": 0.5}
    with open(folder / "train.jsonl", "a") as handle:
        handle.write(json.dumps(line) + "\n")


def test_a_staged_unit_counts_each_stage_by_its_weight(tmp_path):
    unit = tmp_path / "seed0"
    write_stages(unit, [("action", 100), ("transition", 300), ("frameqa", 50), ("count", 50)])
    assert read_stages(unit) == [("action", 100.0), ("transition", 300.0), ("frameqa", 50.0), ("count", 50.0)]
    started = 0.0  # every log counts as this run's (which logs do is `_since`'s, tested with the monitor)
    assert unit_progress(unit, started) == ({}, 0.0)
    _log(unit / "action", 100, 100, epoch=2)  # the first stage done
    _log(unit / "transition", 75, 300)  # a quarter of the second
    line, share = unit_progress(unit, started)
    assert share == pytest.approx((100 + 75) / 500)  # not 0.25, the current stage's own fraction
    assert line["stage"] == "transition" and describe(line).startswith("transition: epoch 1/2")


def test_a_unit_without_a_plan_is_its_newest_log(tmp_path):
    unit = tmp_path / "seed0"
    _log(unit, 5, 10)
    line, share = unit_progress(unit, 0.0)
    assert share == 0.5 and "stage" not in line and describe(line).startswith("epoch 1/2")
    (unit / "stages.json").write_text("{not json")  # an unreadable plan: the newest log, as without one
    assert unit_progress(unit, 0.0)[1] == 0.5
    write_stages(unit, [("a", 0.0)])  # no work planned: not a plan
    assert read_stages(unit) == []


def test_the_estimate_of_a_staged_unit_is_for_the_whole_unit(tmp_path):
    unit = tmp_path / "seed0"
    write_stages(unit, [("action", 1), ("transition", 3)])
    _log(unit / "action", 10, 10)  # the first stage's steps all done: a quarter of the unit
    console = Console(record=True, width=300, force_terminal=False)
    with RunMonitor(console, {("PSAC", 0): Unit("PSAC s0", unit)}, heartbeat_s=3600, load=lambda: None) as monitor:
        monitor.started = 0.0  # the log above counts as this run's, however long the machine took to get here
        monitor._refresh()
        assert monitor.fraction_done == pytest.approx(0.25)
        assert "PSAC s0: action: epoch 1/2" in monitor.status_line()
