"""What a larger batch saves on a CPU at the synthetic scale: CPU milliseconds a training sample at the recipes'
batch and at multiples of it, per family. The ceiling of what larger batches (with the learning rate scaled) could
buy a seed, before asking whether training still converges in as many epochs.

    python -m benchmarks.bench_batch                          # every family, batch x1, x2, x4, 100 steps a stage
    python -m benchmarks.bench_batch --family mcan-pa --scale 1 --scale 8 --steps 60

One claim row of each family (`bench_synthetic.ROWS`) trains its unit as `repro run ID --scale synthetic` does, one
seed, one thread, each training stage stopped after `--steps` steps, in a fresh spawned process per multiple (one
after the other): every stage's recipe with its batch multiplied (nothing else changed: a sample's cost does not
depend on the learning rate). Per stage: CPU ms a sample at the steady rate (the last half of its steps,
`step_profile.steady_rate`, over the batch), and the recipes' batch over each multiple: above 1 a sample is cheaper
in the larger batch, and an epoch with it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_synthetic import ROWS, in_process, load, stage_rate, unit


def scaled_unit(spec_id: str, row: str, steps: int, workdir: str, scale: int) -> dict:
    """In a spawned process: `bench_synthetic.unit` for seed 0, every stage's batch multiplied by `scale`; the
    result gains the batch each stage trained with."""
    from repro.train import trainer

    batches: list[int] = []
    fit = trainer.fit

    def scaled_fit(model, dataset, recipe, workdir, **kwargs):
        recipe = recipe.replace(batch_size=recipe.batch_size * scale)
        batches.append(recipe.batch_size)
        return fit(model, dataset, recipe, workdir, **kwargs)

    trainer.fit = scaled_fit  # `repro.train.fit` reads it; the unit's meter wraps it in turn
    return {**unit(spec_id, row, [0], steps, 1, workdir, False), "batches": batches}


def per_sample_ms(stage: dict, batch: int) -> float:
    """A stage's CPU ms a sample: its `stage_rate` over the batch."""
    return stage_rate(stage) * 1e3 / batch


def measure(family: str, steps: int, scales: list[int], tmp: Path) -> list[dict[str, Any]]:
    """Per training stage of the family's row: the batch and ms a sample at each multiple, and the ratios."""
    spec_id, row = ROWS[family]
    runs = {k: in_process(scaled_unit, spec_id, row, steps, str(tmp / f"{family}-x{k}"), k) for k in scales}
    out = []
    for i, stage in enumerate(runs[scales[0]]["stages"]):
        sizes = {k: runs[k]["batches"][i] for k in scales}
        ms = {k: per_sample_ms(runs[k]["stages"][i], sizes[k]) for k in scales}
        base = ms[scales[0]]
        out.append(
            {
                "stage": i + 1,
                "recipe": stage["recipe"],
                "batch": sizes,
                "ms_per_sample": ms,
                "ratio": {k: base / ms[k] for k in scales},
            }
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, list]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_batch", description=__doc__.split("\n")[0])
    parser.add_argument("--family", action="append", choices=sorted(ROWS), help="a family (repeatable; default all)")
    parser.add_argument("--scale", action="append", type=int, help="a multiple of the batch (default 1, 2, 4)")
    parser.add_argument("--steps", type=int, default=100, help="steps a training stage (default 100)")
    parser.add_argument("--json", type=Path, default=None, help="also write every number here")
    args = parser.parse_args(argv)
    scales = sorted(set(args.scale or [1, 2, 4]))
    if scales[0] < 1:
        parser.error("--scale must be at least 1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out: dict[str, list] = {}
    print(f"load before: {load()}; {args.steps} steps a stage, 1 thread; CPU ms a sample (x: against x{scales[0]})")
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.family or sorted(ROWS):
            out[family] = measure(family, args.steps, scales, Path(tmp))
            for s in out[family]:
                cells = "   ".join(
                    f"batch {s['batch'][k]:4d}: {s['ms_per_sample'][k]:6.2f} ({s['ratio'][k]:.2f}x)" for k in scales
                )
                print(f"{family:9s} {s['stage']}. {s['recipe'][:24]:24s} {cells}")
    print(f"load after: {load()}")
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, {"steps": args.steps, "scales": scales, "families": out})
    return out


if __name__ == "__main__":
    main()
