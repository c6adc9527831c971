"""`repro run` and `repro train` build one RunRequest from their options: `train` passes its one row and its
one seed as they are (a row name with a comma trains), `run` splits --rows and --seeds at the commas."""

from __future__ import annotations

import json

import pytest

from repro.cli import app
from repro.cli import run as run_module
from tests.conftest import TOY_SPEC, write_spec


@pytest.fixture
def requests(monkeypatch) -> list:
    made = []
    monkeypatch.setattr(run_module, "run_request", made.append)
    return made


def test_train_asks_for_its_one_row_and_seed_as_given(runner, requests):
    out = runner.invoke(app, ["train", "table5-ablation", "--row", "A, B", "--seed", "7", "--scale", "smoke"])
    assert out.exit_code == 0, out.output
    (request,) = requests
    assert request.rows == ("A, B",) and request.seeds == (7,) and request.scale == "smoke"
    assert not request.dry_run and request.launcher == "local" and request.workdir is None


def test_run_splits_rows_and_seeds_at_commas(runner, requests):
    words = ["run", "table5-ablation", "--rows", "MCAN,MCAN+PWA", "--seeds", "0,2", "recipe.epochs=1", "--dry-run"]
    assert runner.invoke(app, words).exit_code == 0
    (request,) = requests
    assert request.rows == ("MCAN", "MCAN+PWA") and request.seeds == (0, 2) and request.dry_run
    assert request.overrides == ("recipe.epochs=1",) and request.slurm is None
    with pytest.raises(AttributeError):  # built once, read everywhere
        request.scale = "paper"


def test_train_refuses_a_seed_out_of_range_naming_its_option(runner, requests):
    out = runner.invoke(app, ["train", "table5-ablation", "--row", "MCAN", "--seed", "-1"])
    assert out.exit_code == 2 and "--seed must lie in" in out.output and requests == []


def test_a_row_whose_name_has_a_comma_trains(toy_family, runner):
    text = TOY_SPEC.replace("name: Blind", "name: 'Blind, no position'").replace(
        "over: Blind", "over: 'Blind, no position'"
    )
    write_spec(toy_family, text, paper="toy", ident="toy-table1")
    out = runner.invoke(app, ["train", "toy-table1", "--row", "Blind, no position", "--scale", "smoke", "--seed", "0"])
    assert out.exit_code == 0, out.output
    table = json.loads(runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "--format", "json"]).output)
    reproduced = {row["name"]: (row["reproduced"] or {}).get("Acc") for row in table["rows"]}
    assert reproduced["Blind, no position"] is not None and reproduced["Sighted"] is None
