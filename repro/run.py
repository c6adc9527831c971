"""Orchestration: from a spec's rows to result records.

`repro run ID` takes each runnable row of a spec, lets the row's family make sure its data is there
(generating it at the smoke and synthetic scales), trains it for every seed, evaluates it on the
split the toolkit can score locally, writes one result record per row, and returns them for the
table. Rows with a `compute` mapping (model complexity, dataset statistics) run without training.
Everything about a paper goes through its family (repro.families): this module names none.

Scale settings come from the spec's `scales.<scale>` mapping:
  generator: parameters of the synthetic data generator (fixed before results are seen)
  sizes:     model sizes that override the paper's (d_model, layers, heads, ...)
  recipe:    overrides of the training recipe (epochs, batch_size, lr, ...)
  seeds:     the seeds to run; results report mean and standard deviation across them
"""
from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from repro import families
from repro.errors import ReproError
from repro.families.base import RowRun, RunContext
from repro.results import Result, config_hash, git_commit, hardware, write_result
from repro.specs import Row, Spec
from repro.utils import now_iso


@dataclass
class Step:
    row: Row
    kind: str  # "train" or "compute"
    seeds: list[int]
    detail: str
    gpu_hours: float | None = None
    ready: bool = True  # False while the row's family or compute task is not implemented


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


def family_of(row: Row) -> ModuleType | None:
    """The implementation of the family that runs a row (None while its family or arch is not implemented)."""
    if row.config is None:
        return None
    module = families.implementation(families.by_arch(row.config.arch))
    return module if module is not None and row.config.arch in module.ARCHS else None


def data_commands(spec: Spec) -> list[str]:
    """The commands that fetch and prepare a spec's datasets at paper scale (each one a catalog name)."""
    from repro.datasets.prepare import TARGETS

    lines = []
    for name in spec.datasets:
        prepare = f" then `repro prepare {name}`" if name in TARGETS else ""
        lines.append(f"{name}: `repro download {name}`{prepare}")
    return lines


def make_plan(spec: Spec, scale: str, row_names: list[str] | None = None, seeds: list[int] | None = None) -> Plan:
    settings = scale_settings(spec, scale)
    rows = select_rows(spec, row_names)
    seeds = seeds if seeds is not None else list(settings.get("seeds", [0]))
    plan = Plan(spec=spec, scale=scale, rows=rows)
    if any(r.model for r in rows):
        if scale == "paper":
            plan.data = data_commands(spec)
        else:
            plan.data = [f"generated {scale} data for {', '.join(spec.datasets)} "
                         f"({settings.get('generator', {})})"]
    for row in rows:
        if row.compute is not None:
            ready = _compute_task(row) is not None
            plan.steps.append(Step(row, "compute", [0], row.compute["task"], ready=ready))
            continue
        family = family_of(row)
        gpu = family.gpu_hours(row.config) if family is not None and scale == "paper" else None
        detail = f"{spec.recipe or '(no recipe)'}: {row.config.model_dump_json(exclude_defaults=True)}"
        plan.steps.append(Step(row, "train", list(seeds), detail, gpu, ready=family is not None))
    return plan


# --- execution ------------------------------------------------------------------------------------

ComputeFn = Callable[[RunContext], RowRun]


def _compute_task(row: Row) -> ComputeFn | None:
    """Rows with `compute:` run a generic task; None while the task (or its model's family) is not implemented."""
    task = row.compute.get("task") if row.compute else None
    if task == "complexity":
        if row.config is None or family_of(row) is None:
            return None
        from repro.complexity import run_complexity

        return run_complexity
    return None


def _run_unit(ctx: RunContext) -> tuple[RowRun, float]:
    """Train/compute one (row, seed); returns what it produced and its seconds. Runs in any process."""
    started = time.time()
    if ctx.row.compute is not None:
        run = _compute_task(ctx.row)(ctx)
    else:
        run = family_of(ctx.row).run_row(ctx)
    return run, time.time() - started


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
    for step in plan.steps:  # fail before any training
        if not step.ready:
            raise ReproError(f"{spec.id} row {step.row.name!r} ({step.kind}: {step.detail}) is not implemented yet")
    for family in {family_of(s.row) for s in plan.steps if s.kind == "train"}:
        family.prepare_data(spec, scale, settings)  # generated once, before runs start in parallel

    def context(step: Step, seed: int, progress: bool) -> RunContext:
        return RunContext(spec=spec, row=step.row, config=step.row.config, scale=scale, settings=settings, seed=seed,
                          workdir=workdir / spec.id / scale / step.row.slug / f"seed{seed}", resume=resume,
                          progress=progress)

    units = [(step, seed) for step in plan.steps for seed in step.seeds]
    done: dict[tuple[str, int], tuple[RowRun, float]] = {}
    if jobs == 1:
        for step, seed in units:
            done[(step.row.name, seed)] = _run_unit(context(step, seed, True))
            if on_unit:
                run, seconds = done[(step.row.name, seed)]
                on_unit(step.row.name, seed, run.metrics, seconds)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = max(1, (os.cpu_count() or 1) // jobs)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init_worker, initargs=(threads,)) as pool:
            futures = {pool.submit(_run_unit, context(step, seed, False)): (step.row.name, seed)
                       for step, seed in units}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                if on_unit:
                    run, seconds = done[futures[future]]
                    on_unit(*futures[future], run.metrics, seconds)

    out: list[Result] = []
    for step in plan.steps:
        row = step.row
        runs = [done[(row.name, seed)][0] for seed in step.seeds]
        per_seed = [run.metrics for run in runs]
        extra: dict[str, Any] = {"per_seed": per_seed}
        if any(run.training for run in runs):
            extra["train"] = [run.training for run in runs]
        for key in sorted({k for run in runs for k in run.extra}):
            extra[key] = [run.extra.get(key) for run in runs]
        for run in runs:
            extra.update(run.info)
        predictions = [path for run in runs for path in run.predictions]
        if predictions:
            extra["predictions"] = predictions
        result = Result(
            spec=spec.id, paper=spec.paper, row=row.name, scale=scale,
            split=runs[0].split if runs else spec.split, metrics=_mean(per_seed),
            std=_std(per_seed) if len(per_seed) > 1 else {}, seeds=list(step.seeds),
            config_hash=config_hash({"row": row.model or row.compute, "settings": settings,
                                     "recipe": spec.recipe}),
            git_commit=git_commit(), hardware=hardware(),
            wall_time_s=round(sum(done[(row.name, seed)][1] for seed in step.seeds), 2),
            date=now_iso(), extra=extra,
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
