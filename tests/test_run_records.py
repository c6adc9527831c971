"""Result records per (row, scale, seed): nothing silently overwritten, every unit kept as it finishes,
every record able to rebuild its run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import app
from repro.errors import ReproError
from repro.specs import resolve
from tests.conftest import TOY_SPEC, write_spec


def _record(sandbox, row="Sighted"):
    return json.loads((sandbox / "results" / "toy" / "toy-table1" / f"{row}.smoke.json").read_text())


def _run(runner, *args):
    return runner.invoke(
        app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", *args], env={"COLUMNS": "200"}
    )


def test_a_run_of_fewer_seeds_neither_replaces_the_others_nor_looks_like_a_regression(toy_family, runner):
    assert _run(runner, "--seeds", "0,1").exit_code == 0
    two = _record(toy_family)
    assert two["seeds"] == [0, 1] and len(two["extra"]["per_seed"]) == 2

    again = _run(runner, "--seeds", "0")
    assert (
        again.exit_code == 2 and "already has results for Sighted seed 0" in again.output and "--force" in again.output
    )
    assert _record(toy_family) == two

    assert _run(runner, "--seeds", "0", "--force").exit_code == 0
    replaced = _record(toy_family)
    assert replaced["seeds"] == [0, 1] and replaced["metrics"] == pytest.approx(two["metrics"])
    assert runner.invoke(app, ["check", "toy-table1"]).exit_code == 0

    assert _run(runner, "--seeds", "0,1,2", "--resume").exit_code == 0  # runs seed 2 only
    assert _record(toy_family)["seeds"] == [0, 1, 2]
    seeds = sorted(p.name for p in (toy_family / "results" / "toy" / "toy-table1" / "seeds").iterdir())
    assert seeds == ["Sighted.smoke.seed0.json", "Sighted.smoke.seed1.json", "Sighted.smoke.seed2.json"]


def test_each_unit_is_kept_as_soon_as_it_finishes(toy_family, runner, monkeypatch):
    import dataclasses

    from tests.toy_family import family

    real = family.run_row

    def crash_on_seed_2(ctx):
        if ctx.seed == 2:
            raise ReproError("the machine went away")
        return real(ctx)

    monkeypatch.setattr(family, "HOOKS", dataclasses.replace(family.HOOKS, run_row=crash_on_seed_2))
    out = _run(runner, "--seeds", "0,1,2,3")
    assert out.exit_code == 2 and "the machine went away" in out.output
    assert _record(toy_family)["seeds"] == [0, 1]


def test_a_record_holds_its_resolved_config_and_environment_and_lr_changes_the_hash(toy_family, runner):
    assert _run(runner, "--seeds", "0").exit_code == 0
    unit = json.loads(
        (toy_family / "results" / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json").read_text()
    )
    assert unit["config"]["model"] == {"arch": "toy", "hidden": 16, "use_position": True}
    assert unit["config"]["recipe"]["schedule"] == {"name": "constant", "base_lr": 0.05}
    env = unit["environment"]
    assert env["packages"]["torch"] and env["cpu_capability"] and "PyTorch version" in env["collect_env"]
    assert env["command"] and "commit" in env["git"] and unit["started"] <= unit["finished"]
    first_hash = unit["config_hash"]

    write_spec(
        toy_family,
        TOY_SPEC.replace(
            "smoke: {seeds: [0]}", "smoke: {seeds: [0], recipe: {schedule: {name: constant, base_lr: 0.01}}}"
        ),
        paper="toy",
        ident="toy-table1",
    )
    assert _run(runner, "--seeds", "0", "--force").exit_code == 0
    unit = json.loads(
        (toy_family / "results" / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json").read_text()
    )
    assert unit["config"]["recipe"]["schedule"]["base_lr"] == 0.01 and unit["config_hash"] != first_hash


def test_the_environment_names_no_folder_of_the_machine(monkeypatch):
    # collect_env on a GPU machine lists the cuDNN libraries it found by their absolute paths
    from torch.utils import collect_env

    from repro import results

    report = "cuDNN version: Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0\n"
    monkeypatch.setattr(collect_env, "get_pretty_env_info", lambda: report + "CPU op-mode(s): 32-bit, 64-bit\n")
    monkeypatch.setattr(results, "_ENVIRONMENT", None)
    text = results.environment()["collect_env"]
    assert "libcudnn.so.9.14.0" in text and "/usr/lib" not in text and "32-bit, 64-bit" in text


def test_repeated_or_out_of_range_seeds_are_refused(toy_family, runner):
    for seeds, message in (("0,0", "names a seed twice"), ("-1", "must lie in"), ("99999999999999", "must lie in")):
        out = _run(runner, "--seeds", seeds)
        assert out.exit_code == 2 and message in out.output and "Traceback" not in out.output


def test_older_records_that_kept_only_per_seed_metrics_are_read_as_seeds(tmp_path):
    import shutil

    from repro.paths import REPO_DIR
    from repro.results import read_seed_results

    table = Path("mcan-pa") / "mcan-pa-table5-ablation"
    shutil.copytree(REPO_DIR / "results" / table, tmp_path / table)
    for seed in (0, 1, 2):  # as an older version left them: in the row's record only, no seed record
        (tmp_path / table / "seeds" / f"MCAN.synthetic.seed{seed}.json").unlink()
    spec = resolve("table5-ablation", REPO_DIR / "experiments")
    seeds = read_seed_results(spec, spec.row("MCAN"), "synthetic", tmp_path)
    # seeds 0-2 ran before records were kept per seed: they are read back from the row's record
    committed = json.loads((tmp_path / table / "MCAN.synthetic.json").read_text())["seeds"]
    assert len(committed) > 3 and sorted(seeds) == sorted(committed)
    assert [s.seed for s in seeds.values() if s.legacy] == [0, 1, 2]
    assert all(s.extra["per_question_type"] for s in seeds.values())


def test_a_record_names_the_code_as_its_run_started_not_as_the_checkout_is_when_it_ends(
    toy_family, runner, monkeypatch
):
    """A long run whose checkout changes meanwhile (a commit, an edited file) records the state it started from."""
    import dataclasses

    import tests.toy_family.family as toy
    from repro import results

    state = {"commit": "a" * 40, "dirty": False, "changed": []}
    monkeypatch.setattr(results, "git_state", lambda: dict(state))
    monkeypatch.setattr(results, "_ENVIRONMENT", None)

    def run_row(ctx):
        state.update(commit="b" * 40, dirty=True, changed=["repro/edited_while_training.py"])
        return toy.run_row(ctx)

    monkeypatch.setattr(toy, "HOOKS", dataclasses.replace(toy.HOOKS, run_row=run_row))
    assert _run(runner, "--seeds", "0").exit_code == 0
    unit = json.loads(
        (toy_family / "results" / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json").read_text()
    )
    assert unit["environment"]["git"] == {"commit": "a" * 40, "dirty": False, "changed": []}
    assert unit["environment"]["git_commit"] == "a" * 40
