"""`python -m benchmarks.bench_compile`: the arithmetic of its comparison, and that the trainer's one wrapping place
is where it compiles; no speed is asserted."""

from __future__ import annotations

import pytest
import torch

from benchmarks import bench_compile
from benchmarks.bench_synthetic import ROWS
from repro.errors import ReproError
from repro.train.distributed import DistEnv, wrap


def _stage(cpu_s: float, steady: float, steps: int = 100, full: int = 1000) -> dict:
    return {"recipe": "r", "cpu_s": cpu_s, "steps": steps, "full_steps": full, "steady_cpu_s_per_step": steady}


def test_a_faster_compiled_step_pays_for_its_compilation_over_the_schedule():
    eager = _stage(cpu_s=5.5, steady=0.050)  # 0.5 s of first-step work beyond 100 steady steps
    compiled = _stage(cpu_s=63.0, steady=0.025)  # 60.5 s beyond them: 60 s of compiling
    out = bench_compile.compare(eager, compiled)
    assert out["eager_ms"] == pytest.approx(50) and out["compiled_ms"] == pytest.approx(25)
    assert out["step_ratio"] == pytest.approx(2.0)
    assert out["compile_s"] == pytest.approx(60.0)
    assert out["schedule_ratio"] == pytest.approx(50.0 / (25.0 + 60.0))  # the schedule: 1000 steps


def test_a_slower_compiled_step_never_pays_and_a_stage_without_a_steady_rate_counts_at_its_mean():
    eager = {**_stage(cpu_s=0.3, steady=0.1, steps=3), "steady_cpu_s_per_step": None}
    compiled = _stage(cpu_s=40.0, steady=0.2, steps=3)
    out = bench_compile.compare(eager, compiled)
    assert out["eager_ms"] == pytest.approx(100) and out["step_ratio"] == pytest.approx(0.5)
    assert out["compile_s"] == pytest.approx(39.4)
    assert out["schedule_ratio"] < 0.5


def test_it_compiles_the_module_the_trainer_steps_and_keeps_what_wrap_does():
    model = torch.nn.Linear(3, 2)
    one_process = DistEnv(rank=0, world_size=1, local_rank=0)
    compiled = bench_compile.compiling(wrap, dynamic=False)(model, one_process, torch.device("cpu"))
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    assert compiled._orig_mod is model


def test_it_measures_every_familys_row_or_those_asked_for_and_another_specs_row_by_name():
    assert bench_compile.chosen_rows(None, None) == {f: ROWS[f] for f in sorted(ROWS)}
    rows = bench_compile.chosen_rows(["psac"], ["ace-rpe-table2-pe:ACE-RPE"])
    assert rows == {"psac": ROWS["psac"], "ace-rpe-table2-pe: ACE-RPE": ("ace-rpe-table2-pe", "ACE-RPE")}
    assert list(bench_compile.chosen_rows(None, ["ace-rpe-table2-pe:ACE-RPE"])) == ["ace-rpe-table2-pe: ACE-RPE"]
    for bad in ("ace-rpe-table2-pe", "ace-rpe-table2-pe:No such row", "no-such-spec:ACE-RPE"):
        with pytest.raises(ReproError):
            bench_compile.chosen_rows(None, [bad])
