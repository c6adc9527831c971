"""Seeds per GPU-hour: a row's seeds trained together on one GPU against one at a time, MCAN at the paper's sizes.

    python -m benchmarks.bench_gpu_ensemble                        # MCAN and MCAN+PA, 2, 4 and 8 seeds, on the GPU
    python -m benchmarks.bench_gpu_ensemble --models MCAN --together 2,4 --steps 30 --json out.json
    python -m benchmarks.bench_gpu_ensemble --tiny --device cpu    # a tiny model: checks the script, measures nothing

Both sides train through the trainer a run uses: one at a time, `repro.train.fit` for each seed in turn; together,
`repro.train.ensemble.fit_ensemble` (what `repro run --ensemble` trains with), each seed initialised from its own
seed. The model is MCAN (or MCAN+PA, Table V's full row) at the paper's sizes and vocabularies, the recipe
mcan-pa/vqa2 (Adam, batch 64, fp32, the mcan schedule), on random items in the data interface's format held on the
device (`repro.train.ready`: every batch one gather), so the data path costs both sides the same and what is
compared is the model's step. A step's time is the median gap between consecutive optimisation steps after
`--warmup` (the GPU synchronised at each); seeds per GPU-hour are `seeds / (steps_per_seed x step time)`, so their
ratio is the ratio of seed-steps per second. Peak memory is `torch.cuda.max_memory_allocated` of each side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def random_split(items: int, scale: tuple, device):
    """`items` random items of MCAN's data interface, with BCE targets, held on `device` as ready tensors."""
    import torch

    from repro.families.mcan_pa.build import example_batch
    from repro.train.ready import ReadyTensors

    sizes, num_tokens, num_answers = scale
    tensors = example_batch(items, sizes, num_tokens=num_tokens, device=device)
    g = torch.Generator().manual_seed(1)
    tensors["target"] = (torch.rand(items, num_answers, generator=g) > 0.999).float().to(device)
    return ReadyTensors(tensors, source=None)


def train_side(name, seeds: list[int], together: bool, split, scale: tuple, recipe, warmup: int, device, workdir: Path):
    """Train `seeds` of model `name` for the recipe's steps; the median step time after warm-up and peak memory."""
    import torch

    from benchmarks.bench_train import MODELS, _sync
    from repro.families.mcan_pa.build import build_model
    from repro.train import fit
    from repro.train.ensemble import fit_ensemble
    from repro.train.trainer import seed_everything

    sizes, num_tokens, num_answers = scale

    def models_for(group):
        built = []
        for seed in group:
            seed_everything(seed)
            built.append(build_model(MODELS[name], num_tokens, num_answers, sizes=sizes))
        return built

    gaps: list[float] = []

    def timer():
        stamps: list[float] = []

        def on_step(step: int) -> None:
            _sync(device)
            stamps.append(time.perf_counter())
            if step > warmup:
                gaps.append(stamps[-1] - stamps[-2])

        return on_step

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    recipes = [recipe.replace(seed=s) for s in seeds]
    dirs = [workdir / f"seed{s}" for s in seeds]
    if together:
        fit_ensemble(models_for(seeds), split, recipes, dirs, device=device, progress=False, on_step=timer())
        per_seed = statistics.median(gaps)
    else:
        medians = []
        for seed, r, d in zip(seeds, recipes, dirs):
            gaps.clear()
            fit(models_for([seed])[0], split, r, d, device=device, progress=False, on_step=timer())
            medians.append(statistics.median(gaps))
        per_seed = sum(medians)  # one step of every seed, one after another
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {"step_s": per_seed, "seed_steps_per_s": len(seeds) / per_seed, "peak_gib": peak}


def _gib(side: dict | None) -> str:
    return "-" if side is None or side["peak_gib"] is None else f"{side['peak_gib']:.1f}"


def main(argv: list[str] | None = None) -> dict:
    import torch
    from rich.console import Console
    from rich.table import Table

    from benchmarks.bench_train import MODELS, PAPER, TINY
    from repro.families import load_recipe

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_gpu_ensemble", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="MCAN,MCAN+PA", help="comma-separated: MCAN, MCAN+PA")
    parser.add_argument("--together", default="2,4,8", help="seed counts trained together (comma-separated)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per seed")
    parser.add_argument("--warmup", type=int, default=5, help="steps before the timed ones")
    parser.add_argument("--batch", type=int, default=64, help="batch per seed (the paper's: 64)")
    parser.add_argument("--tiny", action="store_true", help="a tiny model: checks the script, measures nothing")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    try:
        counts = sorted({int(k) for k in args.together.split(",")})
    except ValueError:
        parser.error(f"--together: comma-separated whole numbers, not {args.together!r}")
    if any(m not in MODELS for m in names) or not names:
        parser.error(f"--models: some of {', '.join(MODELS)}")
    if not counts or counts[0] < 2 or args.steps < 2 or args.warmup < 1 or args.batch < 1:
        parser.error("--together counts at least 2, --steps at least 2, --warmup and --batch at least 1")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_ensemble: no CUDA device here (give --device cpu with --tiny to check the script)")
        sys.exit(2)
    scale = TINY if args.tiny else PAPER
    total = args.warmup + args.steps
    recipe = load_recipe("mcan-pa/vqa2").replace(batch_size=args.batch, max_steps=total, precision="fp32")
    split = random_split(args.batch * total, scale, device)  # one epoch is the whole run: no checkpoint is written

    console = Console() if sys.stdout.isatty() else Console(width=140)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for k in counts:
                seeds = list(range(k))
                console.print(f"{name}: {k} seeds one at a time …")
                alone = train_side(name, seeds, False, split, scale, recipe, args.warmup, device, Path(tmp) / f"a{k}")
                console.print(f"{name}: {k} seeds together …")
                try:
                    ens = train_side(name, seeds, True, split, scale, recipe, args.warmup, device, Path(tmp) / f"t{k}")
                except torch.OutOfMemoryError as err:
                    console.print(f"{name}: {k} seeds together do not fit: {str(err).splitlines()[0]}")
                    ens = None
                rows.append({"model": name, "seeds": k, "alone": alone, "together": ens})

    sizes = "a tiny model" if args.tiny else "paper sizes"
    table = Table(title=f"seeds together on one {gpu}, {sizes}, batch {args.batch} a seed, fp32")
    for col in (
        "model",
        "seeds",
        "s/step alone (all seeds)",
        "s/step together",
        "× seeds per GPU-hour",
        "peak GiB alone",
        "peak GiB together",
    ):
        table.add_column(col, justify="left" if col == "model" else "right")
    for row in rows:
        a, t = row["alone"], row["together"]
        ratio = t["seed_steps_per_s"] / a["seed_steps_per_s"] if t else None
        row["ratio"] = ratio
        table.add_row(
            row["model"],
            str(row["seeds"]),
            f"{a['step_s']:.4f}",
            f"{t['step_s']:.4f}" if t else "out of memory",
            f"{ratio:.2f}" if t else "-",
            _gib(a),
            _gib(t),
        )
    console.print(table)
    console.print(
        f"torch {torch.__version__}; median of {args.steps} steps after {args.warmup} warm-up steps"
        f"{' (tiny model: not a measurement)' if args.tiny else ''}"
    )
    result = {"device": gpu, "torch": torch.__version__, "batch": args.batch, "steps": args.steps, "rows": rows}
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, result)
    return result


if __name__ == "__main__":
    main()
