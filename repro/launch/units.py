"""The units of a plan as any launcher runs them: which need running, how they group (alone, or a row's seeds
trained together), running them in a process, and storing each finished unit's record. `launch.local` and
`launch.slurm` are the two launchers over these. Everything about a unit (its family's hooks, configuration,
recipe, paths, stored record) was resolved once by the plan (`repro.run.Unit`); nothing here looks it up again.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.families.base import RowRun, RunContext, with_data, with_rows
from repro.results import Result, SeedResult, aggregate, environment, store_seed
from repro.run import Plan, Unit
from repro.utils import now_iso

# what it produced, started, finished, seconds, and CPU seconds (the unit's process; its share when seeds train
# together; data-loader worker processes not counted)
Outcome = tuple[RowRun, str, str, float, float]


def prepare_data(plan: Plan) -> dict[str, Any]:
    """Each family's `prepare_data`, called once for the plan's training rows before any unit runs (data is
    generated here, before runs start in parallel); row name -> what its family's call returned."""
    by_family: dict[str, list] = {}  # the trained steps of each family, in plan order
    for step in plan.steps:
        if step.kind == "train" and step.hooks is not None:
            by_family.setdefault(step.family, []).append(step)
    prepared: dict[str, Any] = {}
    for steps in by_family.values():
        rows = [step.row for step in steps]
        data = steps[0].hooks.prepare_data(with_rows(plan.spec, rows), plan.scale, plan.settings)
        prepared.update({row.name: data for row in rows})
    return prepared


def units_to_run(plan: Plan, resume: bool, force: bool) -> list[Unit]:
    """The plan's units to run; refuses, before any training, to replace a stored seed or a checkpoint."""
    units, clashes = [], []
    for unit in plan.units:
        if unit.stored is not None and not force:
            if resume:
                continue  # done before: --resume keeps it and runs the rest
            clashes.append(f"{unit.row.name} seed {unit.seed}")
        units.append(unit)
    if clashes:
        variant = "" if plan.variant.empty else f" (variant {plan.variant.name})"
        raise ReproError(
            f"{plan.spec.id} at scale {plan.scale}{variant} already has results for {', '.join(clashes)}; "
            f"pass --force to replace them, or --resume to keep them and run only the missing seeds"
        )
    if not resume and not force:
        started = [unit.workdir for unit in units if (unit.workdir / "last.pt").exists()]
        if started:
            raise ReproError(
                f"{started[0]} holds a checkpoint of an earlier run; pass --resume to continue it or "
                f"--force to start again"
            )
    return units


def check_ready(plan: Plan) -> None:
    """Fail before any training when a row's family or compute task is not implemented."""
    for step in plan.steps:
        if not step.ready:
            raise ReproError(
                f"{plan.spec.id} row {step.row.name!r} ({step.kind}: {step.detail}) is not implemented yet"
            )


def groups(plan: Plan, units: list[Unit]) -> list[list[Unit]]:
    """The units as they run: each alone, or with `ensemble: true` a row's seeds together; those that would read a
    training an earlier one stores (`shared_last`) after the others."""
    ensemble = plan.settings.get("ensemble", False)
    if not isinstance(ensemble, bool):
        raise ReproError(f"{plan.spec.path}: scales.{plan.scale}.ensemble must be true or false, not {ensemble!r}")
    if not ensemble:
        return shared_last(plan, [[unit] for unit in units])
    if plan.scale == "paper":  # families' run_ensemble may assume generated data
        raise ReproError(f"{plan.spec.id}: seeds are trained together at the generated scales, not at paper scale")
    grouped: dict[str, list[Unit]] = {}
    for unit in units:
        if unit.kind == "train" and (unit.hooks is None or unit.hooks.run_ensemble is None):
            raise ReproError(
                f"{plan.spec.id} row {unit.row.name!r}: its family trains one seed at a time; run it with --no-ensemble"
            )
        key = unit.row.name if unit.kind == "train" else f"{unit.row.name}/{unit.seed}"
        grouped.setdefault(key, []).append(unit)
    return shared_last(plan, list(grouped.values()))


