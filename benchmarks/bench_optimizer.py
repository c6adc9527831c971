"""An optimiser step on each family's synthetic model: torch's multi-tensor (`foreach`) kernels, which
`repro.train.trainer.build_optimizer` asks for on every device, against the one-tensor-at-a-time loop torch
picks by itself on a CPU.

    python -m benchmarks.bench_optimizer                      # every family, 1 thread
    python -m benchmarks.bench_optimizer --family mcan-pa --reps 200

For one claim row of each family (`bench_synthetic.ROWS`), the models its unit trains are built as `repro run ID
--scale synthetic` builds them (the first training stage's model; ace-rpe's pre-training), given random
gradients, and stepped by their recipe's optimiser built both ways, interleaved in the same run: the median of
`--rounds` rounds of `--reps` steps each. After the same steps both ways the parameters are compared: the two give
the same values bit for bit (the run says so), so the ratio is the whole difference.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.bench_synthetic import ROWS, contexts


class _Built(Exception):
    """Raised out of the unit once its first training stage has its model and recipe."""

    def __init__(self, model, recipe):
        self.model, self.recipe = model, recipe


def first_model(family: str, tmp: Path):
    """The model and recipe of the row's first training stage, as its unit builds them (nothing trained)."""
    import repro.train
    from repro.launch.units import run_units
    from repro.train import trainer

    def stop(model, dataset, recipe, workdir, **kwargs):
        raise _Built(model, recipe)

    saved = trainer.fit
    repro.train.fit = trainer.fit = stop
    try:
        spec, row = ROWS[family]
        run_units(contexts(spec, row, [0], tmp, 1))
    except _Built as built:
        return built.model, built.recipe
    finally:
        trainer.fit = saved
        del repro.train.fit  # the package's lazy attribute again
    raise RuntimeError(f"{family}: its unit trained nothing")


def _optimizer(model, recipe, foreach: bool | None):
    from repro.train.trainer import build_optimizer

    optimizer = build_optimizer(recipe, model.parameters())
    for group in optimizer.param_groups:
        group["foreach"] = foreach
    return optimizer


def measure(model, recipe, reps: int, rounds: int) -> dict[str, float | bool | int]:
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [torch.randn_like(p) * 1e-3 for p in params]
    sides = {}
    for foreach in (None, True):
        copy_ = copy.deepcopy(model)
        for p, g in zip([p for p in copy_.parameters() if p.requires_grad], grads):
            p.grad = g.clone()
        sides[foreach] = (copy_, _optimizer(copy_, recipe, foreach), [])
    for _ in range(rounds):
        for _, optimizer, times in sides.values():  # interleaved
            start = time.perf_counter()
            for _ in range(reps):
                optimizer.step()
            times.append((time.perf_counter() - start) / reps)
    loop, multi = (statistics.median(sides[f][2]) for f in (None, True))
    equal = all(torch.equal(a, b) for a, b in zip(sides[None][0].parameters(), sides[True][0].parameters()))
    return {
        "tensors": len(params),
        "parameters": sum(p.numel() for p in params),
        "loop_ms": loop * 1e3,
        "foreach_ms": multi * 1e3,
        "ratio": loop / multi,
        "bit_equal": equal,
    }


def main(argv: list[str] | None = None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_optimizer", description=__doc__.split("\n")[0])
    parser.add_argument("--family", action="append", choices=sorted(ROWS), help="a family (repeatable; default all)")
    parser.add_argument("--reps", type=int, default=50, help="steps a round (default 50)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the median taken (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1: what -j 2 gives a unit)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out: dict[str, dict] = {}
    print(f"optimiser step, ms (median of {args.rounds} x {args.reps}), {args.threads} thread(s):")
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.family or sorted(ROWS):
            torch.manual_seed(0)
            model, recipe = first_model(family, Path(tmp) / family)
            r = out[family] = {"optimizer": recipe.optimizer["name"], **measure(model, recipe, args.reps, args.rounds)}
            print(
                f"  {family:8s} {r['optimizer']:7s} {r['tensors']:4d} tensors {r['parameters']:>10,d} parameters   "
                f"loop {r['loop_ms']:7.3f}   foreach {r['foreach_ms']:7.3f}   {r['ratio']:5.2f}x   "
                f"{'bit-equal' if r['bit_equal'] else 'VALUES DIFFER'}"
            )
    return out


if __name__ == "__main__":
    main()
