"""The local launcher: every unit of a plan on this machine, `jobs` at a time (`repro run`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from repro.launch.units import (
    Outcome,
    check_ready,
    groups,
    prepare_data,
    run_units,
    store_unit,
    stored_results,
    units_to_run,
)
from repro.results import Result, environment
from repro.run import Plan, Unit

_log = logging.getLogger(__name__)


def execute(
    plan: Plan,
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

    With jobs > 1 each run is a separate process; each process has its share of the cores as threads, or
    OMP_NUM_THREADS (`repro.load.threads_per_process`). `monitor`, given
    {(row, seed): repro.monitor.Unit}, returns the display (`repro.monitor.RunMonitor`) that shows
    every unit's progress and a line per finished unit; without one, units show their own bars when
    they run in this process.
    """
    jobs = units_at_a_time(plan, jobs)
    check_ready(plan)  # fail before any training
    units = units_to_run(plan, resume, force)
    grouped = groups(plan, units)
    jobs = min(jobs, max(len(grouped), 1))  # a lone unit runs here, with every thread
    threads = _threads(jobs)
    environment()  # the code's state as the run starts: every record names it, not the checkout's later state
    prepared = prepare_data(plan)  # once, before runs start in parallel
    latest: dict[str, Result] = {}  # each row's record as its last finished unit rebuilt it

    def context(unit: Unit, progress: bool):
        return unit.context(resume=resume, progress=progress and monitor is None, data=prepared.get(unit.row.name))

    def finished(unit: Unit, outcome: Outcome) -> None:
        run, seconds = outcome[0], outcome[3]
        if os.environ.get("RANK", "0") != "0":  # a torchrun job: every rank trains, rank 0 keeps the record
            return
        record, latest[unit.row.name] = store_unit(unit, outcome, rebaseline)
        if display is not None:
            display.finished((unit.row.name, unit.seed), run.metrics, seconds, record)
        if on_unit:
            on_unit(unit.row.name, unit.seed, run.metrics, seconds)

    display = None
    if monitor is not None:
        from repro.monitor import Unit as Shown

        display = monitor({(u.row.name, u.seed): Shown(f"{u.row.name} s{u.seed}", u.workdir) for u in units})
    with display if display is not None else nullcontext():
        if jobs == 1:
            for group in grouped:
                for unit, outcome in zip(group, run_units([context(u, True) for u in group])):
                    finished(unit, outcome)
        else:
            _run_parallel(grouped, jobs, threads, context, finished)

    out = stored_results(plan, latest)
    for result in out if on_row else ():
        on_row(result)
    return out


def units_at_a_time(plan: Plan, jobs: int | None = None) -> int:
    """`jobs` (`repro run -j`), else the scale's `jobs` setting, else `default_jobs`."""
    return max(1, int(jobs or plan.settings.get("jobs") or default_jobs(plan)))


def default_jobs(plan: Plan) -> int:
    """Units at a time when neither `-j` nor the scale's `jobs` says: at the synthetic scale the family's
    `synthetic_jobs` (two at a time, or one with every thread, as measured for it); at the others one (smoke runs
    take seconds; paper-scale units take a GPU each)."""
    if plan.scale != "synthetic":
        return 1
    return max((u.hooks.synthetic_jobs for u in plan.units if u.kind == "train" and u.hooks is not None), default=1)


_PARENT: int | None = None  # a worker's parent process, as the worker started


def _init_worker(threads: int, taken: dict) -> None:
    """A worker process: its share of the threads, the parent's environment as the run started (`taken`: what its
    records and stored trainings name), and it ends when its parent does (Linux)."""
    import torch

    from repro.results import adopt_environment

    global _PARENT
    _PARENT = os.getppid()
    adopt_environment(taken)
    torch.set_num_threads(threads)
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _run_in_worker(contexts: list) -> list[Outcome]:
    """`run_units` in a worker, which ends once its units have if its parent died meanwhile. The parent's death
    signal (SIGTERM) reaches a training worker as a stop: it saves its checkpoint and ends the unit, then would wait
    forever for work from a parent that is gone (it holds both ends of the pool's queue itself)."""
    try:
        return run_units(contexts)
    finally:
        if _PARENT is not None and os.getppid() != _PARENT:
            os._exit(1)


def _threads(jobs: int) -> int:
    """Threads for each of `jobs` worker processes (`repro.load.threads_per_process`; one job: this process's own,
    which PyTorch took from OMP_NUM_THREADS or the cores), with a note where other work on the machine leaves fewer
    free cores than they would take."""
    import torch

    from repro import load

    threads = torch.get_num_threads() if jobs == 1 else load.threads_per_process(jobs)
    now = load.current()
    if load.oversubscribed(threads, jobs, now):
        _log.info(
            "note: other work holds cores of this machine (%s): %d process(es) of %d threads would wait for busy "
            "cores at every parallel step, several times slower; OMP_NUM_THREADS=1 before `repro run` avoids it",
            now.words(),
            jobs,
            threads,
        )
    return threads


def _run_parallel(grouped, jobs: int, threads: int, context, finished) -> None:
    """Groups of units in `jobs` spawned processes of `threads` threads each; an error or a signal stops every worker
    at once."""
    import multiprocessing
    import signal
    from concurrent.futures import ProcessPoolExecutor, as_completed

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads, environment()),
    )
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        futures = {pool.submit(_run_in_worker, [context(u, False) for u in group]): group for group in grouped}
        for future in as_completed(futures):
            for unit, outcome in zip(futures[future], future.result()):
                finished(unit, outcome)
    except BaseException:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    pool.shutdown()
