"""What `repro run` and `repro train` ask for (`RunRequest`), built once from the options; the run command and
its Slurm side (`repro.cli.run`, `repro.cli.slurm`) both read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repro.errors import ReproError

if TYPE_CHECKING:
    from repro.launch.slurm import SlurmOptions

MAX_SEED = 2**31 - 1  # seeds a run accepts (torch and numpy take 32-bit seeds)


@dataclass(frozen=True)
class RunRequest:
    """What `repro run` or `repro train` asks for, built once from the options (lm-eval's
    `EvaluatorConfig.from_cli`): the spec or spec file and its overrides, which rows, scale and seeds, how
    to run them (here or on Slurm), and what to do with stored results and checkpoints."""

    ident: str
    scale: str
    overrides: tuple[str, ...] = ()
    rows: tuple[str, ...] | None = None  # None: every runnable row
    seeds: tuple[int, ...] | None = None  # None: the spec's seeds at this scale
    limit: int | None = None  # paper scale: only the first N questions of each split (a variant)
    workdir: Path | None = None  # checkpoints and logs (None: $REPRO_DATA_DIR/runs)
    dry_run: bool = False
    resume: bool = False
    force: bool = False
    rebaseline: bool = False
    jobs: int | None = None
    ensemble: bool | None = None  # None: the scale's `ensemble` setting
    launcher: str = "local"
    slurm: SlurmOptions | None = None  # with launcher "slurm"
    status: bool = False  # show the Slurm units instead of running
    wait: bool = False  # slurm: follow the jobs to the end
    fmt: str = "rich"  # of --status
    device: str | None = None  # auto (None), cpu, cuda or cuda:N: where the units train and evaluate
    loggers: tuple[str, ...] = ()  # --logger: experiment loggers beside train.jsonl (repro.train.loggers)
    # ("released",), or checkpoint files (FILE, or PART=FILE per column group): evaluate, no training (repro.weights)
    weights: tuple[str, ...] | None = None


def check_seeds(seeds: list[int], option: str, text: str) -> list[int]:
    """`seeds` if each is in 0..2^31-1 and named once; `option` and `text` (as typed) name them otherwise."""
    if any(not 0 <= seed <= MAX_SEED for seed in seeds):
        raise ReproError(f"{option} must lie in 0..{MAX_SEED}, not {text!r}")
    if len(set(seeds)) != len(seeds):
        raise ReproError(f"{option} names a seed twice: {text!r}")
    return seeds


def parse_seeds(text: str) -> list[int]:
    """`0,1,2` -> [0, 1, 2]: integers in 0..2^31-1, each once."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ReproError(f"--seeds must be comma-separated integers, not {text!r}") from None
    if not seeds:
        raise ReproError("--seeds names no seed")
    return check_seeds(seeds, "--seeds", text)
