"""One (row, seed) unit in a process of its own: `python -m repro.launch.unit ORDER OUTCOME`, or one rank of
`torchrun --nproc-per-node G -m repro.launch.unit ORDER OUTCOME` when the unit trains on G GPUs; or a row's
seeds trained together (`ensemble: true`, one process).

ORDER is a pickled {"units": [repro.run.Unit, ...], "contexts": [RunContext, ...], "record": {...} or None}: one
unit and its context, or one per seed of an ensemble; with "record" (`rebaseline` and the `lock` file of
`repro.launch.units.store_unit`), rank 0 writes each seed's record into the results store. Rank 0 writes OUTCOME,
JSON [status, payload]:
  ("done", [{"seed": N, "metrics": ..., "record": path or None}, ...])
  ("interrupted", message)   SIGTERM/SIGINT stopped training; the trainer saved last.pt, `resume` continues
  ("failed", message)        bad input or data (a ReproError); anything else leaves its traceback in the log
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path

from repro.errors import ReproError

EXIT = {"done": 0, "failed": 2, "interrupted": 130}


def label(row: str, seeds: list[int]) -> str:
    """`MCAN seed 0`, or `MCAN seeds 0,1,2 together` for a row's seeds trained together."""
    if len(seeds) == 1:
        return f"{row} seed {seeds[0]}"
    return f"{row} seeds {','.join(map(str, seeds))} together"


def read_outcome(path: Path) -> tuple[str, object]:
    """(status, payload) from the OUTCOME file a unit's rank 0 wrote: JSON, never a pickle; ("failed", None) when
    there is none or it is not one."""
    try:
        status, payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, RecursionError):
        return "failed", None
    return (status, payload) if status in EXIT else ("failed", None)


def main(argv: list[str]) -> int:
    from repro.launch.units import run_units, store_unit
    from repro.results import environment
    from repro.train.trainer import TrainingInterrupted
    from repro.utils import write_bytes_atomic

    if len(argv) != 2:
        print("usage: python -m repro.launch.unit ORDER OUTCOME", file=sys.stderr)
        return 2
    inbox, outbox = map(Path, argv)
    order = pickle.loads(inbox.read_bytes())
    units, ctxs, record = order["units"], order["contexts"], order.get("record")
    name = label(ctxs[0].row.name, [c.seed for c in ctxs])
    main_rank = int(os.environ.get("RANK", "0")) == 0
    if record is not None and main_rank:
        environment()  # the code's state as the job starts: its records name it, not the checkout's later state
    try:
        done = []
        for unit, ctx, outcome in zip(units, ctxs, run_units(ctxs)):
            path = None
            if record is not None and main_rank:
                Path(record["lock"]).parent.mkdir(parents=True, exist_ok=True)
                path, _ = store_unit(unit, outcome, **record)
            done.append(
                {"seed": ctx.seed, "metrics": outcome[0].metrics, "record": None if path is None else str(path)}
            )
        result = ("done", done)
    except TrainingInterrupted as exc:
        result = ("interrupted", " ".join(str(exc).split()))
    except ReproError as exc:
        result = ("failed", " ".join(str(exc).split()))
    from repro.train.distributed import shutdown

    shutdown()  # the process group the trainer joined under torchrun
    status, payload = result
    if main_rank:
        write_bytes_atomic(outbox, json.dumps(result).encode("utf-8"))
        print(f"repro unit: {name}: {status}: {payload}", file=sys.stderr, flush=True)
    return EXIT[status]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
