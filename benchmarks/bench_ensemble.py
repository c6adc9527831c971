"""Seeds per CPU-minute: a row's seeds trained together (`ensemble: true`) against one process per seed.

    python -m benchmarks.bench_ensemble                          # MCAN+PA, 4 seeds, 150 steps each
    python -m benchmarks.bench_ensemble --seeds 6 --steps 300 --row MCAN --json out.json

Both sides train Table V's synthetic scale exactly as `repro run mcan-pa-table5-ablation --scale
synthetic` does (its generated data, model sizes, recipe, batch 64), stopped after `--steps`
optimisation steps, in spawned processes with `--threads` threads each (1: what `jobs: 2` gives each
worker on 2 cores). The baseline, measured in the same run: one fresh process per seed, as `repro
run` without the ensemble starts them. Reported: CPU seconds of the whole processes (start-up and
imports included: they are part of what one process per seed costs), of the training loops alone,
and the ratio of seeds per CPU-minute. Evaluation is the same per seed on both sides and is left out.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

SPEC = "mcan-pa-table5-ablation"
SCALE = "synthetic"


def _contexts(row_name: str, seeds: list[int], workdir: Path):
    from repro.families.base import RunContext
    from repro.specs import resolve

    spec = resolve(SPEC)
    row = spec.row(row_name)
    settings = spec.scales[SCALE]
    return [
        RunContext(spec, row, row.config, SCALE, settings, seed, workdir / f"seed{seed}", progress=False)
        for seed in seeds
    ]


def train(row_name: str, seeds: list[int], steps: int, threads: int, workdir: str) -> dict:
    """In a spawned process: train `seeds` of the row for `steps` steps, alone (one seed) or together."""
    import torch

    torch.set_num_threads(threads)
    from repro.families.mcan_pa import family
    from repro.train import fit
    from repro.train.ensemble import fit_ensemble
    from repro.train.trainer import seed_everything

    ctxs = _contexts(row_name, seeds, Path(workdir))
    data = family.prepare_data(ctxs[0].spec, SCALE, ctxs[0].settings)
    train_set, _ = family._generated_splits(ctxs[0], data)
    recipes = [family._generated_recipe(c).replace(max_steps=steps) for c in ctxs]
    models = []
    for c in ctxs:
        seed_everything(c.seed)
        models.append(
            family.build_model(c.config, train_set.num_tokens, train_set.num_answers, sizes=c.settings["sizes"])
        )
    step = family.loss_step(recipes[0].loss)
    cpu, wall = time.process_time(), time.perf_counter()
    if len(models) == 1:
        states = [fit(models[0], train_set, recipes[0], ctxs[0].workdir, progress=False, loss_step=step)]
    else:
        states = fit_ensemble(models, train_set, recipes, [c.workdir for c in ctxs], progress=False, loss_step=step)
    return {
        "train_cpu_s": time.process_time() - cpu,
        "train_wall_s": time.perf_counter() - wall,
        "steps": states[0].step,
        "final_loss": [s.final_loss for s in states],
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_in_process(row: str, seeds: list[int], steps: int, threads: int, workdir: Path) -> dict:
    """One fresh spawned process; its whole CPU time comes from the children's rusage."""
    before, wall = _children_cpu(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        out = pool.submit(train, row, seeds, steps, threads, str(workdir)).result()
    return {**out, "process_cpu_s": _children_cpu() - before, "process_wall_s": time.perf_counter() - wall}


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_ensemble", description=__doc__.splitlines()[0])
    parser.add_argument("--row", default="MCAN+PA (ours)", help=f"a row of {SPEC}")
    parser.add_argument("--seeds", type=int, default=4, help="how many seeds (0, 1, ...)")
    parser.add_argument("--steps", type=int, default=150, help="optimisation steps per seed")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each process")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.steps < 1 or args.threads < 1:
        parser.error("--seeds must be at least 2, --steps and --threads at least 1")
    seeds = list(range(args.seeds))

    from repro.families.mcan_pa import family

    ctx = _contexts(args.row, seeds[:1], Path("."))[0]
    family.prepare_data(ctx.spec, SCALE, ctx.settings)  # generated once, before anything is timed
    console = Console() if sys.stdout.isatty() else Console(width=120)
    with tempfile.TemporaryDirectory() as tmp:
        alone = []
        for seed in seeds:
            console.print(f"one process for seed {seed} …")
            alone.append(run_in_process(args.row, [seed], args.steps, args.threads, Path(tmp) / "alone"))
        console.print(f"one process for seeds {seeds} together …")
        together = run_in_process(args.row, seeds, args.steps, args.threads, Path(tmp) / "together")

    n = len(seeds)
    sides = {
        "one process per seed": {
            k: sum(a[k] for a in alone) for k in ("process_cpu_s", "train_cpu_s", "process_wall_s")
        },
        "seeds together": {k: together[k] for k in ("process_cpu_s", "train_cpu_s", "process_wall_s")},
    }
    for side in sides.values():
        side["seeds_per_cpu_minute"] = n / (side["process_cpu_s"] / 60)
        side["seeds_per_train_cpu_minute"] = n / (side["train_cpu_s"] / 60)
    base, ens = sides["one process per seed"], sides["seeds together"]
    ratio = ens["seeds_per_cpu_minute"] / base["seeds_per_cpu_minute"]
    train_ratio = ens["seeds_per_train_cpu_minute"] / base["seeds_per_train_cpu_minute"]
    loss_gap = max(abs(a["final_loss"][0] - b) / abs(a["final_loss"][0]) for a, b in zip(alone, together["final_loss"]))

    table = Table(
        title=f"{SPEC} {args.row!r} at scale {SCALE}: {n} seeds × {args.steps} steps, {args.threads} thread(s) each"
    )
    for col in ("", "CPU s (processes)", "CPU s (training)", "wall s", "seeds / CPU-minute", "× one per seed"):
        table.add_column(col, justify="left" if not col else "right")
    for name, side in sides.items():
        table.add_row(
            name,
            f"{side['process_cpu_s']:.1f}",
            f"{side['train_cpu_s']:.1f}",
            f"{side['process_wall_s']:.1f}",
            f"{side['seeds_per_cpu_minute']:.2f}",
            f"{side['seeds_per_cpu_minute'] / base['seeds_per_cpu_minute']:.2f}",
        )
    console.print(table)
    console.print(
        f"ratio {ratio:.2f}× whole processes, {train_ratio:.2f}× training loops; largest relative gap in a seed's "
        f"final loss (dropout masks differ): {loss_gap:.1e}"
    )
    result = {
        "spec": SPEC,
        "row": args.row,
        "seeds": n,
        "steps": args.steps,
        "threads": args.threads,
        "sides": sides,
        "ratio": ratio,
        "train_ratio": train_ratio,
    }
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, result)
    return result


if __name__ == "__main__":
    main()
