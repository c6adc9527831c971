"""`python -m benchmarks.bench_synthetic`'s arithmetic and its meter (benchmarks.step_profile) on a tiny model: what
is counted and how a short run is extrapolated; no speed is asserted."""

from __future__ import annotations

import pytest
import torch

from benchmarks.bench_synthetic import ROWS, scheduled_cpu, seed_cost, summary
from benchmarks.step_profile import PHASES, Meter, matmul_flops, steady_rate
from repro.families import load_recipe
from repro.train.distributed import use_device
from repro.train.ready import ready_tensors
from tests.test_train_ensemble import NO_DROPOUT, new_model
from tests.test_train_resume import RECIPE
from tests.tiny_vqa import TinyVQA


@pytest.fixture(autouse=True)
def _one_cpu_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with use_device("cpu"):
        yield
    torch.set_num_threads(threads)


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    return load_recipe(str(path))


def test_every_family_has_a_row_ace_rpe_that_of_table_1():
    assert set(ROWS) == {"mcan-pa", "dsganet", "sa-m4c", "psac", "ace-rpe"}
    assert ROWS["ace-rpe"] == ("ace-rpe-table1-pe", "ACE-RPE")


@pytest.mark.parametrize("family", sorted(ROWS))
def test_the_benchmarks_contexts_are_the_units_with_the_familys_hooks_and_the_stages_cut_short(family, tmp_path):
    from benchmarks.bench_synthetic import contexts
    from repro import families

    spec_id, row = ROWS[family]
    ctxs = contexts(spec_id, row, [0, 1], tmp_path, steps=7)
    assert [c.seed for c in ctxs] == [0, 1] and all(c.scale == "synthetic" for c in ctxs)
    assert all(c.hooks is families.for_row(c.row) and c.hooks is not None for c in ctxs)  # what run_units calls
    assert ctxs[0].settings["recipe"]["max_steps"] == 7  # every recipe the unit loads (RunContext.recipe)


def test_every_named_recipe_of_a_scale_is_cut_short_too(tmp_path):
    from benchmarks.bench_synthetic import contexts

    (ctx,) = contexts("ace-rpe-table2-pe", "ACE-RPE", [0], tmp_path, steps=7)  # pre-training, tasks, assignment
    named = {k: v for k, v in ctx.settings.items() if k.endswith("recipe")}
    assert set(named) == {"recipe", "pretrain_recipe", "task_recipe", "assign_recipe"}
    assert all(v["max_steps"] == 7 for v in named.values())
    assert named["task_recipe"]["epochs"] == 80  # the rest of the scale's recipe kept


def test_a_short_run_is_extrapolated_per_step_to_each_stages_schedule():
    # two stages: 10 of 100 steps in 2 s, 5 of 5 in 1 s; 4 s of the process outside them
    result = {
        "stages": [
            {"cpu_s": 2.0, "steps": 10, "full_steps": 100, "seeds": 1},
            {"cpu_s": 1.0, "steps": 5, "full_steps": 5, "seeds": 1},
        ]
    }
    cost = seed_cost(result, 7.0)
    assert cost["outside_training_cpu_s"] == pytest.approx(4.0)
    assert cost["training_cpu_s"] == pytest.approx(20.0 + 1.0)
    assert cost["cpu_s"] == pytest.approx(25.0) and cost["extrapolated"]
    assert cost["full_steps"] == 105


def test_the_steps_not_run_count_at_the_steady_rate_of_the_last_half_not_the_mean_with_the_first_steps():
    # 8 steps: the first costs 5 s (one-time work), the others 1 s each; 100 in the schedule
    marks = [5.0 + k for k in range(8)]
    assert steady_rate(marks) == pytest.approx(1.0) and steady_rate(marks[:3]) is None
    stage = {"cpu_s": 12.0, "steps": 8, "full_steps": 100, "steady_cpu_s_per_step": steady_rate(marks)}
    assert scheduled_cpu(stage) == pytest.approx(12.0 + 92 * 1.0)  # not 12 / 8 * 100 = 150
    assert scheduled_cpu({**stage, "steady_cpu_s_per_step": None}) == pytest.approx(150.0)  # under 4 steps: the mean
    assert scheduled_cpu({**stage, "steps": 100}) == pytest.approx(12.0)  # a whole schedule: as measured


