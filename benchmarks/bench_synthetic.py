"""What a seed costs at the synthetic scale, family by family: CPU seconds to the design's stopping rule, seeds trained
together against one process per seed, the share of the machine's matmul rate a step reaches, where a step's time
goes, and whether two runs at a time or two threads use the 2 cores better.

    python -m benchmarks.bench_synthetic                           # every family, each stage's whole schedule
    python -m benchmarks.bench_synthetic --steps 200               # quick: 200 steps a stage, the rest at their rate
    python -m benchmarks.bench_synthetic --family dsganet --family psac --seeds 10 --alone 3 --json out.json
    python -m benchmarks.bench_synthetic --parallel-only --steps 30   # only: -j 2 against two threads, per family

One claim row of each family (`ROWS`: the rows `bench_ensemble` measures, and ace-rpe's ACE-RPE row of Table 1)
runs as `repro run ID --scale synthetic` runs a unit (`repro.launch.units`: the family's data, model, recipes and
scoring), in spawned processes with one thread each, the stages metered inside (`benchmarks.step_profile`); seeds
together wherever the family has `run_ensemble`. Reported per family:

- **CPU s per seed**: the process's CPU time (rusage: start-up, data, training, scoring) with each training stage
  counted to its recipe's schedule: the recipes' epochs, which is the design's stopping rule while it is a fixed
  schedule (the spec's `design.stopping` is printed). With `--steps N` each stage trains N steps and the steps it
  did not train are counted at the rate of its last N/2 (`scheduled_cpu`; the output says so); start-up and scoring
  are measured as they are. The first steps of a stage cost more (alone more than together): extrapolating the mean
  of a short run's steps overstated the gain of seeds together (200 steps: mcan-pa 1.44x at the mean, 1.33x here).
- **seeds per CPU-minute**, `--seeds` seeds trained together in one process (`repro run --ensemble`) against one
  process per seed (`--alone` of them measured, the mean taken per seed), and the ratio; also the training loops'
  ratio alone (the CPU seconds of a seed-step).
- **GFLOP/s** of a training step (FLOPs per seed-step over its CPU seconds) against the model's own matmul shapes
  replayed alone in the same process: the share of that rate the step reaches, alone and together.
- **profile**: a step's time by phase (data, forward, backward, optimiser, the rest of the loop) and the share of
  it spent outside ATen's operators (Python, dispatch, the autograd engine: what batching seeds removes).
- **two at a time or two threads** (`--parallel`): two units (of `--seeds` together, or one seed where the family
  has no ensemble) run as `repro run -j 2` runs them (two processes of one thread) against one after the other
  with two threads each; wall seconds, so the machine's other work counts: the load average is printed.

CPU seconds come from rusage, ratios are measured in the same run; the load average before and after is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from benchmarks.bench_ensemble import SPECS, children_cpu

SCALE = "synthetic"
ROWS: dict[str, tuple[str, str]] = {
    **{spec.split("-table")[0]: (spec, row) for spec, row in SPECS.items()},
    "ace-rpe": ("ace-rpe-table1-pe", "ACE-RPE"),
}


def contexts(spec_id: str, row_name: str, seeds: list[int], workdir: Path, steps: int | None) -> list:
    """The unit's contexts as `repro run` makes them; with `steps`, every training stage stops after that many."""
    from repro import families
    from repro.families.base import RunContext
    from repro.specs import resolve

    spec = resolve(spec_id)
    row = spec.row(row_name)
    settings = dict(spec.scales[SCALE])
    if steps is not None:  # the scale's recipe and each of its named ones (`pretrain_recipe`, `task_recipe`, ...)
        for key in ["recipe", *(k for k in settings if k.endswith("_recipe"))]:
            settings[key] = {**settings.get(key, {}), "max_steps": steps}
    return [
        RunContext(
            spec,
            row,
            row.config,
            SCALE,
            settings,
            seed,
            workdir / f"seed{seed}",
            progress=False,
            results_root=workdir / "results",  # prediction files of the generated test splits: never into results/
            hooks=families.for_row(row),  # as the plan's unit gives it (`repro.run.Unit.context`)
        )
        for seed in seeds
    ]


def unit(spec_id: str, row: str, seeds: list[int], steps: int | None, threads: int, workdir: str, profile: bool):
    """In a spawned process: the row's `seeds` as one unit (alone, or together), every training stage metered."""
    import torch

    torch.set_num_threads(threads)
    from benchmarks.step_profile import Meter
    from repro.launch.units import run_units

    ctxs = contexts(spec_id, row, seeds, Path(workdir), 1 if profile else steps)
    with Meter(profile=profile) as meter:
        start = time.perf_counter()
        run_units(ctxs)
    return {"stages": meter.stages, "unit_wall_s": time.perf_counter() - start}


