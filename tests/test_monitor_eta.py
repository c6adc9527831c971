"""`repro run`'s ETA counts the pace of training from when progress was first seen: a run that spent ten minutes
generating its data before its first step is not estimated as if every step were that slow (the clock is a fake
one here: no test reads the time)."""

from __future__ import annotations

import json

from rich.console import Console

from repro.monitor import RATE_AFTER_S, RunMonitor, Unit, eta


def _write(folder, step: int, steps: int = 100) -> None:
    line = {"epoch": 1, "epochs": 1, "step": step, "steps": steps, "loss": 0.5}
    (folder / "train.jsonl").write_text(json.dumps(line) + "\n")


def test_the_rate_is_measured_from_the_first_progress_not_from_the_start():
    assert eta(660, 0.11, 1, since=(600, 0.01)) == "ETA 0:08:54"  # 0.10 of the run in 60 s, 0.89 to go
    assert eta(660, 0.11, 1) == "ETA 1:29:00"  # counting the 600 s of start-up as training's pace
    assert eta(600 + RATE_AFTER_S - 1, 0.5, 1, since=(600, 0.01)) == "ETA –"  # watched too briefly to say
    assert eta(700, 0.01, 1, since=(600, 0.01)) == "ETA –"  # no progress since it was first seen


def test_a_run_with_a_long_start_up_gets_an_estimate_from_its_training(tmp_path):
    folder = tmp_path / "seed0"
    folder.mkdir()
    now = [0.0]
    units = {("MCAN", 0): Unit("MCAN s0", folder)}
    console = Console(record=True, width=300, force_terminal=False)
    with RunMonitor(console, units, heartbeat_s=3600, load=lambda: None, clock=lambda: now[0]) as monitor:
        now[0] = 600.0  # ten minutes of data generation: no log yet
        monitor._refresh()
        assert "0/1 units, 0:10:00 elapsed, ETA –]" in monitor.status_line()
        _write(folder, step=1)
        monitor._refresh()  # the first step: progress seen, too early for a rate
        assert "ETA –" in monitor.status_line()
        now[0] = 660.0
        _write(folder, step=11)
        monitor._refresh()
        assert "0:11:00 elapsed, ETA 0:08:54]" in monitor.status_line()  # 10 steps a minute, 89 to go


def _units(tmp_path, names: str) -> tuple[dict, dict]:
    """A folder and a unit (seed 0) for each name."""
    folders = {name: tmp_path / name for name in names}
    for folder in folders.values():
        folder.mkdir()
    return folders, {(name, 0): Unit(f"{name} s0", folder) for name, folder in folders.items()}


def _monitor(units: dict, now: list[float]) -> RunMonitor:
    console = Console(record=True, width=300, force_terminal=False)
    return RunMonitor(console, units, heartbeat_s=3600, load=lambda: None, clock=lambda: now[0])


def test_units_that_are_being_scored_get_the_pace_at_which_they_finish(tmp_path):
    """Once every unit left has trained, training's pace says nothing: the ETA read 0:00:00 for the quarter of an hour
    that beam search took. It is now the pace at which units have finished since only scoring was left (a row's
    seeds trained together are scored one after another)."""
    folders, units = _units(tmp_path, "abc")
    now = [0.0]
    with _monitor(units, now) as monitor:
        for folder in folders.values():
            _write(folder, step=50)
        monitor._refresh()
        now[0] = 100.0
        for folder in folders.values():
            _write(folder, step=100)
        monitor._refresh()  # all three trained: being scored, none finished yet
        assert "0/3 units, 0:01:40 elapsed, scoring, ETA –]" in monitor.status_line()
        now[0] = 160.0
        monitor.finished(("a", 0), {"All": 1.0}, 160.0, tmp_path / "a.json")  # one unit in 60 s
        assert "1/3 units, 0:02:40 elapsed, scoring, ETA 0:02:00]" in monitor.status_line()
        now[0] = 190.0
        monitor._refresh()
        assert "scoring, ETA 0:03:00]" in monitor.status_line()  # one unit in 90 s now, two left


def test_a_unit_still_training_keeps_the_pace_estimate(tmp_path):
    folders, units = _units(tmp_path, "ab")
    now = [0.0]
    with _monitor(units, now) as monitor:
        _write(folders["a"], step=10)
        _write(folders["b"], step=10)
        monitor._refresh()
        now[0] = 60.0
        _write(folders["a"], step=100)  # a is being scored, b still trains
        _write(folders["b"], step=40)
        monitor._refresh()
        assert "scoring" not in monitor.status_line().split("]")[0]
        assert "ETA 0:00:" in monitor.status_line()


def test_units_that_finish_without_training_do_not_speed_up_the_estimate(tmp_path):
    """A row's seeds read from a training shared with another row (or a stored seed) finish in seconds with no step
    of this run in their logs: counted as the pace of training, four of them made a 23-minute wait read 5 minutes."""
    folders, units = _units(tmp_path, "abcd")
    now = [1.0]
    with _monitor(units, now) as monitor:
        _write(folders["c"], step=1)  # c and d train: progress is first seen
        _write(folders["d"], step=1)
        monitor._refresh()
        now[0] = 3.0
        monitor.finished(("a", 0), {"Other": 42.0}, 3.0, tmp_path / "a.json")  # read from the store: no log
        monitor.finished(("b", 0), {"Other": 43.0}, 3.0, tmp_path / "b.json")
        assert monitor.untrained == 2
        now[0] = 63.0
        _write(folders["c"], step=11)
        _write(folders["d"], step=11)
        monitor._refresh()  # 0.2 of a unit in 62 s, 1.78 to go: 9:11 (counting a and b as trained: 0:00:50)
        assert "2/4 units, 0:01:02 elapsed, ETA 0:09:11]" in monitor.status_line()
        monitor.finished(("c", 0), {"Other": 90.0}, 63.0, tmp_path / "c.json")  # a unit that trained is not counted
        assert monitor.untrained == 2
