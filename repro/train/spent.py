"""What a unit has spent so far, kept beside its checkpoints, so that a unit resumed after a stop (`--resume`, a
requeued Slurm job) records the CPU and wall seconds of every process that trained it, not only the last one's.

`repro.launch.units` runs each unit inside `unit_clock` over its work folders; every checkpoint save
(`repro.train.checkpoint.save_checkpoint`) calls `mark()`, which writes the seconds spent up to that checkpoint to
`<work folder>/spent.json`, atomically; a resumed unit's clock starts from there. What a stopped process did after its
last checkpoint is not counted: the resumed process does that work again, so the record says what the seed costs
end to end, as if it had never stopped. A fresh start (no `--resume`, or `--force`) removes the file first.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from repro.utils import write_json_atomic

LEDGER = "spent.json"


@dataclass
class Clock:
    """The seconds of a unit (or of a row's seeds trained together): `wall` and `cpu` spent by earlier processes,
    plus this process's since the clock started."""

    folders: list[Path]
    wall: float = 0.0
    cpu: float = 0.0
    started_wall: float = field(default_factory=time.time)
    started_cpu: float = field(default_factory=time.process_time)

    def now(self) -> tuple[float, float]:
        """(wall seconds, CPU seconds) spent so far, earlier processes included."""
        return self.wall + time.time() - self.started_wall, self.cpu + time.process_time() - self.started_cpu

    def mark(self) -> None:
        wall, cpu = self.now()
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(folder / LEDGER, {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)})


_current: Clock | None = None


def earlier(folder: Path) -> tuple[float, float]:
    """(wall, CPU) seconds a folder's ledger holds; (0, 0) where there is none or it is not one (a hand-edited or
    foreign file costs the count, never the run)."""
    try:
        data = json.loads((folder / LEDGER).read_text())
        wall, cpu = float(data["wall_s"]), float(data["cpu_s"])
    except (OSError, ValueError, TypeError, KeyError):
        return 0.0, 0.0
    if not all(math.isfinite(x) and x >= 0 for x in (wall, cpu)):
        return 0.0, 0.0
    return wall, cpu


@contextmanager
def unit_clock(folders: list[Path], resume: bool) -> Iterator[Clock]:
    """A clock over the work folders of the units trained in this process now; resumed, it starts from the first
    folder's ledger (the seeds trained together share one), else the ledgers are removed."""
    global _current
    wall, cpu = earlier(folders[0]) if resume else (0.0, 0.0)
    if not resume and os.environ.get("RANK", "0") == "0":  # a torchrun unit's rank 0 saves its checkpoints
        for folder in folders:
            (folder / LEDGER).unlink(missing_ok=True)
    clock = Clock(list(folders), wall, cpu)
    previous, _current = _current, clock
    try:
        yield clock
    finally:
        _current = previous


def mark() -> None:
    """Write the running unit's seconds beside its checkpoint (called by every checkpoint save; nothing outside a
    unit)."""
    if _current is not None:
        _current.mark()
