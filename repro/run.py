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
  ensemble:  true: a row's seeds train together in one process (repro.train.ensemble), each recorded
             as its own unit; for families with `run_ensemble`, at the generated scales (on Slurm: one job)

A run with `key=value` overrides, `--limit` or a spec file of its own is a variant
(`repro.variants`): its settings and rows are changed and checked before anything runs, and its
records and checkpoints are kept apart from those of the spec as written.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from repro import families
from repro.errors import ReproError
from repro.families.base import RowRun, RunContext
from repro.results import (
    Result,
    SeedResult,
    aggregate,
    config_hash,
    environment,
    read_seed_results,
    write_result,
    write_seed_result,
)
from repro.specs import Row, Spec
from repro.utils import now_iso
from repro.variants import Variant


@dataclass
class Step:
    row: Row
    kind: str  # "train" or "compute"
    seeds: list[int]
    detail: str
    gpu_hours: float | None = None
    ready: bool = True  # False while the row's family or compute task is not implemented
    stages: list[tuple[str, str, float | None]] = field(default_factory=list)  # (name, what, GPU-hours)


@dataclass
class Plan:
    spec: Spec
    scale: str
    rows: list[Row]
    steps: list[Step] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the scale's settings, overrides applied
    variant: Variant = field(default_factory=Variant)

    @property
    def results_root(self) -> Path | None:
        return self.variant.results_root()


def scale_settings(spec: Spec, scale: str) -> dict[str, Any]:
    if scale == "paper":
        return {}
    if scale not in spec.scales:
        runnable = ", ".join(sorted(spec.scales)) or "none"
        raise ReproError(
            f"{spec.id} has no settings for scale {scale!r} (scales it defines: {runnable}); "
            f"add `scales: {{{scale}: ...}}` to {spec.path}"
        )
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


def make_plan(
    spec: Spec,
    scale: str,
    row_names: list[str] | None = None,
    seeds: list[int] | None = None,
    variant: Variant | None = None,
) -> Plan:
    variant = variant or Variant()
    settings = scale_settings(spec, scale)
    rows = select_rows(spec, row_names)
    if variant.overrides:
        from repro.variants import apply

        settings, rows = apply(spec, scale, settings, rows, variant.overrides)
    if variant.limit is not None:
        _check_limit(spec, scale, rows, variant.limit)
    seeds = seeds if seeds is not None else list(settings.get("seeds", [0]))
    plan = Plan(spec=spec, scale=scale, rows=rows, settings=settings, variant=variant)
    if any(r.model for r in rows):
        if scale == "paper":
            plan.data = data_commands(spec)
        else:
            generator = ", ".join(f"{k}={v}" for k, v in (settings.get("generator") or {}).items())
            plan.data = [f"generated {scale} data for {', '.join(spec.datasets)} ({generator or 'defaults'})"]
    for row in rows:
        if row.compute is not None:
            ready = _compute_task(row, spec.paper) is not None
            plan.steps.append(Step(row, "compute", [0], row.compute["task"], ready=ready))
            continue
        family = family_of(row)
        gpu = family.gpu_hours(row.config) if family is not None and scale == "paper" else None
        detail = f"{spec.recipe or '(no recipe)'}: {row.config.model_dump_json(exclude_defaults=True)}"
        step = Step(row, "train", list(seeds), detail, gpu, ready=family is not None)
        if family is not None and scale == "paper" and hasattr(family, "stages"):
            # a family whose unit trains in several stages (pre-training, then fine-tuning) lists them
            step.stages = family.stages(row.config, spec)
            step.gpu_hours = None if any(h is None for *_, h in step.stages) else sum(h for *_, h in step.stages)
        plan.steps.append(step)
    if scale == "paper" and any(r.model for r in rows):
        family = families.implementation(families.by_paper(spec.paper))
        if family is not None and hasattr(family, "data_notes"):
            plan.data += family.data_notes(spec)
    return plan