def in_processes(calls: list[tuple]) -> tuple[list[dict], float, float]:
    """Each call (the arguments of `unit`) in a fresh spawned process, all at once; (results, CPU s, wall s)."""
    before, wall = children_cpu(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=len(calls), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(unit, *call) for call in calls]
        results = [f.result() for f in futures]
    return results, children_cpu() - before, time.perf_counter() - wall


def in_process(call, *args):
    """`call(*args)` in a fresh spawned process of its own; its result."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(call, *args).result()


def stage_rate(stage: dict) -> float:
    """A metered stage's CPU seconds a step: its steady rate (the second half of its steps:
    `step_profile.steady_rate`), or its mean rate where it ran under 4 steps."""
    rate = stage.get("steady_cpu_s_per_step")
    return stage["cpu_s"] / max(stage["steps"], 1) if rate is None else rate


def scheduled_cpu(stage: dict) -> float:
    """A stage's CPU seconds to its schedule: those it ran, and each step it did not run at its `stage_rate`. A
    stage's first steps cost more than the rest; counting them at the mean over a short run overstates the schedule
    by a different amount alone and together, which is what a ratio of the two then measures."""
    return stage["cpu_s"] + stage_rate(stage) * max(stage["full_steps"] - stage["steps"], 0)


def seed_cost(result: dict, process_cpu: float) -> dict[str, float]:
    """CPU seconds of a unit to its stages' schedules: measured outside the stages, each stage to its schedule
    (`scheduled_cpu`)."""
    stages = result["stages"]
    trained = sum(s["cpu_s"] for s in stages)
    scheduled = sum(scheduled_cpu(s) for s in stages)
    return {
        "process_cpu_s": process_cpu,
        "outside_training_cpu_s": process_cpu - trained,
        "training_cpu_s": scheduled,
        "cpu_s": process_cpu - trained + scheduled,
        "full_steps": sum(s["full_steps"] for s in stages),
        "steps": sum(s["steps"] for s in stages),
        "extrapolated": any(s["steps"] < s["full_steps"] for s in stages),
    }


def load() -> str:
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def measure(family: str, args, tmp: Path, say) -> dict[str, Any]:
    from repro import families
    from repro.families.base import with_data
    from repro.specs import resolve

    spec_id, row = ROWS[family]
    spec = resolve(spec_id)
    say(f"[bold]{family}[/]: {spec_id}, row {row!r}; preparing its data …")
    with_data(contexts(spec_id, row, [0], tmp, None)[0])  # generated once, before anything is timed
    can_together = families.for_row(spec.row(row)).run_ensemble is not None
    seeds = list(range(args.seeds))
    out: dict[str, Any] = {"spec": spec_id, "row": row, "seeds": args.seeds, "load_before": load()}
    out["stopping"] = (spec.design.stopping.get(SCALE) if spec.design else None) or "none stated: the recipes' epochs"

    def run(tag: str, unit_seeds: list[int], threads: int = 1, profile: bool = False, parallel: int = 1):
        calls = [
            (spec_id, row, [s + 100 * j for s in unit_seeds], args.steps, threads, str(tmp / f"{tag}{j}"), profile)
            for j in range(parallel)
        ]
        return in_processes(calls)

    alone = []
    for seed in seeds[: 0 if args.parallel_only else args.alone]:
        say(f"  one process for seed {seed} …")
        (result,), cpu, _ = run(f"alone{seed}-", [seed])
        alone.append({**seed_cost(result, cpu), "stages": result["stages"]})
    out["alone"] = alone
    if can_together and not args.parallel_only:
        say(f"  one process for seeds 0-{args.seeds - 1} together …")
        (result,), cpu, _ = run("together-", seeds)
        out["together"] = {**seed_cost(result, cpu), "stages": result["stages"]}
    if args.profile and not args.parallel_only:
        say("  profiling a step alone …")
        (result,), _, _ = run("profile-alone-", [0], profile=True)
        out["profile_alone"] = result["stages"]
        if can_together:
            say("  profiling a step together …")
            (result,), _, _ = run("profile-together-", seeds, profile=True)
            out["profile_together"] = result["stages"]
    if args.parallel:
        unit_seeds = seeds if can_together else [0]
        say("  two units at once, one thread each (-j 2) …")
        _, cpu_j2, wall_j2 = run("j2-", unit_seeds, parallel=2)
        say("  two units one after the other, two threads each …")
        cpu_t2 = wall_t2 = 0.0
        for j in range(2):
            _, cpu, wall = run(f"t2-{j}-", [s + 100 * j for s in unit_seeds], threads=2)
            cpu_t2, wall_t2 = cpu_t2 + cpu, wall_t2 + wall
        out["parallel"] = {
            "seeds_per_unit": len(unit_seeds),
            "jobs2": {"wall_s": wall_j2, "cpu_s": cpu_j2},
            "threads2": {"wall_s": wall_t2, "cpu_s": cpu_t2},
        }
    out["load_after"] = load()
    return out


def summary(family: str, m: dict[str, Any]) -> dict[str, Any]:
    """The per-family numbers the tables and the README give."""
    alone = m["alone"]
    if not alone:  # --parallel-only
        return {"family": family, **_parallel_summary(m)}
    per_seed_alone = sum(a["cpu_s"] for a in alone) / len(alone)
    step_alone = sum(a["training_cpu_s"] / a["full_steps"] for a in alone) / len(alone)
    s: dict[str, Any] = {
        "family": family,
        "full_steps": alone[0]["full_steps"],
        "cpu_s_per_seed_alone": per_seed_alone,
        "outside_training_cpu_s_alone": sum(a["outside_training_cpu_s"] for a in alone) / len(alone),
        "cpu_s_per_seed_step_alone": step_alone,
        "seeds_per_cpu_minute_alone": 60 / per_seed_alone,
        "extrapolated": any(a["extrapolated"] for a in alone),
    }
    if "together" in m:
        t, n = m["together"], m["seeds"]
        s["cpu_s_per_seed_together"] = t["cpu_s"] / n
        s["outside_training_cpu_s_together"] = t["outside_training_cpu_s"] / n
        s["cpu_s_per_seed_step_together"] = t["training_cpu_s"] / t["full_steps"] / n
        s["seeds_per_cpu_minute_together"] = 60 / s["cpu_s_per_seed_together"]
        s["ratio"] = s["seeds_per_cpu_minute_together"] / s["seeds_per_cpu_minute_alone"]
        s["training_ratio"] = step_alone / s["cpu_s_per_seed_step_together"]
    return {**s, **_parallel_summary(m)}


def _parallel_summary(m: dict[str, Any]) -> dict[str, Any]:
    if "parallel" not in m:
        return {}
    p = m["parallel"]
    ratio = p["threads2"]["wall_s"] / p["jobs2"]["wall_s"]  # > 1: -j 2 is faster
    return {"jobs2_over_threads2": ratio, "faster": "-j 2" if ratio >= 1 else "2 threads"}


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "—" if x is None else format(x, spec)


def render(console, measured: dict[str, dict], args) -> None:
    from rich.table import Table

    how = "whole schedules"
    if args.steps:
        how = f"{args.steps} steps a stage, the rest at the last {args.steps // 2}'s rate"
    cost = Table(title=f"CPU seconds per seed at the synthetic scale ({how}; {args.seeds} seeds together, 1 thread)")
    for col in (
        "family",
        "steps/seed",
        "CPU s/seed alone",
        "of which outside training",
        "together",
        "seeds/CPU-min alone",
        "together",
        "× (processes)",
        "× (training loops)",
    ):
        cost.add_column(col, justify="left" if col == "family" else "right")
    for family, m in measured.items():
        if not m["alone"]:
            continue
        s = summary(family, m)
        cost.add_row(
            family,
            str(s["full_steps"]),
            _fmt(s["cpu_s_per_seed_alone"]),
            _fmt(s["outside_training_cpu_s_alone"]),
            _fmt(s.get("cpu_s_per_seed_together")),
            _fmt(s["seeds_per_cpu_minute_alone"], ".2f"),
            _fmt(s.get("seeds_per_cpu_minute_together"), ".2f"),
            _fmt(s.get("ratio"), ".2f"),
            _fmt(s.get("training_ratio"), ".2f"),
        )
    if any(m["alone"] for m in measured.values()):
        console.print(cost)
    for family, m in measured.items():
        console.print(f"  {family}: stopping rule (design): {m['stopping']}")
    if args.profile and not args.parallel_only:
        _render_flops(console, measured)
        _render_profile(console, measured)
    if args.parallel:
        par = Table(title="two units at once (-j 2, one thread each) against one after the other (two threads each)")
        for col in (
            "family",
            "seeds a unit",
            "wall s -j 2",
            "wall s 2 threads",
            "CPU s -j 2",
            "CPU s 2 threads",
            "faster",
        ):
            par.add_column(col, justify="left" if col == "family" else "right")
        for family, m in measured.items():
            if "parallel" in m:
                p, s = m["parallel"], summary(family, m)
                par.add_row(
                    family,
                    str(p["seeds_per_unit"]),
                    _fmt(p["jobs2"]["wall_s"]),
                    _fmt(p["threads2"]["wall_s"]),
                    _fmt(p["jobs2"]["cpu_s"]),
                    _fmt(p["threads2"]["cpu_s"]),
                    f"{s['faster']} ({max(s['jobs2_over_threads2'], 1 / s['jobs2_over_threads2']):.2f}×)",
                )
        console.print(par)
    loads = ", ".join(f"{f} {m['load_before']} → {m['load_after']}" for f, m in measured.items())
    console.print(f"load average (1, 5, 15 min) before → after each family: {loads}; {os.cpu_count()} CPUs")


def _render_flops(console, measured) -> None:
    from rich.table import Table

    table = Table(title="a training step's GFLOP/s against the model's own matmul shapes replayed alone (same run)")
    for col in (
        "family",
        "stage",
        "GFLOP/step",
        "GFLOP/s alone",
        "matmuls alone",
        "share",
        "together",
        "matmuls",
        "share",
    ):
        table.add_column(col, justify="left" if col in ("family", "stage") else "right")
    for family, m in measured.items():
        together = m.get("profile_together") or [None] * len(m["profile_alone"])
        costs = m["alone"][0]["stages"]
        costs_t = m["together"]["stages"] if "together" in m else [None] * len(costs)
        for p, pt, c, ct in zip(m["profile_alone"], together, costs, costs_t):
            flops = p["flops_per_step"]
            rate = flops / (c["cpu_s"] / max(c["steps"], 1))
            row = [family, p["recipe"], _fmt(flops / 1e9, ".3f"), _fmt(rate / 1e9), _fmt(p["matmul_flops_per_s"] / 1e9)]
            row.append(f"{rate / p['matmul_flops_per_s']:.0%}")
            if pt is not None and ct is not None:
                rate_t = flops * ct["seeds"] / (ct["cpu_s"] / max(ct["steps"], 1))
                row += [
                    _fmt(rate_t / 1e9),
                    _fmt(pt["matmul_flops_per_s"] / 1e9),
                    f"{rate_t / pt['matmul_flops_per_s']:.0%}",
                ]
            else:
                row += ["—", "—", "—"]
            table.add_row(*row)
    console.print(table)


def _render_profile(console, measured) -> None:
    from rich.table import Table

    from benchmarks.step_profile import PHASES

    table = Table(title="where a step's time goes (torch.profiler; ms per step, and shares of it)")
    for col in ("family", "stage", "side", "ms/step", *PHASES, "outside ATen ops"):
        table.add_column(col, justify="left" if col in ("family", "stage", "side") else "right")
    for family, m in measured.items():
        for side, key in (("alone", "profile_alone"), (f"{m['seeds']} together", "profile_together")):
            for stage in m.get(key, []):
                p = stage["profile"]
                step = p["step_ms"] or float("nan")
                shares = [f"{p['phases_ms'][ph] / step:.0%}" for ph in PHASES]
                table.add_row(family, stage["recipe"], side, _fmt(step), *shares, f"{p['outside_ops_ms'] / step:.0%}")
    console.print(table)


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_synthetic", description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=ROWS, help="a family (repeatable; default: every one)")
    parser.add_argument("--steps", type=int, default=None, help="steps a training stage (default: its schedule)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds trained together (default: a design's 10)")
    parser.add_argument("--alone", type=int, default=2, help="lone processes measured (one per seed; default 2)")
    parser.add_argument("--no-profile", dest="profile", action="store_false", help="skip FLOPs and the profile")
    parser.add_argument("--no-parallel", dest="parallel", action="store_false", help="skip -j 2 against 2 threads")
    parser.add_argument(
        "--parallel-only", action="store_true", help="only -j 2 against 2 threads (no cost, no profile)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every number here")
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.alone < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--seeds must be at least 2, --alone and --steps at least 1")
    if args.parallel_only and not args.parallel:
        parser.error("--parallel-only measures -j 2 against 2 threads; it takes no --no-parallel")
    console = Console() if sys.stdout.isatty() else Console(width=160)
    measured: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.family or list(ROWS):
            measured[family] = measure(family, args, Path(tmp) / family, console.print)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpus": os.cpu_count(),
        "steps": args.steps,
        "families": {f: {**m, "summary": summary(f, m)} for f, m in measured.items()},
    }
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, result)
    render(console, measured, args)
    return result


if __name__ == "__main__":
    main()
