"""At a generated scale the plan says what a seed costs: each unit's record keeps the CPU seconds of the process that
trained it, and `repro run --dry-run` reads them back per row (the median of the row's stored seeds of the same
configuration), adds up the seeds still to train and the design's seeds, and divides by this machine's cores."""

from __future__ import annotations

import json
import os

from repro.cli import app
from repro.report.plan import cpu_cell, cpu_lines, seed_cpu_seconds
from repro.run import make_plan
from repro.specs import resolve


def _record(root):
    (path,) = (root / "results").rglob("Sighted.smoke.seed0.json")
    return path, json.loads(path.read_text())


def test_a_unit_keeps_its_cpu_time_and_the_plan_reads_it_back(toy_family, runner, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # a lone seed takes every core as threads
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0"])
    assert out.exit_code == 0, out.output
    _, record = _record(toy_family)
    assert 0 < record["cpu_time_s"]
    plan = make_plan(resolve("toy-table1"), "smoke", ["Blind", "Sighted"], [0, 1])
    blind, sighted = plan.steps
    assert seed_cpu_seconds(sighted) == (record["cpu_time_s"], True) and seed_cpu_seconds(blind) is None
    assert cpu_cell(sighted) == f"{record['cpu_time_s'] / 60:.1f}" and cpu_cell(blind) == "–"
    todo, source = cpu_lines(plan)  # the toy spec has no design: no line of the design's seeds
    cores = len(os.sched_getaffinity(0))
    minutes = record["cpu_time_s"] / 60
    assert todo == (
        f"CPU time of the seeds to train: about {minutes:.0f} CPU-minutes for 1 seed(s), {minutes / cores:.0f} "
        f"minutes on {cores} cores; no stored seed of this configuration to go by for Blind"
    )
    assert "≤" not in source
    dry = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1", "--dry-run"])
    assert "CPU-min/seed" in dry.output and "CPU time of the seeds to train" in dry.output


def test_the_wall_time_is_on_the_cores_the_runs_processes_can_keep_busy(toy_family, runner, monkeypatch):
    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"]).exit_code == 0
    _, record = _record(toy_family)
    minutes = record["cpu_time_s"] / 60
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})  # four cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [1])
    three = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [1, 2, 3])
    # one seed of one thread keeps one core busy, whatever -j says; three seeds two at a time keep two
    assert f"{minutes:.0f} minutes on 1 of 4 cores" in cpu_lines(one, jobs=2)[0]
    assert f"{3 * minutes / 2:.0f} minutes on 2 of 4 cores" in cpu_lines(three, jobs=2)[0]
    assert f"{3 * minutes / 3:.0f} minutes on 3 of 4 cores" in cpu_lines(three, jobs=4)[0]
    together = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [1, 2, 3], ensemble=True)  # one process
    assert f"{3 * minutes:.0f} minutes on 1 of 4 cores" in cpu_lines(together, jobs=2)[0]
    monkeypatch.delenv("OMP_NUM_THREADS")  # each of two processes takes half the cores as threads
    assert f"{3 * minutes / 4:.0f} minutes on 4 cores" in cpu_lines(three, jobs=2)[0]
    dry = runner.invoke(
        app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "1", "--dry-run"]
    )
    assert "minutes on 4 cores" in " ".join(dry.output.split())  # a lone seed takes every core


def test_a_record_without_cpu_time_gives_an_upper_bound_from_its_wall_time(toy_family, runner):
    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"]).exit_code == 0
    path, record = _record(toy_family)
    del record["cpu_time_s"]  # as records made before it was kept
    record["wall_time_s"], record["environment"]["threads"] = 30.0, 2
    path.write_text(json.dumps(record))
    (sighted,) = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [0, 1]).steps
    assert seed_cpu_seconds(sighted) == (60.0, False) and cpu_cell(sighted) == "≤1.0"
    assert "≤: their wall time x threads, an upper bound" in cpu_lines(make_plan(sighted.units[0].spec, "smoke"))[-1]


def test_only_seeds_of_the_same_configuration_count(toy_family, runner):
    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"]).exit_code == 0
    path, record = _record(toy_family)
    record["config_hash"] = "another"
    path.write_text(json.dumps(record))
    (sighted,) = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [0]).steps
    assert seed_cpu_seconds(sighted) is None
    # nothing to go by: the plan says so, not "about 0 CPU-minutes for 0 seed(s)"
    (line, _, changed) = cpu_lines(make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [1]))
    assert line == "CPU time of the seeds to train: unknown: no stored seed of this configuration to go by for Sighted"
    # what the seed of the other configuration took is said beside the total, not added into it
    assert changed == (
        f"Sighted: 1 stored seed(s) of another configuration took about {record['cpu_time_s'] / 60:.1f} CPU-minutes "
        "a seed; this one differs in nothing the record kept"
    )


