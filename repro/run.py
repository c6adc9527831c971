"""Orchestration: from a spec's rows to result records.

`repro run ID` takes each runnable row of a spec, makes sure its data is there (generating it at
the smoke and synthetic scales), trains it for every seed, evaluates it on the split the toolkit can
score locally, writes one result record per row, and returns them for the table. Rows with a
`compute` mapping (model complexity, dataset statistics) run without training.

Scale settings come from the spec's `scales.<scale>` mapping:
  generator: parameters of the synthetic data generator (fixed before results are seen)
  sizes:     model sizes that override the paper's (d_model, layers, heads, ...)
  recipe:    overrides of the training recipe (epochs, batch_size, lr, ...)
  seeds:     the seeds to run; results report mean and standard deviation across them
"""
from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from repro.errors import ReproError
from repro.results import Result, config_hash, git_commit, hardware, now_iso, write_result
from repro.specs import Row, Spec

# Paper-scale cost of one training run per architecture and dataset, in GPU-hours, for --dry-run.
# mcan-pa Table VI: 4,150 s (MCAN) and 5,583 s (MCAN+PA) per epoch, 13 epochs.
GPU_HOURS = {"mcan": 4150 * 13 / 3600, "mcan+pa": 5583 * 13 / 3600}


@dataclass
class Step:
    row: str
    kind: str  # "train" or "compute"
    seeds: list[int]
    detail: str
    gpu_hours: float | None = None


@dataclass
class Plan:
    spec: Spec
    scale: str
    rows: list[Row]
    steps: list[Step] = field(default_factory=list)
    data: list[str] = field(default_factory=list)


def scale_settings(spec: Spec, scale: str) -> dict[str, Any]:
    if scale == "paper":
        return {}
    if scale not in spec.scales:
        runnable = ", ".join(sorted(spec.scales)) or "none"
        raise ReproError(f"{spec.id} has no settings for scale {scale!r} (scales it defines: {runnable}); "
                         f"add `scales: {{{scale}: ...}}` to {spec.path}")
    return spec.scales[scale]


def select_rows(spec: Spec, names: list[str] | None) -> list[Row]:
    if not names:
        rows = list(spec.runnable_rows)
    else:
        rows = [spec.row(n.strip()) for n in names if n.strip()]
        for row in rows:
            if row.cited:
                raise ReproError(f"row {row.name!r} of {spec.id} is cited from {row.cited}: it is shown, never run")
    if not rows:
        raise ReproError(f"{spec.id} has no runnable rows")
    return rows


def make_plan(spec: Spec, scale: str, row_names: list[str] | None = None, seeds: list[int] | None = None) -> Plan:
    settings = scale_settings(spec, scale)
    rows = select_rows(spec, row_names)
    seeds = seeds if seeds is not None else list(settings.get("seeds", [0]))
    plan = Plan(spec=spec, scale=scale, rows=rows)
    if any(r.model for r in rows):
        if scale == "paper":
            plan.data = [f"{d} (prepared: `repro download {d}` then `repro prepare {d}`)" for d in spec.datasets]
        else:
            plan.data = [f"generated {scale} data for {', '.join(spec.datasets)} "
                         f"({settings.get('generator', {})})"]
    for row in rows:
        try:
            _task_for(spec, row)
            missing = ""
        except ReproError:
            missing = " (not implemented yet)"
        if row.compute is not None:
            plan.steps.append(Step(row.name, "compute", [0], f"{row.compute.get('task')}{missing}"))
            continue
        gpu = None
        if scale == "paper":
            arch = "mcan+pa" if row.model.get("positional") else row.model.get("arch", "")
            gpu = GPU_HOURS.get(arch)
        recipe = spec.recipe or "(none)"
        plan.steps.append(Step(row.name, "train", list(seeds), f"{recipe}: {json.dumps(row.model)}{missing}", gpu))
    return plan


# --- execution ------------------------------------------------------------------------------------


TaskFn = Callable[..., dict[str, float]]


def _task_for(spec: Spec, row: Row) -> TaskFn:
    if row.compute is not None:
        task = row.compute.get("task")
        if task == "complexity":
            from repro.tasks.complexity import run_complexity

            return run_complexity
        raise ReproError(f"{spec.id} row {row.name!r}: compute task {task!r} is not implemented yet")
    arch = row.model.get("arch")
    if arch == "mcan" and set(spec.datasets) & {"vqa2", "vqa1", "cocoqa"}:
        from repro.tasks.vqa import run_vqa_row

        return run_vqa_row
    raise ReproError(f"{spec.id} row {row.name!r}: training arch {arch!r} on {', '.join(spec.datasets)} "
                     f"is not implemented yet")


