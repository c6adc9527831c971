"""ace-rpe's seeds per CPU-minute: a row's seeds trained together (`ensemble: true`) against one process per seed.

    python -m benchmarks.bench_acerpe_ensemble                                   # ACE-RPE+Lace pre-training, 4 seeds
    python -m benchmarks.bench_acerpe_ensemble --stage retrieval --row None --seeds 6 --steps 100

One stage of a row of Table 1 at its synthetic scale, as `repro run ace-rpe-table1-pe --scale synthetic` trains it
(its generated pairs, tiny ALBEF, recipe and batch), stopped after `--steps` optimisation steps: `pretrain` (ITC, ITM,
MLM, MIM and L_ace for the +Lace rows, from the row's initial weights) or `retrieval` (Flickr30K fine-tuning, from
them as well: the benchmark times the step, not what it starts from). Both sides run in spawned processes with
`--threads` threads each (1: what `jobs: 2` gives each worker on 2 cores); the baseline, measured in the same run,
is one fresh process per seed. Reported: CPU seconds of the whole processes and of the training loops, seeds per
CPU-minute and their ratio, and the machine's load average when the run started and ended (CPU time is the
processes' own, so other jobs slow the wall clock more than these numbers). The seeds draw their random masks
(MLM, MIM, ITM negatives) from one generator together, so their losses are another draw of the same training, not
the lone runs' to the last bit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_ensemble import in_spawned_process, sides_table

SPEC = "ace-rpe-table1-pe"
SCALE = "synthetic"
STAGES = ("pretrain", "retrieval")


def train(row_name: str, stage: str, seeds: list[int], steps: int, threads: int, workdir: str) -> dict:
    """In a spawned process: `seeds` of the row's `stage` for `steps` steps, alone (one seed) or together."""
    import torch

    torch.set_num_threads(threads)
    from repro.families.ace_rpe.build import FINETUNE_RECIPES, PRETRAIN_RECIPE, build_model
    from repro.families.ace_rpe.data import Collate, PairDataset, read_annotations, tokenizer
    from repro.families.ace_rpe.sources import run_vocabulary
    from repro.families.ace_rpe.stages import train_stage
    from repro.families.base import RunContext, with_data
    from repro.specs import resolve
    from repro.train.trainer import seed_everything

    spec = resolve(SPEC)
    row = spec.row(row_name)
    settings = spec.scales[SCALE]
    ctxs = [
        RunContext(spec, row, row.config, SCALE, settings, seed, Path(workdir) / f"seed{seed}", progress=False)
        for seed in seeds
    ]
    ctxs = [with_data(c) for c in ctxs]
    tok = tokenizer(run_vocabulary(ctxs[0].data))
    sizes = {**settings["sizes"], "vocab_size": len(tok), "pad_token_id": tok.pad_token_id}
    sizes.update(cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id, mask_token_id=tok.mask_token_id)
    root = ctxs[0].data["root"]
    kind, name = ("pretrain", "pretrain.json") if stage == "pretrain" else ("train", "flickr30k_train.json")
    pairs = PairDataset(read_annotations(root / name, kind), root, sizes["image_size"])
    recipe_name, overrides = (
        (PRETRAIN_RECIPE, settings.get("pretrain_recipe", {}))
        if stage == "pretrain"
        else (FINETUNE_RECIPES["flickr30k"], settings.get("recipe", {}))
    )
    recipes = [c.recipe(name=recipe_name, overrides={**overrides, "max_steps": steps}) for c in ctxs]
    models = []
    for c in ctxs:
        seed_everything(c.seed)
        models.append(build_model(c.config, sizes, task=stage))
    cpu, wall = time.process_time(), time.perf_counter()
    done = train_stage(ctxs, models, pairs, recipes, stage, Collate(tok, int(settings.get("max_tokens", 30))))
    return {
        "train_cpu_s": time.process_time() - cpu,
        "train_wall_s": time.perf_counter() - wall,
        "steps": done[0]["steps"],
        "final_loss": [d["final_loss"] for d in done],
    }


def _load(triple: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in triple) + " (1 / 5 / 15 min)"


def run_in_process(row: str, stage: str, seeds: list[int], steps: int, threads: int, workdir: Path) -> dict:
    return in_spawned_process(train, row, stage, seeds, steps, threads, str(workdir))


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_acerpe_ensemble", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--row", default="ACE-RPE+Lace", help="a row of Table 1 (default: %(default)s)")
    parser.add_argument("--stage", default="pretrain", choices=STAGES, help="the stage trained (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=4, help="how many seeds (0, 1, ...)")
    parser.add_argument("--steps", type=int, default=60, help="optimisation steps per seed")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each process")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.steps < 1 or args.threads < 1:
        parser.error("--seeds must be at least 2, --steps and --threads at least 1")
    seeds = list(range(args.seeds))
    console = Console() if sys.stdout.isatty() else Console(width=120)
    load_start = os.getloadavg()
    console.print(f"load average at the start: {_load(load_start)} on {os.cpu_count()} CPU(s)")
    with tempfile.TemporaryDirectory() as tmp:
        run_in_process(args.row, args.stage, seeds[:1], 1, args.threads, Path(tmp) / "warm")  # data generated once
        alone = []
        for seed in seeds:
            console.print(f"one process for seed {seed} …")
            alone.append(run_in_process(args.row, args.stage, [seed], args.steps, args.threads, Path(tmp) / "alone"))
        console.print(f"one process for seeds {seeds} together …")
        together = run_in_process(args.row, args.stage, seeds, args.steps, args.threads, Path(tmp) / "together")

    load_end = os.getloadavg()
    n = len(seeds)
    keys = ("process_cpu_s", "train_cpu_s", "process_wall_s")
    sides = {
        "one process per seed": {k: sum(a[k] for a in alone) for k in keys},
        "seeds together": {k: together[k] for k in keys},
    }
    for side in sides.values():
        side["seeds_per_cpu_minute"] = n / (side["process_cpu_s"] / 60)
        side["seeds_per_train_cpu_minute"] = n / (side["train_cpu_s"] / 60)
    base, ens = sides["one process per seed"], sides["seeds together"]
    ratio = ens["seeds_per_cpu_minute"] / base["seeds_per_cpu_minute"]
    train_ratio = ens["seeds_per_train_cpu_minute"] / base["seeds_per_train_cpu_minute"]
    title = f"{SPEC} {args.row!r} {args.stage} at scale {SCALE}: {n} seeds × {args.steps} steps"
    title += f", {args.threads} thread(s)"
    console.print(sides_table(title, sides, base))
    console.print(f"ratio {ratio:.2f}× whole processes, {train_ratio:.2f}× training loops")
    console.print(f"load average: {_load(load_start)} at the start, {_load(load_end)} at the end")
    result = {
        "spec": SPEC,
        "row": args.row,
        "stage": args.stage,
        "seeds": n,
        "steps": args.steps,
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "load_average": {"start": load_start, "end": load_end},
        "sides": sides,
        "ratio": ratio,
        "train_ratio": train_ratio,
        "final_loss": {"alone": [a["final_loss"][0] for a in alone], "together": together["final_loss"]},
    }
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, result)
    return result


if __name__ == "__main__":
    main()
