"""ace-rpe's training steps with its images kept against decoded for every item (`repro.families.ace_rpe.data`).

    python -m benchmarks.bench_acerpe_images                        # Table 2's SNLI-VE fine-tuning, 200 steps
    python -m benchmarks.bench_acerpe_images --stage nlvr2 --steps 300
    python -m benchmarks.bench_acerpe_images --stage retrieval --steps 100 --repeats 3

One stage of a row at its synthetic scale: `snli-ve` or `nlvr2`, Table 2's fine-tuning on that task (its generated task
files, `tasks.train_data`, the row's task model from its initial weights, the scale's task recipe and batch), or Table
1's `pretrain` or `retrieval` as `bench_acerpe_ensemble` trains them; one seed, `--threads` threads, in a fresh spawned
process a side, with the images read without augmentation kept once decoded (`load_image`, what runs do) against
`KEEP_BYTES = 0` (every item decoded each time it is drawn, as before). The sides alternate `--repeats` times, so a
change in the machine's other work falls on both. Reported: CPU seconds of the training loops, per step, and their
ratio; whether the two sides' final losses agree to the last bit (kept images are the decoded ones, so training is the
same); the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_acerpe_ensemble import STAGES, _load, train
from benchmarks.bench_ensemble import in_spawned_process

TASK_SPEC = "ace-rpe-table2-pe"
TASKS = ("snli-ve", "nlvr2")  # Table 2's fine-tuning stages


def train_reading(keep: bool, row: str, stage: str, steps: int, threads: int, workdir: str) -> dict:
    """In a spawned process: seed 0 of the row's stage for `steps` steps, images kept or decoded for every item."""
    from repro.families.ace_rpe import data

    if not keep:
        data.KEEP_BYTES = 0
    if stage in TASKS:
        return train_task(row, stage, steps, threads, workdir)
    return train(row, stage, [0], steps, threads, workdir)


def train_task(row_name: str, task: str, steps: int, threads: int, workdir: str) -> dict:
    """Seed 0 of Table 2's row on `task` (SNLI-VE or NLVR2) for `steps` steps, as its unit fine-tunes it."""
    import torch

    torch.set_num_threads(threads)
    from repro.families.ace_rpe import tasks
    from repro.families.ace_rpe.build import TASK_RECIPES, build_model
    from repro.families.ace_rpe.data import tokenizer
    from repro.families.ace_rpe.sources import run_vocabulary
    from repro.families.ace_rpe.stages import train_stage
    from repro.families.ace_rpe.tasks_data import TaskCollate
    from repro.families.base import RunContext, with_data
    from repro.specs import resolve
    from repro.train.trainer import seed_everything

    spec = resolve(TASK_SPEC)
    settings = spec.scales["synthetic"]
    ctx = with_data(
        RunContext(
            spec,
            spec.row(row_name),
            spec.row(row_name).config,
            "synthetic",
            settings,
            0,
            Path(workdir) / "seed0",
            progress=False,
        )
    )
    tok = tokenizer(run_vocabulary(ctx.data))
    sizes = {**settings["sizes"], "vocab_size": len(tok), "pad_token_id": tok.pad_token_id}
    sizes.update(cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id, mask_token_id=tok.mask_token_id)
    files = tasks._files(ctx.data["tasks"], ctx.data["root"])
    items = tasks.train_data(files, task, sizes["image_size"])
    overrides = {**tasks.recipe_overrides(settings, "task_recipe"), "max_steps": steps}
    recipe = ctx.recipe(name=TASK_RECIPES[task], overrides=overrides)
    seed_everything(0)
    model = build_model(ctx.config, sizes, task=task)
    collate = TaskCollate(tok, int(settings.get("max_tokens", 30)))
    cpu, wall = time.process_time(), time.perf_counter()
    done = train_stage([ctx], [model], items, [recipe], task, collate)
    return {
        "train_cpu_s": time.process_time() - cpu,
        "train_wall_s": time.perf_counter() - wall,
        "steps": done[0]["steps"],
        "final_loss": [d["final_loss"] for d in done],
    }


def main(argv: list[str] | None = None) -> dict:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_acerpe_images", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--row", default="ACE-RPE", help="a row of Table 2, or of Table 1 (default: %(default)s)")
    parser.add_argument(
        "--stage", default="snli-ve", choices=(*TASKS, *STAGES), help="the stage trained (default: %(default)s)"
    )
    parser.add_argument("--steps", type=int, default=200, help="optimisation steps a side and repeat")
    parser.add_argument("--repeats", type=int, default=2, help="times each side runs, alternating")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each process")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or args.threads < 1:
        parser.error("--steps, --repeats and --threads must be at least 1")
    console = Console() if sys.stdout.isatty() else Console(width=120)
    load_start = os.getloadavg()
    runs: dict[str, list[dict]] = {"decoded for every item": [], "kept once decoded": []}
    with tempfile.TemporaryDirectory() as tmp:
        in_spawned_process(train_reading, True, args.row, args.stage, 1, args.threads, f"{tmp}/warm")  # data made once
        for repeat in range(args.repeats):
            for name, keep in (("decoded for every item", False), ("kept once decoded", True)):
                console.print(f"{name}, repeat {repeat + 1} …")
                out = in_spawned_process(
                    train_reading, keep, args.row, args.stage, args.steps, args.threads, f"{tmp}/{keep}{repeat}"
                )
                runs[name].append(out)
    load_end = os.getloadavg()

    per_step = {name: statistics.median(r["train_cpu_s"] / r["steps"] for r in rs) for name, rs in runs.items()}
    base, kept = per_step["decoded for every item"], per_step["kept once decoded"]
    same = all(
        a["final_loss"] == b["final_loss"] for a, b in zip(runs["decoded for every item"], runs["kept once decoded"])
    )
    spec = TASK_SPEC if args.stage in TASKS else "ace-rpe-table1-pe"
    title = f"{spec} {args.row!r} {args.stage}, synthetic: {args.steps} steps, {args.threads} thread(s)"
    table = Table(title=title)
    for col in ("", "CPU ms a step (median)", "× decoded"):
        table.add_column(col, justify="left" if not col else "right")
    for name, value in per_step.items():
        table.add_row(name, f"{1000 * value:.1f}", f"{base / value:.2f}")
    console.print(table)
    console.print(f"final losses the same to the last bit: {'yes' if same else 'NO'}")
    console.print(f"load average: {_load(load_start)} at the start, {_load(load_end)} at the end")
    result = {
        "row": args.row,
        "stage": args.stage,
        "steps": args.steps,
        "repeats": args.repeats,
        "threads": args.threads,
        "cpu_s_per_step": per_step,
        "speedup": base / kept,
        "same_final_loss": same,
        "load_start": load_start,
        "load_end": load_end,
    }
    if args.json:
        import json

        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
