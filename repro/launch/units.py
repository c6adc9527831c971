"""The (row, seed) units of a plan, as any launcher runs them: which units need running, how they group
(alone, or a row's seeds trained together), their folders and contexts, running them in a process, and
storing each finished unit's record. `launch.local` and `launch.slurm` are the two launchers over these.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from repro import families
from repro.errors import ReproError
from repro.families.base import RowRun, RunContext
from repro.names import inside
from repro.results import (
    SeedResult,
    aggregate,
    config_hash,
    environment,
    read_seed_results,
    write_result,
    write_seed_result,
)
from repro.run import Plan, Step, compute_task, hashed_config
from repro.specs import Row, Spec
from repro.utils import now_iso
from repro.variants import Variant

Unit = tuple[Step, int]  # (the plan's step of a row, one seed)
Outcome = tuple[RowRun, str, str, float]  # what it produced, started, finished, seconds


def unit_dir(workdir: Path, spec: Spec, scale: str, row: Row, seed: int, variant: Variant | None = None) -> Path:
    """A unit's checkpoints and logs; a variant's are kept apart from the spec's own."""
    if variant is not None and not variant.empty:
        workdir = inside(workdir, "variants", variant.name)
    return inside(workdir, spec.id, scale, row.slug, f"seed{seed}")


def prepare_data(plan: Plan) -> dict[str, Any]:
    """Each family's `prepare_data`, called once for the plan's training rows before any unit runs (data is
    generated here, before runs start in parallel); row name -> what its family's call returned."""
    by_family: dict[str, list[Row]] = {}  # the trained rows of each family, in plan order
    for step in plan.steps:
        if step.kind == "train" and families.for_row(step.row) is not None:
            by_family.setdefault(families.by_arch(step.row.config.arch).paper, []).append(step.row)
    prepared: dict[str, Any] = {}
    for rows in by_family.values():
        data = families.for_row(rows[0]).prepare_data(with_rows(plan.spec, rows), plan.scale, plan.settings)
        prepared.update({row.name: data for row in rows})
    return prepared


def with_rows(spec: Spec, rows) -> Spec:
    """The spec as a family's `prepare_data` sees it: only the rows this run trains (`--rows`), so paper-scale data
    is prepared for those rows alone; columns, settings and claims as they are."""
    return dataclasses.replace(spec, rows=tuple(rows))


def unit_context(
    plan: Plan, workdir: Path, step: Step, seed: int, *, resume: bool, progress: bool, data: Any = None
) -> RunContext:
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
        data=data,
        device=plan.settings.get("device"),
    )


def with_data(ctx: RunContext) -> RunContext:
    """The context with its family's prepared data: as given by the launcher, or prepared now (a context built
    by hand: `repro attention`, a fingerprint)."""
    hooks = families.for_row(ctx.row)
    if ctx.data is not None or ctx.row.compute is not None or hooks is None:
        return ctx
    return dataclasses.replace(ctx, data=hooks.prepare_data(with_rows(ctx.spec, [ctx.row]), ctx.scale, ctx.settings))