def _check_limit(spec: Spec, scale: str, rows: list[Row], limit: int) -> None:
    """--limit N: a quick, partial look at real data; only families that read `RunContext.limit` take it."""
    if limit < 1:
        raise ReproError(f"--limit must be at least 1, not {limit}")
    if scale != "paper":
        raise ReproError(f"--limit is for paper-scale data; at scale {scale} the data is generated (try --scale smoke)")
    for row in rows:
        family = family_of(row)
        if row.compute is not None or family is None or not getattr(family, "SUPPORTS_LIMIT", False):
            raise ReproError(f"{spec.id} row {row.name!r}: --limit is not supported by the code that runs it")


# --- execution ------------------------------------------------------------------------------------

ComputeFn = Callable[[RunContext], RowRun]


def _compute_task(row: Row, paper: str) -> ComputeFn | None:
    """Rows with `compute:` run a task without training: `complexity` (any family's model, generic), or one
    the spec's family lists in its COMPUTE_TASKS (e.g. dataset statistics); None while not implemented."""
    task = row.compute.get("task") if row.compute else None
    if task == "complexity":
        if row.config is None or family_of(row) is None:
            return None
        from repro.complexity import run_complexity

        return run_complexity
    family = families.implementation(families.by_paper(paper))
    return getattr(family, "COMPUTE_TASKS", {}).get(task) if family is not None else None


def resolved_config(
    spec: Spec, row: Row, scale: str, settings: dict[str, Any], variant: Variant | None = None
) -> dict[str, Any]:
    """Everything that decides what a unit computes, except its seed: hashed into `config_hash`."""
    recipe = None
    if spec.recipe and row.model is not None:
        from repro.train import load_recipe

        resolved = load_recipe(spec.recipe).replace(**settings.get("recipe", {})).to_json()
        recipe = {k: v for k, v in resolved.items() if k not in ("path", "description", "seed")}
    return {
        "spec": spec.id,
        "row": row.name,
        "scale": scale,
        "model": row.config.model_dump(mode="json") if row.config is not None else None,
        "compute": row.compute,
        "recipe": recipe,
        "settings": {
            k: v for k, v in settings.items() if k not in ("seeds", "jobs", "ensemble", "tolerance", "fingerprint")
        },
        **({"variant": variant.to_json()} if variant is not None and not variant.empty else {}),
    }


def _run_unit(ctx: RunContext) -> tuple[RowRun, str, str, float]:
    """Train/compute one (row, seed); returns what it produced, start and end time, seconds. Runs in any process."""
    started, clock = now_iso(), time.time()
    if ctx.row.compute is not None:
        run = _compute_task(ctx.row, ctx.spec.paper)(ctx)
    else:
        run = family_of(ctx.row).run_row(ctx)
    return run, started, now_iso(), time.time() - clock


def _run_units(ctxs: list[RunContext]) -> list[tuple[RowRun, str, str, float]]:
    """One unit, or a row's seeds trained together by its family (each seed's time: its share of the whole)."""
    if len(ctxs) == 1:
        return [_run_unit(ctxs[0])]
    started, clock = now_iso(), time.time()
    runs = family_of(ctxs[0].row).run_ensemble(ctxs)
    seconds, finished = time.time() - clock, now_iso()
    for run in runs:  # the seeds it trained with: its dropout masks depend on them (repro.train.ensemble)
        run.training = {**(run.training or {}), "ensemble": [c.seed for c in ctxs]}
    return [(run, started, finished, seconds / len(ctxs)) for run in runs]


def _groups(plan: Plan, units: list[tuple[Step, int]]) -> list[list[tuple[Step, int]]]:
    """The units as they run: each alone, or with `ensemble: true` a row's seeds together."""
    ensemble = plan.settings.get("ensemble", False)
    if not isinstance(ensemble, bool):
        raise ReproError(f"{plan.spec.path}: scales.{plan.scale}.ensemble must be true or false, not {ensemble!r}")
    if not ensemble:
        return [[unit] for unit in units]
    if plan.scale == "paper":  # families' run_ensemble may assume generated data
        raise ReproError(f"{plan.spec.id}: seeds are trained together at the generated scales, not at paper scale")
    groups: dict[str, list[tuple[Step, int]]] = {}
    for step, seed in units:
        if step.kind == "train" and not hasattr(family_of(step.row), "run_ensemble"):
            raise ReproError(
                f"{plan.spec.id} row {step.row.name!r}: its family trains one seed at a time; run it with --no-ensemble"
            )
        groups.setdefault(step.row.name if step.kind == "train" else f"{step.row.name}/{seed}", []).append((step, seed))
    return list(groups.values())