def shared_last(plan: Plan, grouped: list[list[Unit]]) -> list[list[Unit]]:
    """`grouped` with each group whose rows' networks an earlier group trains (the same config less the family's
    `evaluation_fields`, the same seeds: `repro.shared_training`) moved after the others, so that with -j 2
    it reads the stored training instead of waiting on its lock while another unit could train."""
    from repro.shared_training import evaluation_fields, trained_fields

    if plan.scale == "paper":
        return grouped
    seen, first, later = set(), [], []
    for group in grouped:
        unit = group[0]
        fields = evaluation_fields(unit.hooks)
        if unit.kind != "train" or fields is None:
            first.append(group)
            continue
        key = (json.dumps(trained_fields(unit.row.config, fields), default=str), tuple(u.seed for u in group))
        (later if key in seen else first).append(group)
        seen.add(key)
    return first + later


def run_unit(ctx: RunContext) -> Outcome:
    """Train/compute one (row, seed); returns what it produced, start and end time, seconds, CPU seconds (a resumed
    unit's include its earlier processes' up to their last checkpoint: `repro.train.spent`). Runs in any process."""
    from repro.train.distributed import use_device
    from repro.train.spent import unit_clock

    started = now_iso()
    # every trainer the family calls trains on the unit's device; the clock counts a resumed unit's earlier processes
    with use_device(ctx.device), unit_clock([ctx.workdir], ctx.resume) as clock:
        if ctx.row.compute is not None:
            run = ctx.task(ctx)
        else:
            run = ctx.hooks.run_row(with_data(ctx))
        seconds, cpu = clock.now()
    return run, started, now_iso(), seconds, cpu