def units_to_run(plan: Plan, workdir: Path, resume: bool, force: bool) -> list[Unit]:
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
        variant = "" if plan.variant.empty else f" (variant {plan.variant.name})"
        raise ReproError(
            f"{spec.id} at scale {scale}{variant} already has results for {', '.join(clashes)}; "
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


def groups(plan: Plan, units: list[Unit]) -> list[list[Unit]]:
    """The units as they run: each alone, or with `ensemble: true` a row's seeds together."""
    ensemble = plan.settings.get("ensemble", False)
    if not isinstance(ensemble, bool):
        raise ReproError(f"{plan.spec.path}: scales.{plan.scale}.ensemble must be true or false, not {ensemble!r}")
    if not ensemble:
        return [[unit] for unit in units]
    if plan.scale == "paper":  # families' run_ensemble may assume generated data
        raise ReproError(f"{plan.spec.id}: seeds are trained together at the generated scales, not at paper scale")
    grouped: dict[str, list[Unit]] = {}
    for step, seed in units:
        hooks = families.for_row(step.row) if step.kind == "train" else None
        if step.kind == "train" and (hooks is None or hooks.run_ensemble is None):
            raise ReproError(
                f"{plan.spec.id} row {step.row.name!r}: its family trains one seed at a time; run it with --no-ensemble"
            )
        key = step.row.name if step.kind == "train" else f"{step.row.name}/{seed}"
        grouped.setdefault(key, []).append((step, seed))
    return list(grouped.values())


def run_unit(ctx: RunContext) -> Outcome:
    """Train/compute one (row, seed); returns what it produced, start and end time, seconds. Runs in any process."""
    from repro.train.distributed import use_device

    started, clock = now_iso(), time.time()
    with use_device(ctx.device):  # every trainer the family calls trains on the unit's device
        if ctx.row.compute is not None:
            run = compute_task(ctx.row, ctx.spec.paper)(ctx)
        else:
            run = families.for_row(ctx.row).run_row(with_data(ctx))
    return run, started, now_iso(), time.time() - clock


@contextmanager
def unit_locks(ctxs: list[RunContext]) -> Iterator[None]:
    """Each unit's lock (`<work folder>.lock`, beside it) held while it trains: a second `repro run` of the same
    (spec, row, scale, seed) at once is refused in one line instead of training in the same folder. Rank 0 of a
    torchrun unit holds it for every rank."""
    from filelock import FileLock, Timeout

    with ExitStack() as stack:
        if os.environ.get("RANK", "0") == "0":
            for ctx in ctxs:
                path = ctx.workdir.parent / f"{ctx.workdir.name}.lock"
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    stack.enter_context(FileLock(str(path), timeout=0))
                except Timeout:
                    raise ReproError(
                        f"{ctx.spec.id} {ctx.row.name!r} seed {ctx.seed} ({ctx.scale}) is being trained by another "
                        f"repro run now (it holds {path}); wait for that run to finish, then run again"
                    ) from None
        yield


def run_units(ctxs: list[RunContext]) -> list[Outcome]:
    """One unit, or a row's seeds trained together by its family (each seed's time: its share of the whole); each
    unit's lock held meanwhile (`unit_locks`)."""
    with unit_locks(ctxs):
        return _run_units(ctxs)


def _run_units(ctxs: list[RunContext]) -> list[Outcome]:
    if len(ctxs) == 1:
        return [run_unit(ctxs[0])]
    from repro.train.distributed import use_device

    started, clock = now_iso(), time.time()
    with use_device(ctxs[0].device):
        runs = families.for_row(ctxs[0].row).run_ensemble([with_data(c) for c in ctxs])
    seconds, finished = time.time() - clock, now_iso()
    for run in runs:  # the seeds it trained with: its dropout masks depend on them (repro.train.ensemble)
        run.training = {**(run.training or {}), "ensemble": [c.seed for c in ctxs]}
    return [(run, started, finished, seconds / len(ctxs)) for run in runs]


def store_unit(
    spec: Spec,
    row: Row,
    scale: str,
    seed: int,
    outcome: Outcome,
    config: dict[str, Any],
    variant: dict[str, Any] | None,
    root: Path | None,
    rebaseline: bool = False,
    lock: Path | None = None,
    weights: dict[str, str] | None = None,
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
                config_hash=config_hash(hashed_config(config)),
                environment=environment(),
                training=run.training,
                extra=run.extra,
                info=run.info,
                predictions=run.predictions,
                started=started_at,
                finished=finished_at,
                wall_time_s=round(seconds, 2),
                variant=variant,
                weights=weights,
                design_hash=spec.design_hash(scale),
            ),
            root,
            rebaseline=rebaseline,
        )
        write_result(aggregate(spec, row, scale, read_seed_results(spec, row, scale, root)), spec, root)
    return record


def execute_weights(plan: Plan, workdir: Path, sources: dict[str, Any], force: bool = False) -> list[tuple[Any, Path]]:
    """`repro run --weights`: each row of the plan evaluated once from its checkpoint, or one per group of its
    columns (`sources`: row name -> repro.weights.WeightsSource), no training; every checkpoint is read and hashed
    before any row runs; a row's record (seed 0) goes under results/weights/<source>/ with the source, each
    checkpoint's name and sha256 (and the columns left empty), never beside the numbers trained here; (row record,
    its root) each."""
    from repro.run import resolved_config

    for step in plan.steps:
        hooks = families.for_row(step.row) if step.kind == "train" else None
        if hooks is None or not hooks.supports_weights:
            raise ReproError(f"{plan.spec.id} row {step.row.name!r}: its family evaluates no given weights (--weights)")
    checked = {name: source.with_digest() for name, source in sources.items()}
    for step in plan.steps:
        root = checked[step.row.name].results_root(plan.scale)
        if 0 in read_seed_results(plan.spec, step.row, plan.scale, root) and not force:
            raise ReproError(
                f"{root}: {plan.spec.id} row {step.row.name!r} at scale {plan.scale} already has a result of these "
                "weights; pass --force to replace it"
            )
    prepared = prepare_data(_filled(plan, checked))
    runs = []
    for step in plan.steps:
        source = checked[step.row.name]
        ctx = unit_context(plan, workdir, step, 0, resume=False, progress=True, data=prepared.get(step.row.name))
        ctx = dataclasses.replace(ctx, weights=source, results_root=source.results_root(plan.scale))
        outcome = run_unit(ctx)
        config = {**resolved_config(plan.spec, step.row, plan.scale, plan.settings), "weights": source.record()}
        store_unit(plan.spec, step.row, plan.scale, 0, outcome, config, None, ctx.results_root, weights=source.record())
        seeds = read_seed_results(plan.spec, step.row, plan.scale, ctx.results_root)
        runs.append((aggregate(plan.spec, step.row, plan.scale, seeds), ctx.results_root))
    return runs


def _filled(plan: Plan, sources: dict[str, Any]) -> Plan:
    """The plan as its data is prepared for `--weights`: only the columns some checkpoint fills (a column of a data
    set that no row has a checkpoint for reads no files, so none are asked for)."""
    parts = {c.part for source in sources.values() for c in source.checkpoints}
    if "" in parts:
        return plan
    columns = tuple(c for c in plan.spec.columns if c.dataset in parts)
    return dataclasses.replace(plan, spec=dataclasses.replace(plan.spec, columns=columns))