def test_a_changed_setting_is_named_with_what_the_seeds_before_it_took(toy_family, runner):
    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"]).exit_code == 0
    path, record = _record(toy_family)
    epochs = record["config"]["recipe"]["epochs"]
    record["config"]["recipe"]["epochs"] = epochs + 7  # as if the spec's schedule had changed since it ran
    record["config"]["settings"]["gone"] = {"size": 3}
    record["config_hash"], record["cpu_time_s"] = "before", 90.0
    path.write_text(json.dumps(record))
    todo, _, changed = cpu_lines(make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [0]), force=True)
    assert todo == "CPU time of the seeds to train: unknown: no stored seed of this configuration to go by for Sighted"
    assert changed == (
        "Sighted: 1 stored seed(s) of another configuration took about 1.5 CPU-minutes a seed; this one differs in "
        f"recipe.epochs ({epochs + 7} → {epochs}), settings.gone.size (3 → unset)"
    )


def test_seeds_stored_on_another_processor_are_named_in_the_plan(toy_family, runner):
    """A seed's CPU time depends on the processor (a Table 2 unit took 2.5 times the CPU time of its row's earlier
    seeds on another), so a plan whose times come from seeds run elsewhere names their processor beside this one's."""
    from repro.results import cpu_model

    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"]).exit_code == 0
    plan = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [1])
    assert cpu_lines(plan)[-1] == "(from each row's stored seeds of this configuration, on the machine that ran them)"
    path, record = _record(toy_family)
    record["environment"]["hardware"]["cpu"] = "Another Processor 9000"
    path.write_text(json.dumps(record))
    plan = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [1])
    here = cpu_model()
    assert cpu_lines(plan)[-1] == (
        "(from each row's stored seeds of this configuration, on the machine that ran them: 1 seed(s) on Another "
        f"Processor 9000, not this machine's {here})"
    )
    assert (
        runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "1"]).exit_code
        == 0
    )
    plan = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [2])  # one seed from each
    assert cpu_lines(plan)[-1].endswith(
        f"machines that ran them: 1 seed(s) on Another Processor 9000, 1 seed(s) on this machine's {here})"
    )


def test_a_seed_that_read_its_training_from_the_store_does_not_count(toy_family, runner):
    assert runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"]).exit_code == 0
    path, record = _record(toy_family)
    record["training"] = {**(record.get("training") or {}), "reused": True}  # it only evaluated a stored network
    path.write_text(json.dumps(record))
    (sighted,) = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [0]).steps
    assert seed_cpu_seconds(sighted) is None and cpu_cell(sighted) == "–"


def test_with_force_the_stored_seeds_count_as_seeds_to_train(toy_family, runner):
    assert (
        runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0"]).exit_code
        == 0
    )
    _, record = _record(toy_family)
    plan = make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [0, 1])
    minutes = record["cpu_time_s"] / 60
    assert f"{minutes:.0f} CPU-minutes for 1 seed(s)" in cpu_lines(plan)[0]  # seed 0 is stored: only seed 1 trains
    assert f"{2 * minutes:.0f} CPU-minutes for 2 seed(s)" in cpu_lines(plan, force=True)[0]  # --force retrains seed 0
    dry = runner.invoke(
        app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0,1"] + ["--force", "--dry-run"]
    )
    assert "for 2 seed(s)" in " ".join(dry.output.split())


def test_a_plan_of_rows_no_claim_compares_says_nothing_of_the_designs_seeds():
    line = "the design's "  # ... seeds of each row the claims compare
    alone = make_plan(resolve("ace-rpe-table2-pe"), "synthetic", ["ACE-RPE + Lace*"], [0])  # cited by no claim
    assert not any(text.startswith(line) for text in cpu_lines(alone))
    compared = make_plan(resolve("ace-rpe-table2-pe"), "synthetic", ["None", "ACE-RPE + Lace*"], [0])
    assert any(text.startswith(line) for text in cpu_lines(compared))


def test_claims_on_a_time_column_send_the_plan_to_the_timing_run_not_to_the_seeds():
    plan = make_plan(resolve("psac-control-vpsa-cost"), "synthetic")  # four time claims, no other
    lines = cpu_lines(plan)
    assert not any(text.startswith("the design's ") for text in lines)  # no seed judges them
    assert lines[-1] == (
        "4 claim(s) on a time column are judged from `repro run psac-control-vpsa-cost --scale synthetic --timing` "
        "(both rows' steps interleaved in one process), not from these seeds; 4 of their 4 timing record(s) were "
        "measured under this design"
    )
