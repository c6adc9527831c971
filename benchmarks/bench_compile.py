"""A synthetic training step compiled by `torch.compile` (inductor's C++ kernels) against eager, on a CPU: whether
compiling would make a seed of the synthetic scale cheaper.

    python -m benchmarks.bench_compile                        # every family, 200 steps a stage
    python -m benchmarks.bench_compile --family dsganet --steps 400 --dynamic
    python -m benchmarks.bench_compile --row ace-rpe-table2-pe:ACE-RPE   # another spec's row

One claim row of each family (`bench_synthetic.ROWS`), or any spec's row (`--row SPEC:ROW`), runs its unit as `repro
run ID --scale synthetic` runs it, one seed, one thread, each training stage stopped after `--steps` steps, in a
fresh spawned process twice, one after the other: eager, and with the module the trainer steps compiled
(`repro.train.distributed.wrap`, the one place the trainer wraps its model; `dynamic=False` unless `--dynamic`;
LSTMs and GRUs traced too, dynamo's `allow_rnn`; inductor compiles into an empty cache of its own, so that it is the
first run's cost, and its C++ compiler's CPU time, in processes it waits for, is counted:
`step_profile.cpu_seconds`). Per training stage:

- **ms per step**, eager and compiled, at the steady rate (the last half of the stage's steps:
  `step_profile.steady_rate`), and their ratio;
- **compile s**: the compiled stage's CPU seconds beyond its steps at that rate, less the same excess of the eager
  stage (compilation and recompilations, where shapes change);
- **schedule**: eager over compiled CPU seconds for the steps the stage's schedule trains (`full_steps`), the
  compile seconds included: above 1 a compiled seed would be cheaper.

A compiled kernel draws dropout's random numbers otherwise than eager, so a compiled run would not reproduce the
committed records: compiling is measured here, and the trainer does not compile.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_synthetic import ROWS, in_process, load, stage_rate, unit


def compiling(wrap, dynamic: bool):
    """`wrap` (the trainer's `distributed.wrap`) with the module it returns compiled."""
    import torch

    def compiled(model, env, device):
        return torch.compile(wrap(model, env, device), dynamic=dynamic)

    return compiled


def compiled_unit(spec_id: str, row: str, steps: int, workdir: str, mode: str) -> dict:
    """In a spawned process: `bench_synthetic.unit` for seed 0, its model compiled unless `mode` is "eager"."""
    if mode != "eager":
        import torch._dynamo
        import torch._inductor.config

        import repro.train.distributed as distributed

        torch._dynamo.config.allow_rnn = True
        torch._inductor.config.compile_threads = 1  # no pool of compile workers: the compiler runs as a child
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(workdir) / "inductor-cache")  # read at each use
        distributed.wrap = compiling(distributed.wrap, dynamic=mode == "dynamic")
    return unit(spec_id, row, [0], steps, 1, workdir, False)


def compare(eager: dict, compiled: dict) -> dict[str, Any]:
    """One stage measured both ways (`step_profile.Meter`'s records): steady ms per step, the compiled run's
    one-time CPU seconds, and eager over compiled for the stage's whole schedule."""
    e, c = stage_rate(eager), stage_rate(compiled)
    excess = max(
        (compiled["cpu_s"] - c * compiled["steps"]) - (eager["cpu_s"] - e * eager["steps"]),
        0.0,
    )
    full = eager["full_steps"]
    return {
        "recipe": eager["recipe"],
        "steps": eager["steps"],
        "full_steps": full,
        "eager_ms": e * 1e3,
        "compiled_ms": c * 1e3,
        "step_ratio": e / c,
        "compile_s": excess,
        "schedule_ratio": (e * full) / (c * full + excess),
    }


def measure(spec_id: str, row: str, steps: int, dynamic: bool, workdir: Path) -> list[dict[str, Any]]:
    """The row eager, then compiled: each training stage compared (`compare`), numbered in order."""
    runs = {
        mode: in_process(compiled_unit, spec_id, row, steps, str(workdir / mode), mode)
        for mode in ("eager", "dynamic" if dynamic else "static")
    }
    eager, compiled = runs.values()
    return [{"stage": i, **compare(e, c)} for i, (e, c) in enumerate(zip(eager["stages"], compiled["stages"]), 1)]


def chosen_rows(families: list[str] | None, rows: list[str] | None) -> dict[str, tuple[str, str]]:
    """What to measure, a label each: the families' claim rows (every family's when neither is given) and each
    `SPEC:ROW`. Raises ReproError for a spec or row that does not exist."""
    from repro.errors import ReproError
    from repro.specs import resolve

    chosen = {f: ROWS[f] for f in families or ([] if rows else sorted(ROWS))}
    for text in rows or []:
        spec_id, _, row = text.partition(":")
        if not row:
            raise ReproError(f"--row {text!r}: expected SPEC:ROW, e.g. ace-rpe-table2-pe:ACE-RPE")
        resolve(spec_id).row(row)
        chosen[f"{spec_id}: {row}"] = (spec_id, row)
    return chosen


def main(argv: list[str] | None = None) -> dict[str, list]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_compile", description=__doc__.split("\n")[0])
    parser.add_argument("--family", action="append", choices=sorted(ROWS), help="a family (repeatable; default all)")
    parser.add_argument("--row", action="append", metavar="SPEC:ROW", help="another spec's row (repeatable)")
    parser.add_argument("--steps", type=int, default=200, help="steps a training stage (default 200)")
    parser.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes (default: static)")
    parser.add_argument("--json", type=Path, default=None, help="also write every number here")
    args = parser.parse_args(argv)
    from repro.errors import ReproError

    try:
        rows = chosen_rows(args.family, args.row)
    except ReproError as err:
        parser.error(str(err))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out: dict[str, list] = {}
    print(f"load before: {load()}; {args.steps} steps a stage, 1 thread, {'dynamic' if args.dynamic else 'static'}")
    print("family    stage                        eager ms  compiled ms  step ratio  compile s  schedule ratio")
    with tempfile.TemporaryDirectory() as tmp:
        for j, (label, (spec_id, row)) in enumerate(rows.items()):
            out[label] = measure(spec_id, row, args.steps, args.dynamic, Path(tmp) / str(j))
            for s in out[label]:
                print(
                    f"{label:9s} {s['stage']}. {s['recipe'][:24]:24s} {s['eager_ms']:9.1f} {s['compiled_ms']:12.1f} "
                    f"{s['step_ratio']:10.2f}x {s['compile_s']:10.1f} {s['schedule_ratio']:14.2f}x"
                    f"   ({s['full_steps']:,} steps a schedule)"
                )
    print(f"load after: {load()}")
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, {"steps": args.steps, "dynamic": args.dynamic, "families": out})
    return out


if __name__ == "__main__":
    main()