def _run_unit(spec: Spec, row_name: str, scale: str, seed: int, workdir: Path, resume: bool,
              progress: bool) -> tuple[dict[str, float], dict[str, Any], float]:
    """Train/compute one (row, seed); returns its metrics, extras and seconds. Runs in any process."""
    row = spec.row(row_name)
    extras: dict[str, Any] = {}
    started = time.time()
    metrics = _task_for(spec, row)(spec=spec, row=row, scale=scale, settings=scale_settings(spec, scale),
                                   seed=seed, workdir=workdir, resume=resume, progress=progress, extras=extras)
    return metrics, extras, time.time() - started


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def execute(plan: Plan, workdir: Path, *, resume: bool = False, rebaseline: bool = False, jobs: int | None = None,
            on_row: Callable[[Result], None] | None = None,
            on_unit: Callable[[str, int, dict[str, float], float], None] | None = None) -> list[Result]:
    """Run every (row, seed) of a plan, `jobs` at a time; write one result per row (mean, std over seeds).

    With jobs > 1 each run is a separate process using cpu_count / jobs threads, and progress bars
    give way to one line per finished run.
    """
    spec, scale = plan.spec, plan.scale
    settings = scale_settings(spec, scale)
    jobs = max(1, int(jobs or settings.get("jobs", 1)))
    units = [(step, seed) for step in plan.steps for seed in step.seeds]
    tasks = {step.row: _task_for(spec, spec.row(step.row)) for step in plan.steps}  # fail before any training
    from repro.tasks import vqa

    if vqa.run_vqa_row in tasks.values():
        vqa.prepare_data(spec, scale, settings)  # generated once, before runs start in parallel

    def unit_dir(step: Step, seed: int) -> Path:
        return workdir / spec.id / scale / spec.row(step.row).slug / f"seed{seed}"

    done: dict[tuple[str, int], tuple[dict[str, float], dict[str, Any], float]] = {}
    if jobs == 1:
        for step, seed in units:
            done[(step.row, seed)] = _run_unit(spec, step.row, scale, seed, unit_dir(step, seed), resume, True)
            if on_unit:
                on_unit(step.row, seed, *done[(step.row, seed)][::2])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = max(1, (os.cpu_count() or 1) // jobs)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init_worker, initargs=(threads,)) as pool:
            futures = {pool.submit(_run_unit, spec, step.row, scale, seed, unit_dir(step, seed), resume, False):
                       (step.row, seed) for step, seed in units}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                if on_unit:
                    on_unit(*futures[future], *done[futures[future]][::2])

    out: list[Result] = []
    for step in plan.steps:
        row = spec.row(step.row)
        per_seed = [done[(step.row, seed)][0] for seed in step.seeds]
        extras: dict[str, Any] = {}
        for seed in step.seeds:
            for key, value in done[(step.row, seed)][1].items():
                if isinstance(value, list):
                    extras.setdefault(key, []).extend(value)
                else:
                    extras[key] = value
        result = Result(
            spec=spec.id, paper=spec.paper, row=row.name, scale=scale,
            split=extras.pop("split", spec.split), metrics=_mean(per_seed),
            std=_std(per_seed) if len(per_seed) > 1 else {}, seeds=list(step.seeds),
            config_hash=config_hash({"row": row.model or row.compute, "settings": settings,
                                     "recipe": spec.recipe}),
            git_commit=git_commit(), hardware=hardware(),
            wall_time_s=round(sum(done[(step.row, seed)][2] for seed in step.seeds), 2),
            date=now_iso(), extra={"per_seed": per_seed, **extras},
        )
        write_result(result, spec, rebaseline=rebaseline)
        out.append(result)
        if on_row:
            on_row(result)
    return out


def _mean(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: statistics.fmean(r[k] for r in runs) for k in keys}


def _std(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: statistics.stdev(r[k] for r in runs) if len(runs) > 1 else 0.0 for k in keys}


def format_hours(hours: float | None) -> str:
    if hours is None or math.isnan(hours):
        return "?"
    return f"{hours:.1f}"
