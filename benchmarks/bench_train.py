"""Training speed of MCAN and MCAN+PA at the paper's sizes, and the FLOP utilisation it implies.

    python -m benchmarks.bench_train                    # batch 64, 3 timed steps, on the GPU if there is one
    python -m benchmarks.bench_train --quick            # batch 8, 2 timed steps
    python -m benchmarks.bench_train --device cpu --batch 64 --steps 2 --json out.json

Baseline, measured in the same run: a dense square matmul on the same device and dtype; its
FLOP/s is the "peak" the utilisation is a ratio of. A training step is forward + backward + Adam
on a random batch in the data interface's format (14 tokens, 100 regions); its FLOPs are counted
with torch.utils.flop_counter.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from repro.families.mcan_pa.family import PAPER_NUM_ANSWERS, PAPER_NUM_TOKENS, build_model, example_batch
from repro.nn.measure import count_flops
from repro.train.losses import compute_loss
from repro.train.recipe import load_recipe
from repro.train.trainer import _autocast, build_optimizer, resolve_precision

MODELS = {
    "MCAN": {"arch": "mcan"},
    "MCAN+PA": {"arch": "mcan", "positional": ["pwa", "poa", "pma"], "fusion": "eq8"},
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, repeats: int = 5) -> float:
    """FLOP/s of a size x size matmul (best of `repeats`)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def bench_model(
    name: str, batch_size: int, steps: int, warmup: int, device: torch.device, precision: str, progress, task
) -> dict:
    torch.manual_seed(0)
    model = build_model(MODELS[name], PAPER_NUM_TOKENS, PAPER_NUM_ANSWERS).to(device)
    batch = example_batch(batch_size, device=device)
    batch["target"] = (torch.rand(batch_size, PAPER_NUM_ANSWERS, device=device) > 0.999).float()
    flops = count_flops(model, batch, backward=True)
    recipe = load_recipe("mcan-pa/vqa2")
    optimizer = build_optimizer(recipe, model.parameters())
    model.train()
    times = []
    for i in range(warmup + steps):
        _sync(device)
        start = time.perf_counter()
        with _autocast(precision, device):
            logits = model(batch)
        loss = compute_loss("bce-sum", logits, batch["target"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        _sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
        progress.advance(task)
    step_s = sorted(times)[len(times) // 2]
    return {
        "model": name,
        "batch": batch_size,
        "steps_per_s": 1 / step_s,
        "samples_per_s": batch_size / step_s,
        "flops_per_step": flops,
        "achieved_flops": flops / step_s,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_train", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per model (median reported)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated: {', '.join(MODELS)}")
    parser.add_argument("--quick", action="store_true", help="batch 8, 2 timed steps")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.steps = 8, 2
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = resolve_precision(args.precision, device)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    console = Console() if sys.stdout.isatty() else Console(width=120)
    peak = matmul_peak(device, dtype, 4096 if device.type == "cuda" else 1024)
    rows = []
    with Progress(console=console, transient=True) as progress:
        for name in names:
            task = progress.add_task(f"{name} batch {args.batch}", total=args.warmup + args.steps)
            rows.append(bench_model(name, args.batch, args.steps, args.warmup, device, precision, progress, task))
    base = rows[0]["steps_per_s"]
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    table = Table(title=f"training steps on {where}, {precision}; baseline matmul {peak / 1e9:.1f} GFLOP/s")
    for col in (
        "model",
        "batch",
        "steps/s",
        "samples/s",
        "GFLOP/step",
        "GFLOP/s",
        "utilisation",
        f"× {rows[0]['model']}",
    ):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        r["utilisation"] = r["achieved_flops"] / peak
        r["relative_speed"] = r["steps_per_s"] / base
        table.add_row(
            r["model"],
            str(r["batch"]),
            f"{r['steps_per_s']:.3f}",
            f"{r['samples_per_s']:.1f}",
            f"{r['flops_per_step'] / 1e9:.1f}",
            f"{r['achieved_flops'] / 1e9:.1f}",
            f"{r['utilisation']:.1%}",
            f"{r['relative_speed']:.2f}",
        )
    console.print(table)
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, {"device": where, "precision": precision, "matmul_peak_flops": peak, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
