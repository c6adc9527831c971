"""Whether this machine is busy with other work, for the estimate `repro run` prints.

A run on the CPU keeps each core it may use about once busy (the trainer's threads are the cores, split
between `-j` workers), so its own share of the 1-minute load average is about the core count. Above
that, other processes compete for the same cores: with a load L on C cores the run gets about C/L of
them, and takes about L/C times as long as on an idle machine. Also here: the threads each of a run's
processes takes (`threads_per_process`), and whether other work leaves them too few free cores (`oversubscribed`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

BUSY_FROM = 1.5  # load per core from which the machine counts as busy (the run alone: about 1)


@dataclass(frozen=True)
class Load:
    average: float  # the 1-minute load average (runnable and waiting processes)
    cores: int  # the cores this process may run on

    @property
    def stretch(self) -> float:
        """About how many times an idle machine's time a CPU-bound run takes under this load (at least 1)."""
        return max(1.0, self.average / max(self.cores, 1))

    @property
    def busy(self) -> bool:
        return self.stretch >= BUSY_FROM

    def words(self) -> str:
        """`load 7.6 on 2 cores`."""
        return f"load {self.average:.1f} on {self.cores} core{'s' if self.cores != 1 else ''}"


def cores() -> int:
    """The cores this process may use (its CPU affinity where the system has one, else all of them)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_per_process(jobs: int) -> int:
    """PyTorch threads for each of a run's `jobs` processes: OMP_NUM_THREADS where it is set, else the cores split
    between them (at least one)."""
    explicit = os.environ.get("OMP_NUM_THREADS", "").strip()
    if explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    return max(1, cores() // max(jobs, 1))


def tokenizers_serial() -> None:
    """Tokenize on the calling thread unless TOKENIZERS_PARALLELISM says otherwise. The runs' batches are a few dozen
    short texts, which the `tokenizers` thread pool (one worker a core, whatever OMP_NUM_THREADS says) encodes no
    faster, and its idle workers keep waking beside the training threads: two one-thread ace-rpe units on 2 cores each
    carried two such workers, runnable in a quarter to a third of samples (380,000 switches in 27 minutes), so the
    load average read about 3.6 where the units alone make 2, and `repro run` called the machine busy."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def free_cores(load: Load) -> int:
    """The cores other work leaves free: the cores less the 1-minute load average (at least one)."""
    return min(load.cores, max(1, round(load.cores - load.average)))


def oversubscribed(threads: int, jobs: int, load: Load | None) -> bool:
    """Whether `jobs` processes of `threads` threads each would need more cores than other work leaves free. Such a
    process waits at every parallel operation for a thread that is not running: two runs side by side on 2 cores
    trained about 7x slower with two threads each than with one (docs/benchmarks.md)."""
    return load is not None and threads > 1 and threads * jobs > free_cores(load)


def current() -> Load | None:
    """This machine's load now; None where the system has no load average (Windows)."""
    try:
        average = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return Load(average, cores())