def test_seeds_per_cpu_minute_together_against_alone():
    alone = [{"cpu_s": 30.0, "training_cpu_s": 20.0, "full_steps": 100, "outside_training_cpu_s": 10.0}] * 2
    alone = [{**a, "extrapolated": False} for a in alone]
    together = {"cpu_s": 100.0, "training_cpu_s": 80.0, "full_steps": 100, "outside_training_cpu_s": 20.0}
    s = summary("x", {"alone": alone, "together": together, "seeds": 10})
    assert s["seeds_per_cpu_minute_alone"] == pytest.approx(2.0)
    assert s["seeds_per_cpu_minute_together"] == pytest.approx(6.0)
    assert s["ratio"] == pytest.approx(3.0)
    assert s["training_ratio"] == pytest.approx(0.2 / 0.08)


def test_two_units_at_once_against_two_threads_with_or_without_the_costs():
    parallel = {"jobs2": {"wall_s": 50.0, "cpu_s": 98.0}, "threads2": {"wall_s": 60.0, "cpu_s": 110.0}}
    only = summary("x", {"alone": [], "parallel": parallel, "seeds": 10})  # --parallel-only
    assert only == {"family": "x", "jobs2_over_threads2": pytest.approx(1.2), "faster": "-j 2"}
    slower = {**parallel, "jobs2": {"wall_s": 80.0, "cpu_s": 150.0}}
    assert summary("x", {"alone": [], "parallel": slower, "seeds": 10})["faster"] == "2 threads"


def test_matmul_flops_count_a_multiply_add_as_two():
    mm, bmm = torch.ops.aten.mm.default, torch.ops.aten.bmm.default
    assert matmul_flops(mm, [(3, 4), (4, 5)]) == 2 * 3 * 4 * 5
    assert matmul_flops(torch.ops.aten.addmm.default, [(5,), (3, 4), (4, 5)]) == 2 * 3 * 4 * 5
    assert matmul_flops(bmm, [(2, 3, 4), (2, 4, 5)]) == 2 * 2 * 3 * 4 * 5


@pytest.mark.slow
def test_the_meter_records_each_stage_alone_and_together_and_profiles_it(tmp_path, recipe):
    import repro.train
    import repro.train.ensemble

    data = ready_tensors(TinyVQA(40))
    r = recipe.replace(epochs=4, max_steps=3)  # 5 steps an epoch: 20 in the schedule, 3 run
    with Meter(profile=True) as meter:
        state = repro.train.fit(new_model(1), data, r, tmp_path / "alone", progress=False)
        models = [new_model(s, NO_DROPOUT) for s in (1, 2)]
        recipes = [r.replace(seed=s) for s in (1, 2)]
        repro.train.ensemble.fit_ensemble(models, data, recipes, [tmp_path / "a", tmp_path / "b"], progress=False)
    assert state.step == 3
    alone, together = meter.stages
    assert (alone["seeds"], together["seeds"]) == (1, 2)
    assert alone["steps"] == together["steps"] == 3 and alone["full_steps"] == 20
    assert alone["steady_cpu_s_per_step"] is None  # 3 steps: too few for a steady rate
    assert alone["flops_per_step"] > 0 and "flops_per_step" not in together  # a seed's work is the same together
    for stage in meter.stages:
        assert stage["cpu_s"] > 0 and stage["matmul_flops_per_s"] > 0 and stage["matmul_calls"] > 0
        profile = stage["profile"]
        assert profile["steps"] == 8 and profile["step_ms"] > 0
        assert set(profile["phases_ms"]) == set(PHASES) and all(v >= 0 for v in profile["phases_ms"].values())
        assert profile["phases_ms"]["forward"] > 0 and profile["phases_ms"]["backward"] > 0
        assert profile["phases_ms"]["data"] > 0 and profile["phases_ms"]["optimiser"] > 0
        assert sum(profile["phases_ms"].values()) <= profile["step_ms"] * 1.01
        assert 0 < profile["outside_ops_ms"] < profile["step_ms"]
    assert repro.train.fit.__module__ == "repro.train.trainer"  # the trainer's own again


def test_the_meter_times_each_step_and_still_calls_the_callers_on_step(tmp_path, recipe):
    import repro.train

    data = ready_tensors(TinyVQA(40))
    seen: list[int] = []
    with Meter() as meter:
        repro.train.fit(
            new_model(1), data, recipe.replace(epochs=2, max_steps=6), tmp_path, progress=False, on_step=seen.append
        )
    (stage,) = meter.stages
    assert seen == [1, 2, 3, 4, 5, 6] and stage["steps"] == 6
    assert 0 < stage["steady_cpu_s_per_step"] < stage["cpu_s"]


def test_a_stages_cpu_seconds_count_the_children_it_waited_for_such_as_a_compiler():
    import subprocess
    import sys
    import time

    from benchmarks.step_profile import cpu_seconds

    before, own = cpu_seconds(), time.process_time()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert cpu_seconds() - before >= 0.5 > time.process_time() - own
