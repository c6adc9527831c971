"""A unit resumed after a stop records the seconds of every process that trained it (`repro.train.spent`): each
checkpoint save writes what the unit has spent so far beside it, a resumed unit starts its clock from there, and a
fresh start does not."""

from __future__ import annotations

import json

import pytest

from repro.cli import app
from repro.errors import ReproError
from repro.train import spent
from tests.toy_family import family as toy


def _record(root):
    (path,) = (root / "results").rglob("Sighted.smoke.seed0.json")
    return json.loads(path.read_text())


def _stopped_after_training(toy_family, runner, monkeypatch):
    """`repro run` of Sighted seed 0, stopped after its last checkpoint (its scoring fails): the unit's ledger."""

    def stop(*args, **kwargs):
        raise ReproError("stopped here")

    with monkeypatch.context() as patch:
        patch.setattr(toy, "score", stop)
        out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0"])
    assert out.exit_code != 0 and "stopped here" in out.output
    (ledger,) = toy_family.rglob(spent.LEDGER)
    return ledger


def test_a_resumed_unit_counts_the_seconds_before_its_last_checkpoint(toy_family, runner, monkeypatch):
    ledger = _stopped_after_training(toy_family, runner, monkeypatch)
    first = json.loads(ledger.read_text())
    assert first["cpu_s"] > 0 and first["wall_s"] > 0  # written by the checkpoint save
    ledger.write_text(json.dumps({"wall_s": 2000.0, "cpu_s": 1000.0}))  # as a long first process would leave it
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0", "--resume"])
    assert out.exit_code == 0, out.output
    record = _record(toy_family)
    assert 1000.0 < record["cpu_time_s"] < 1000.0 + 600 and 2000.0 < record["wall_time_s"] < 2000.0 + 600


def test_a_fresh_start_does_not_count_an_earlier_run(toy_family, runner, monkeypatch):
    ledger = _stopped_after_training(toy_family, runner, monkeypatch)
    ledger.write_text(json.dumps({"wall_s": 2000.0, "cpu_s": 1000.0}))
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0", "--force"])
    assert out.exit_code == 0, out.output
    record = _record(toy_family)
    assert 0 < record["cpu_time_s"] < 1000.0 and record["wall_time_s"] < 2000.0
    assert json.loads(ledger.read_text())["cpu_s"] < 1000.0  # the new run's own


@pytest.mark.parametrize("text", ["", "{", '{"wall_s": "x", "cpu_s": 1}', '{"wall_s": -5, "cpu_s": 1}', "[1, 2]"])
def test_a_ledger_that_is_not_one_counts_nothing_and_stops_nothing(tmp_path, text):
    (tmp_path / spent.LEDGER).write_text(text)
    assert spent.earlier(tmp_path) == (0.0, 0.0)
    with spent.unit_clock([tmp_path], resume=True) as clock:
        assert clock.now()[1] < 60


def test_outside_a_unit_a_checkpoint_save_writes_no_ledger(tmp_path):
    from functools import partial

    from torch import nn, optim

    from repro.train.checkpoint import save_checkpoint

    model = nn.Linear(2, 2)
    save = partial(save_checkpoint, tmp_path / "last.pt", model=model, epoch=0, step=0, step_in_epoch=0)
    save(optimizer=optim.SGD(model.parameters(), 0.1))
    assert not (tmp_path / spent.LEDGER).exists()
    with spent.unit_clock([tmp_path / "unit"], resume=False):
        save(optimizer=optim.SGD(model.parameters(), 0.1))
    assert json.loads((tmp_path / "unit" / spent.LEDGER).read_text())["cpu_s"] >= 0