def _init_worker(threads: int) -> None:
    """A worker process: its share of the threads, and it ends when its parent does (Linux)."""
    import torch

    torch.set_num_threads(threads)
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _units_to_run(plan: Plan, workdir: Path, resume: bool, force: bool) -> list[tuple[Step, int]]:
    """(step, seed) pairs to run; refuses, before any training, to replace a stored seed or a checkpoint."""
    spec, scale = plan.spec, plan.scale
    units, clashes = [], []
    for step in plan.steps:
        stored = read_seed_results(spec, step.row, scale, plan.results_root)
        for seed in step.seeds:
            if seed in stored and not force:
                if resume:
                    continue  # done before: --resume keeps it and runs the rest
                clashes.append(f"{step.row.name} seed {seed}")
            units.append((step, seed))
    if clashes:
        raise ReproError(
            f"{spec.id} at scale {scale}{_variant_words(plan)} already has results for {', '.join(clashes)}; "
            f"pass --force to replace them, or --resume to keep them and run only the missing seeds"
        )
    if not resume and not force:
        started = [unit_dir(workdir, spec, scale, step.row, seed, plan.variant) for step, seed in units]
        started = [d for d in started if (d / "last.pt").exists()]
        if started:
            raise ReproError(
                f"{started[0]} holds a checkpoint of an earlier run; pass --resume to continue it or "
                f"--force to start again"
            )
    return units


def _variant_words(plan: Plan) -> str:
    return "" if plan.variant.empty else f" (variant {plan.variant.name})"


def unit_dir(workdir: Path, spec: Spec, scale: str, row: Row, seed: int, variant: Variant | None = None) -> Path:
    """A unit's checkpoints and logs; a variant's are kept apart from the spec's own."""
    if variant is not None and not variant.empty:
        workdir = workdir / "variants" / variant.name
    return workdir / spec.id / scale / row.slug / f"seed{seed}"


def store_unit(
    spec: Spec,
    row: Row,
    scale: str,
    seed: int,
    outcome: tuple[RowRun, str, str, float],
    config: dict[str, Any],
    variant: dict[str, Any] | None,
    root: Path | None,
    rebaseline: bool = False,
    lock: Path | None = None,
) -> Path:
    """Write one finished unit's record and rebuild its row's record from every seed present. Units that
    may finish at once in separate processes (jobs of a cluster) pass a `lock` file they share: the
    rebuild reads every seed, so two at once could each miss the other's."""
    from filelock import FileLock

    run, started_at, finished_at, seconds = outcome
    with FileLock(str(lock)) if lock is not None else nullcontext():
        record = write_seed_result(
            spec,
            SeedResult(
                spec=spec.id,
                paper=spec.paper,
                row=row.name,
                scale=scale,
                seed=seed,
                split=run.split,
                metrics=run.metrics,
                config=config,
                config_hash=config_hash(config),
                environment=environment(),
                training=run.training,
                extra=run.extra,
                info=run.info,
                predictions=run.predictions,
                started=started_at,
                finished=finished_at,
                wall_time_s=round(seconds, 2),
                variant=variant,
            ),
            root,
            rebaseline=rebaseline,
        )
        write_result(aggregate(spec, row, scale, read_seed_results(spec, row, scale, root)), spec, root)
    return record


def unit_context(plan: Plan, workdir: Path, step: Step, seed: int, *, resume: bool, progress: bool) -> RunContext:
    """What one (row, seed) of a plan needs to run, in whichever process or job runs it."""
    return RunContext(
        spec=plan.spec,
        row=step.row,
        config=step.row.config,
        scale=plan.scale,
        settings=plan.settings,
        seed=seed,
        workdir=unit_dir(workdir, plan.spec, plan.scale, step.row, seed, plan.variant),
        resume=resume,
        progress=progress,
        limit=plan.variant.limit,
        results_root=plan.results_root,
    )


