"""Experiment loggers: where a training run's per-step metrics go, in torchtune's metric-logger shape.

Every run writes `train.jsonl` (`JSONLLogger`: one JSON object a line, what `repro run` shows progress
from). Beside it, optionally:
  tensorboard  `TensorBoardLogger`: event files in `<workdir>/tensorboard/` (torch.utils.tensorboard);
               `tensorboard --logdir <runs folder>` shows every unit. Extra: pip install 'repro[tensorboard]'.
  wandb        `WandBLogger`: one Weights & Biases run per unit (project $WANDB_PROJECT, default `repro`;
               its files in `<workdir>/wandb/`; WANDB_MODE=offline keeps it local). Extra: 'repro[wandb]'.
They are chosen with `--logger tensorboard|wandb` (repeated, or a comma list) on `repro run` and `repro
train`, which sets REPRO_LOGGERS for every process the run starts (units, Slurm jobs), or with REPRO_LOGGERS
itself. A logger records what a run does and never changes it: it is not part of the recipe, the config
hash or the variant name. Under torchrun only rank 0 logs.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from repro.errors import ReproError
from repro.utils import did_you_mean

LOGGERS_ENV = "REPRO_LOGGERS"
# name -> (the module it needs, the extra that installs it)
OPTIONAL = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}
COUNTERS = ("epochs", "step", "steps")  # where a train.jsonl line is, not a metric: TensorBoard and W&B take `step`
TENSORBOARD_DIR = "tensorboard"

Scalar = float | int


class MetricLogger(Protocol):
    """torchtune's `MetricLoggerInterface`: scalars by name at a step, then `close`."""

    def log(self, name: str, data: Scalar, step: int) -> None: ...

    def log_dict(self, payload: Mapping[str, Scalar], step: int) -> None: ...

    def close(self) -> None: ...


class JSONLLogger:
    """`train.jsonl`: each `log_dict` payload as one JSON line, as given (counters included), flushed at once
    so a reader in another process sees every step. Appends: the trainer starts or trims the file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = open(self.path, "a", encoding="utf-8")

    def log(self, name: str, data: Scalar, step: int) -> None:
        self.log_dict({"step": step, name: data}, step)

    def log_dict(self, payload: Mapping[str, Scalar], step: int) -> None:
        self._file.write(json.dumps(dict(payload)) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TensorBoardLogger:
    """Scalars into TensorBoard event files in `log_dir` (`torch.utils.tensorboard.SummaryWriter`). A run started
    from the beginning removes the earlier run's event files; a resumed run passes `resume_step`, and the events
    written after that step, which it runs again, are purged."""

    def __init__(self, log_dir: Path, resume_step: int | None = None):
        require(["tensorboard"])
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        if resume_step is None:  # a run started again from the beginning: the earlier run's curves go
            for old in self.log_dir.glob("events.out.tfevents.*"):
                old.unlink()
        purge = None if resume_step is None else resume_step + 1
        self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge)

    def log(self, name: str, data: Scalar, step: int) -> None:
        self._writer.add_scalar(name, data, global_step=step)

    def log_dict(self, payload: Mapping[str, Scalar], step: int) -> None:
        for name, data in payload.items():
            if name not in COUNTERS:
                self.log(name, data, step)

    def close(self) -> None:
        self._writer.close()


class WandBLogger:
    """One Weights & Biases run (`wandb.init`): `name` and `config` (the recipe) as given, its files in `directory`.
    Several may be open at once (the seeds of an ensemble): each is its own run."""

    def __init__(self, directory: Path, name: str, config: Mapping[str, Any] | None = None):
        require(["wandb"])
        import wandb

        Path(directory).mkdir(parents=True, exist_ok=True)
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or "repro",
            name=name,
            dir=str(directory),
            config=dict(config or {}),
            reinit="create_new",
            settings=wandb.Settings(console="off"),  # the terminal stays the run's own
        )

    def log(self, name: str, data: Scalar, step: int) -> None:
        self._run.log({name: data}, step=step)

    def log_dict(self, payload: Mapping[str, Scalar], step: int) -> None:
        self._run.log({k: v for k, v in payload.items() if k not in COUNTERS}, step=step)

    def close(self) -> None:
        self._run.finish()


class MetricLoggers:
    """Several loggers as one: each call goes to every logger; `close` closes them all."""

    def __init__(self, loggers: Iterable[MetricLogger]):
        self.loggers = list(loggers)

    def log(self, name: str, data: Scalar, step: int) -> None:
        for logger in self.loggers:
            logger.log(name, data, step)

    def log_dict(self, payload: Mapping[str, Scalar], step: int) -> None:
        for logger in self.loggers:
            logger.log_dict(payload, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()

    def __enter__(self) -> "MetricLoggers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def parse_loggers(values: Iterable[str] | None) -> tuple[str, ...]:
    """`["tensorboard,wandb"]` or `["tensorboard", "wandb"]` -> ("tensorboard", "wandb"): known names, each once,
    their packages installed (one line naming the extra otherwise)."""
    names: list[str] = []
    for value in values or ():
        for part in str(value).split(","):
            name = part.strip().lower()
            if not name:
                continue
            if name not in OPTIONAL:
                raise ReproError(
                    f"unknown logger {name!r}{did_you_mean(name, OPTIONAL)}; one of {', '.join(OPTIONAL)} "
                    "(train.jsonl is always written)"
                )
            if name not in names:
                names.append(name)
    require(names)
    return tuple(names)


def require(names: Iterable[str]) -> None:
    """One line for a logger whose package is not installed, naming the extra that installs it."""
    for name in names:
        module, extra = OPTIONAL[name]
        if importlib.util.find_spec(module) is None:
            raise ReproError(f"--logger {name} needs the {module} package: pip install 'repro[{extra}]'")


def selected() -> tuple[str, ...]:
    """The loggers REPRO_LOGGERS names (set by `--logger`); none when it is unset. A wrong one is one line
    naming the variable."""
    value = os.environ.get(LOGGERS_ENV, "")
    try:
        return parse_loggers([value])
    except ReproError as exc:
        raise ReproError(f"{LOGGERS_ENV}={value}: {exc}") from None


def open_loggers(
    workdir: Path,
    jsonl: Path,
    names: Iterable[str] | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    resume_step: int | None = None,
) -> MetricLoggers:
    """`jsonl` (always) and the loggers `names` (default: `selected()`) of one training run in `workdir`."""
    workdir = Path(workdir)
    loggers: list[MetricLogger] = [JSONLLogger(jsonl)]
    try:
        for name in selected() if names is None else parse_loggers(names):
            if name == "tensorboard":
                loggers.append(TensorBoardLogger(workdir / TENSORBOARD_DIR, resume_step=resume_step))
            elif name == "wandb":
                loggers.append(WandBLogger(workdir, run_name(workdir), config))
    except BaseException:
        MetricLoggers(loggers).close()
        raise
    return MetricLoggers(loggers)


def run_name(workdir: Path) -> str:
    """`<spec>/<scale>/<row>/seed<N>` from a unit's work folder (`repro.run.unit_dir`), or its last parts."""
    return "/".join(Path(workdir).absolute().parts[-4:])
