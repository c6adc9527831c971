"""Seeds per CPU-minute: a row's seeds trained together (`ensemble: true`) against one process per seed.

    python -m benchmarks.bench_ensemble                          # MCAN+PA, 4 seeds, 150 steps each
    python -m benchmarks.bench_ensemble --seeds 6 --steps 300 --row MCAN --json out.json
    python -m benchmarks.bench_ensemble --spec dsganet-table7-ablation --row 5    # DSGANet-O
    python -m benchmarks.bench_ensemble --spec sa-m4c-table2-ablations            # SA-M4C, c = 2
    python -m benchmarks.bench_ensemble --spec psac-table3-vpsa --task action     # one task's model of a row

Both sides train a row at its table's synthetic scale exactly as `repro run ID --scale synthetic` does (its
generated data, model sizes, recipe and batch; by default Table V of MCAN+PA), stopped after `--steps`
optimisation steps, in spawned processes with `--threads` threads each (1: what `jobs: 2` gives each
worker on 2 cores). The baseline, measured in the same run: one fresh process per seed, as a Slurm job per
(row, seed) starts it. Reported: CPU seconds of the whole processes (start-up and imports included: they are
part of what one process per seed costs), of the training loops alone, and the ratio of seeds per CPU-minute.
`repro run -j N` keeps its N worker processes from unit to unit, so there start-up is paid once per worker
and the training loops' ratio is the one that counts. Evaluation is the same per seed on both sides and is
left out.
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

# tables whose families train seeds together, and the row measured by default
SPECS = {
    "mcan-pa-table5-ablation": "MCAN+PA (ours)",
    "dsganet-table7-ablation": "5",
    "sa-m4c-table2-ablations": "7 SA-M4C (ours)",
    "psac-table3-vpsa": "w/ 1 VPSA",
}
SCALE = "synthetic"


def _contexts(spec_id: str, row_name: str, seeds: list[int], workdir: Path):
    from repro.families.base import RunContext
    from repro.specs import resolve

    spec = resolve(spec_id)
    row = spec.row(row_name)
    settings = spec.scales[SCALE]
    return [
        RunContext(spec, row, row.config, SCALE, settings, seed, workdir / f"seed{seed}", progress=False)
        for seed in seeds
    ]


def _training(spec_id: str, ctxs, task: str):
    """The row's training questions, and per seed its recipe and model, as its family's `run_row` makes them; the
    loss step."""
    from repro.families.base import with_data
    from repro.train.trainer import recipe_loss_step, seed_everything

    ctxs = [with_data(ctxs[0]), *ctxs[1:]]  # the data, prepared once, as the launcher does
    if spec_id.startswith("psac"):
        from repro.families.psac import build as psac
        from repro.families.psac import tasks

        split, recipes, models = tasks.task_inputs(ctxs, task, ctxs[0].data["root"])  # no frame store: generated
        return split["Train"], recipes, models, psac.loss_step(task)
    if spec_id.startswith("sa-m4c"):
        from repro.families.sa_m4c import build as m4c
        from repro.families.sa_m4c.model import decoding_bce
        from repro.families.sa_m4c.splits import read_splits

        splits = read_splits(ctxs[0])
        train_set = splits.train
        recipes = [c.recipe(train_splits=("train",)) for c in ctxs]
        build = lambda c: m4c.build_model(c.config, len(splits.vocab), sizes=splits.sizes)  # noqa: E731
        loss_step = decoding_bce
    else:
        if spec_id.startswith("dsganet"):
            from repro.families.dsganet import build as family_build
            from repro.families.dsganet import data

            train_set = data.splits(ctxs[0]).train
        else:
            from repro.families.mcan_pa import build as family_build
            from repro.families.mcan_pa import data

            train_set = data.scenes(ctxs[0]).train
        recipes = [c.recipe(train_splits=("train",)) for c in ctxs]
        build = lambda c: family_build.build_model(  # noqa: E731
            c.config, train_set.num_tokens, train_set.num_answers, sizes=c.settings["sizes"]
        )
        loss_step = recipe_loss_step(recipes[0].loss)
    models = []
    for c in ctxs:
        seed_everything(c.seed)
        models.append(build(c))
    return train_set, recipes, models, loss_step


def train(spec_id: str, row_name: str, task: str, seeds: list[int], steps: int, threads: int, workdir: str) -> dict:
    """In a spawned process: train `seeds` of the row for `steps` steps, alone (one seed) or together."""
    import torch

    torch.set_num_threads(threads)
    from repro.train import fit
    from repro.train.ensemble import fit_ensemble

    ctxs = _contexts(spec_id, row_name, seeds, Path(workdir))
    train_set, recipes, models, step = _training(spec_id, ctxs, task)
    recipes = [r.replace(max_steps=steps) for r in recipes]
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


def children_cpu() -> float:
    """CPU seconds (user + sys) of this process's children that have ended."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def in_spawned_process(fn, *args) -> dict:
    """`fn(*args)` in one fresh spawned process, its result with the process's whole CPU time (from the children's
    rusage) and wall time."""
    before, wall = children_cpu(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        out = pool.submit(fn, *args).result()
    return {**out, "process_cpu_s": children_cpu() - before, "process_wall_s": time.perf_counter() - wall}


def run_in_process(spec_id: str, row: str, task: str, seeds: list[int], steps: int, threads: int, workdir: Path):
    return in_spawned_process(train, spec_id, row, task, seeds, steps, threads, str(workdir))


def sides_table(title: str, sides: dict[str, dict], base: dict):
    """The together-against-alone table: each side's CPU and wall seconds, seeds per CPU-minute, ratio to `base`."""
    from rich.table import Table

    table = Table(title=title)
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
    return table


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_ensemble", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=next(iter(SPECS)), choices=SPECS, help="the table (default: %(default)s)")
    parser.add_argument("--row", default=None, help="a row of the table (default: its full model, e.g. MCAN+PA (ours))")
    parser.add_argument("--task", default="frameqa", help="psac: the TGIF-QA task whose model is trained")
    parser.add_argument("--seeds", type=int, default=4, help="how many seeds (0, 1, ...)")
    parser.add_argument("--steps", type=int, default=150, help="optimisation steps per seed")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each process")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.steps < 1 or args.threads < 1:
        parser.error("--seeds must be at least 2, --steps and --threads at least 1")
    seeds = list(range(args.seeds))
    spec_id = args.spec
    row = args.row or SPECS[spec_id]
    task = f" ({args.task})" if spec_id.startswith("psac") else ""

    from repro.errors import ReproError

    try:
        ctxs = _contexts(spec_id, row, seeds[:1], Path("."))
        _training(spec_id, ctxs, args.task)  # the data generated once, before anything is timed
    except ReproError as err:
        parser.error(str(err))
    console = Console() if sys.stdout.isatty() else Console(width=120)
    with tempfile.TemporaryDirectory() as tmp:
        alone = []
        for seed in seeds:
            console.print(f"one process for seed {seed} …")
            alone.append(run_in_process(spec_id, row, args.task, [seed], args.steps, args.threads, Path(tmp) / "alone"))
        console.print(f"one process for seeds {seeds} together …")
        together = run_in_process(spec_id, row, args.task, seeds, args.steps, args.threads, Path(tmp) / "together")

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

    title = f"{spec_id} {row!r}{task} at scale {SCALE}: {n} seeds × {args.steps} steps, {args.threads} thread(s) each"
    console.print(sides_table(title, sides, base))
    console.print(
        f"ratio {ratio:.2f}× whole processes, {train_ratio:.2f}× training loops; largest relative gap in a seed's "
        f"final loss: {loss_gap:.1e} (with dropout the seeds draw other masks together than alone)"
    )
    result = {
        "spec": spec_id,
        "row": row,
        "task": args.task if task else None,
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