def execute(
    plan: Plan,
    workdir: Path,
    *,
    resume: bool = False,
    force: bool = False,
    rebaseline: bool = False,
    jobs: int | None = None,
    on_row: Callable[[Result], None] | None = None,
    on_unit: Callable[[str, int, dict[str, float], float], None] | None = None,
    monitor: Callable[[dict], Any] | None = None,
) -> list[Result]:
    """Run every (row, seed) of a plan, `jobs` at a time. Each unit's record is written as soon as it
    finishes and its row's record (mean, std over every seed present) rebuilt, so an interrupted table
    keeps what finished; stored seeds are replaced only with `force`.

    With jobs > 1 each run is a separate process using cpu_count / jobs threads. `monitor`, given
    {(row, seed): repro.monitor.Unit}, returns the display (`repro.monitor.RunMonitor`) that shows
    every unit's progress and a line per finished unit; without one, units show their own bars when
    they run in this process.
    """
    spec, scale, settings, root = plan.spec, plan.scale, plan.settings, plan.results_root
    jobs = max(1, int(jobs or settings.get("jobs", 1)))
    for step in plan.steps:  # fail before any training
        if not step.ready:
            raise ReproError(f"{spec.id} row {step.row.name!r} ({step.kind}: {step.detail}) is not implemented yet")
    units = _units_to_run(plan, workdir, resume, force)
    groups = _groups(plan, units)
    jobs = min(jobs, max(len(groups), 1))  # a lone unit runs here, with every thread
    for family in {family_of(s.row) for s in plan.steps if s.kind == "train"}:
        family.prepare_data(spec, scale, settings)  # generated once, before runs start in parallel
    configs = {step.row.name: resolved_config(spec, step.row, scale, settings, plan.variant) for step in plan.steps}
    started_in = environment()  # the checkout and packages as the run starts
    if jobs > 1:
        started_in["threads"] = max(1, (os.cpu_count() or 1) // jobs)  # each worker's share

    def context(step: Step, seed: int, progress: bool) -> RunContext:
        return unit_context(plan, workdir, step, seed, resume=resume, progress=progress and monitor is None)

    def finished(step: Step, seed: int, outcome: tuple[RowRun, str, str, float]) -> None:
        run, seconds = outcome[0], outcome[3]
        if os.environ.get("RANK", "0") != "0":  # a torchrun job: every rank trains, rank 0 keeps the record
            return
        config = configs[step.row.name]
        record = store_unit(spec, step.row, scale, seed, outcome, config, plan.variant.to_json(), root, rebaseline)
        if display is not None:
            display.finished((step.row.name, seed), run.metrics, seconds, record)
        if on_unit:
            on_unit(step.row.name, seed, run.metrics, seconds)

    display = None
    if monitor is not None:
        from repro.monitor import Unit

        display = monitor(
            {
                (step.row.name, seed): Unit(f"{step.row.name} s{seed}", context(step, seed, False).workdir)
                for step, seed in units
            }
        )
    with display if display is not None else nullcontext():
        if jobs == 1:
            for group in groups:
                for (step, seed), outcome in zip(group, _run_units([context(s, n, True) for s, n in group])):
                    finished(step, seed, outcome)
        else:
            _run_parallel(groups, jobs, context, finished)

    out: list[Result] = []
    for step in plan.steps:
        stored = read_seed_results(spec, step.row, scale, root)
        if stored:
            out.append(aggregate(spec, step.row, scale, stored))
            if on_row:
                on_row(out[-1])
    return out


def _run_parallel(groups, jobs: int, context, finished) -> None:
    """Groups of units in `jobs` spawned processes; an error or a signal stops every worker at once."""
    import multiprocessing
    import signal
    from concurrent.futures import ProcessPoolExecutor, as_completed

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    threads = max(1, (os.cpu_count() or 1) // jobs)
    pool = ProcessPoolExecutor(
        max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker, initargs=(threads,)
    )
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        futures = {pool.submit(_run_units, [context(s, n, False) for s, n in group]): group for group in groups}
        for future in as_completed(futures):
            for (step, seed), outcome in zip(futures[future], future.result()):
                finished(step, seed, outcome)
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    pool.shutdown()


def format_hours(hours: float | None) -> str:
    if hours is None or math.isnan(hours):
        return "?"
    return f"{hours:.1f}"