@contextmanager
def unit_locks(ctxs: list[RunContext]) -> Iterator[None]:
    """Each unit's lock (`<work folder>.lock`, beside it) held while it trains: a second `repro run` of the same
    (spec, row, scale, seed) at once is refused in one line instead of training in the same folder. A part of a
    unit (`RunContext.part`: psac's tasks as cluster jobs, which run at once) holds a lock of its own,
    `<work folder>.<part>.lock`. Rank 0 of a torchrun unit holds it for every rank."""
    from filelock import FileLock, Timeout

    with ExitStack() as stack:
        if os.environ.get("RANK", "0") == "0":
            for ctx in ctxs:
                part = f".{ctx.part}" if ctx.part else ""
                path = ctx.workdir.parent / f"{ctx.workdir.name}{part}.lock"
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    stack.enter_context(FileLock(str(path), timeout=0))
                except Timeout:
                    raise ReproError(
                        f"{ctx.spec.id} {ctx.row.name!r} seed {ctx.seed}{f', {ctx.part}' if ctx.part else ''} "
                        f"({ctx.scale}) is being trained by another "
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
    from repro.train.spent import unit_clock

    started = now_iso()
    with use_device(ctxs[0].device), unit_clock([c.workdir for c in ctxs], ctxs[0].resume) as clock:
        runs = ctxs[0].hooks.run_ensemble([with_data(c) for c in ctxs])
        seconds, cpu = clock.now()
    finished = now_iso()
    for run in runs:  # the seeds it trained with: its dropout masks depend on them (repro.train.ensemble)
        run.training = {**(run.training or {}), "ensemble": [c.seed for c in ctxs]}
    return [(run, started, finished, seconds / len(ctxs), cpu / len(ctxs)) for run in runs]


def store_unit(
    unit: Unit,
    outcome: Outcome,
    rebaseline: bool = False,
    lock: Path | None = None,
    weights: dict[str, str] | None = None,
) -> tuple[Path, Result]:
    """Write one finished unit's record and rebuild its row's record from every seed present; (the unit's record,
    the row's). Units that may finish at once in separate processes (jobs of a cluster) pass a `lock` file they
    share: the rebuild reads every seed, so two at once could each miss the other's. `weights`: the checkpoints
    `repro run --weights` evaluated (`Unit.evaluating`)."""
    from filelock import FileLock

    run, started_at, finished_at, seconds, cpu = outcome
    spec = unit.spec
    with FileLock(str(lock)) if lock is not None else nullcontext():
        return store_seed(
            spec,
            unit.row,
            SeedResult(
                spec=spec.id,
                paper=spec.paper,
                row=unit.row.name,
                scale=unit.scale,
                seed=unit.seed,
                split=run.split,
                metrics=run.metrics,
                config=unit.config,
                config_hash=unit.config_hash,
                environment=environment(),
                training=run.training,
                extra=run.extra,
                info=run.info,
                predictions=run.predictions,
                started=started_at,
                finished=finished_at,
                wall_time_s=round(seconds, 2),
                cpu_time_s=round(cpu, 2),
                variant=None if weights is not None else unit.variant.to_json(),
                weights=weights,
                design_hash=unit.design_hash,
            ),
            unit.results_root,
            rebaseline=rebaseline,
        )


def execute_weights(plan: Plan, sources: dict[str, Any], force: bool = False) -> list[tuple[Result, Path]]:
    """`repro run --weights`: each row of the plan evaluated once from its checkpoint, or one per group of its
    columns (`sources`: row name -> repro.weights.WeightsSource), no training; every checkpoint is read and hashed
    before any row runs; a row's record (seed 0) goes under results/weights/<source>/ with the source, each
    checkpoint's name and sha256 (and the columns left empty), never beside the numbers trained here; (row record,
    its root) each."""
    for step in plan.steps:
        if step.kind != "train" or step.hooks is None or not step.hooks.supports_weights:
            raise ReproError(f"{plan.spec.id} row {step.row.name!r}: its family evaluates no given weights (--weights)")
    checked = {name: source.with_digest() for name, source in sources.items()}
    units = {}  # each row's unit as the checkpoints are evaluated: seed 0, its record under results/weights/
    for step in plan.steps:
        source = checked[step.row.name]
        units[step.row.name] = step.units[0].evaluating(source.record(), source.results_root(plan.scale))
    for name, unit in units.items():
        if unit.record.exists() and not force:
            raise ReproError(
                f"{unit.results_root}: {plan.spec.id} row {name!r} at scale {plan.scale} already has a result of "
                "these weights; pass --force to replace it"
            )
    prepared = prepare_data(_filled(plan, checked))
    runs = []
    for name, unit in units.items():
        ctx = dataclasses.replace(unit.context(data=prepared.get(name)), weights=checked[name])
        _, result = store_unit(unit, run_unit(ctx), weights=checked[name].record())
        runs.append((result, unit.results_root))
    return runs


def _filled(plan: Plan, sources: dict[str, Any]) -> Plan:
    """The plan as its data is prepared for `--weights`: only the columns some checkpoint fills (a column of a data
    set that no row has a checkpoint for reads no files, so none are asked for)."""
    parts = {c.part for source in sources.values() for c in source.checkpoints}
    if "" in parts:
        return plan
    columns = tuple(c for c in plan.spec.columns if c.dataset in parts)
    return dataclasses.replace(plan, spec=dataclasses.replace(plan.spec, columns=columns))


def stored_results(plan: Plan, latest: dict[str, Result]) -> list[Result]:
    """Each row's record after a run: the one rebuilt when its last unit finished (`latest`, by row name), else
    the one of the seeds stored before (a row whose every seed `--resume` kept); rows with none left out."""
    out = []
    for step in plan.steps:
        if step.row.name in latest:
            out.append(latest[step.row.name])
        elif step.stored:
            out.append(aggregate(plan.spec, step.row, plan.scale, dict(step.stored)))
    return out
