"""The training loop shared by every paper: `fit` trains a model on a dataset by a recipe, `predict` scores one.

fit(model, dataset, recipe, workdir) writes into `workdir`:
  last.pt      checkpoint after every epoch and on SIGINT/SIGTERM (see repro.train.checkpoint)
  train.jsonl  one line per optimisation step: epoch (of epochs), step (of steps), loss, lr, samples/s,
               elapsed seconds (`repro run` shows progress from it, whatever process trains); the same
               metrics also to TensorBoard and W&B when chosen (`--logger`, repro.train.loggers)
  state.json   the returned TrainState once training ends
  run.log      the run's log messages, debug included: how it started, each epoch, how it ended (repro.log)
`resume=True` continues from last.pt (mid-epoch too: the sample order of an epoch is a function of
the seed and the epoch, and the RNG states are restored), and ends with the same weights as an
uninterrupted run on the same hardware.
Batches are dicts of tensors. What a batch's loss is comes from the caller: `loss_step(model, batch)`
(each family has its own: repro.families.base), by default the recipe's loss of `model(batch)`
against `batch["target"]`; `predict(..., predict_step=...)` likewise.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from repro.errors import ReproError
from repro.log import file_only, run_log
from repro.train import checkpoint as ckpt
from repro.train import distributed as dist_utils
from repro.train.loggers import open_loggers
from repro.train.losses import compute_loss, is_summed
from repro.train.optimizers import OPTIMIZERS
from repro.train.ready import ReadyTensors
from repro.train.recipe import Recipe
from repro.train.schedule import learning_rate
from repro.utils import write_json_atomic

LOG_NAME = "train.jsonl"
_log = logging.getLogger(__name__)
STATE_NAME = "state.json"


class TrainingInterrupted(ReproError):
    """SIGINT/SIGTERM arrived; a checkpoint was saved and `--resume` continues from it."""

    exit_code = 130


@dataclass
class TrainState:
    epochs_done: int
    step: int
    world_size: int
    gpu_count: int
    global_batch: int
    per_device_batch: int
    device: str
    precision: str
    final_loss: float | None
    wall_time_s: float
    samples_seen: int
    checkpoint: str
    log: str
    resumed_from: dict[str, int] | None = None
    recipe: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """What a result record keeps of a training run (`RowRun.training`)."""
        return {
            "steps": self.step,
            "final_loss": self.final_loss,
            "global_batch": self.global_batch,
            "gpus": self.gpu_count,
        }


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (call before building the model so its initial weights are fixed)."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def build_optimizer(recipe: Recipe, params) -> torch.optim.Optimizer:
    opt = dict(recipe.optimizer)
    name = opt.pop("name")
    lr = learning_rate(recipe.schedule, 0) * recipe.lr_factor
    if "betas" in opt:
        opt["betas"] = tuple(opt["betas"])
    # foreach: torch's multi-tensor kernels, which it picks by itself only on a GPU; on a CPU the same values bit
    # for bit and a 1.25-1.66x faster step of the synthetic models' optimisers (benchmarks/bench_optimizer.py)
    return getattr(torch.optim, OPTIMIZERS[name].torch_class)(params, lr=lr, foreach=True, **opt)


def resolve_precision(precision: str, device: torch.device, model: nn.Module | None = None) -> str:
    """The precision a recipe trains in on `device`. Every family's recipe states its official code's (all five
    papers: fp32); `auto`, left only by a recipe that states none, is fp32 too. tf32, bf16 or fp16 are chosen by a
    recipe or `recipe.precision=`. tf32 is fp32 on a CPU. bf16 on a CPU is refused for a `model` with an LSTM or
    GRU where oneDNN has no bf16 kernel for them on this CPU (it failed inside the first step)."""
    if precision == "auto":
        return "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise ReproError("precision fp16 needs a GPU; use fp32 or bf16 on a CPU")
    if precision == "tf32" and device.type != "cuda":
        return "fp32"
    recurrent = model is not None and any(isinstance(m, nn.RNNBase) for m in model.modules())
    if precision == "bf16" and device.type == "cpu" and recurrent and not _cpu_has_bf16_recurrence():
        raise ReproError(
            "precision bf16: this CPU has no bf16 kernel for the model's LSTM/GRU layers (oneDNN); "
            "train it in fp32 on this CPU (recipe.precision=fp32) or in bf16 on a GPU"
        )
    return precision


@functools.cache
def _cpu_has_bf16_recurrence() -> bool:
    """Whether an LSTM runs under bf16 autocast on this CPU (oneDNN builds it only where the CPU supports it)."""
    lstm = nn.LSTM(4, 4)
    try:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16), torch.no_grad():
            lstm(torch.zeros(1, 1, 4))
    except RuntimeError:
        return False
    return True


@contextmanager
def matmul_precision(precision: str):
    """TF32 matmuls and convolutions (Ampere and newer GPUs) while training in `tf32`, IEEE fp32 otherwise; the
    process's setting is restored afterwards."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _autocast(precision: str, device: torch.device):
    if precision in ("fp32", "tf32"):
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


# What stops a training run with a checkpoint: Ctrl-C, Slurm's SIGTERM (preemption, scancel, the time limit) and
# SIGUSR1, which sbatch's `--signal=USR1@<seconds>` sends before the limit (submitit's USR2 is repro.launch.slurm's)
STOP_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGUSR1", None)) if s is not None)


class _StopFlag:
    """Set by a stop signal while training; the loop checks it after every step."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum, frame) -> None:
        self.signal = signum


@contextmanager
def _catch_signals(flag: _StopFlag) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, flag) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _worker_ignores_stop_signals(worker_id: int) -> None:
    """A DataLoader worker leaves the stop signals to the main process. Slurm signals the whole process group, and
    a worker that died of its SIGTERM (torch's worker handler exits on a SIGTERM from anyone but its parent) made
    the main process fail with "DataLoader worker ... is killed by signal: Terminated" before it could save; the
    main process shuts its workers down itself once the checkpoint is written. The signals arrive blocked (the
    mask `_workers_start` set while they were forked), are ignored from here on, then unblocked."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextmanager
def _workers_start() -> Iterator[None]:
    """The stop signals held back while DataLoader workers are forked, so that none reaches a worker before it
    ignores them (`_worker_ignores_stop_signals`); one that came meanwhile reaches the main process afterwards."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _EpochBatches:
    """The batch sampler of one DataLoader kept over every epoch (its workers persist): the index lists of the
    epoch in progress, set before each pass."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class _SeededBatch(list):
    """A batch's sample indices and the seed its samples are drawn with in a loader worker."""

    seed: int = 0


class _WorkerSeeded(Dataset):
    """A dataset whose random draws in a loader worker (ALBEF's augmentations) are a function of the batch: a
    worker reseeds `random`, numpy and torch from (recipe seed, epoch, step) before each batch, so a resumed run
    and persistent workers draw what an uninterrupted run draws, whichever worker takes the batch. In the main
    process (no workers) nothing is reseeded: the draws follow the process's generators, which checkpoints keep."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index]

    def __getitems__(self, indices):
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None and isinstance(indices, _SeededBatch):
            import random

            import numpy as np

            random.seed(indices.seed)
            np.random.seed(indices.seed % 2**32)
            torch.manual_seed(indices.seed)
        fetch = getattr(self.dataset, "__getitems__", None)
        return fetch(list(indices)) if callable(fetch) else [self.dataset[i] for i in indices]


def _batch_seed(*where: int) -> int:
    """A seed for one micro-batch from where it is (recipe seed, rank, epoch, step, micro-batch)."""
    import numpy as np

    return int(np.random.SeedSequence(list(where)).generate_state(1, dtype=np.uint64)[0] >> 1)


def _close_workers(loader: DataLoader) -> None:
    """End a loader's persistent workers now rather than when it is collected (a stopped run exits soon after)."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()


def _rewrite_log(path: Path, keep_until_step: int) -> None:
    """On resume, drop log lines of steps after the checkpoint (they will be run again)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("step", 0) <= keep_until_step:
                kept.append(line)
        except json.JSONDecodeError:
            break  # a line cut by the interruption: everything after it is dropped
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    os.replace(tmp, path)


def _progress(enabled: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("lr {task.fields[lr]}"),
        TextColumn("{task.fields[rate]} samples/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=False,
    )


def micro_batch_size(local_batch: int, accumulate: int) -> int:
    """The samples of one forward pass: a process's share of the global batch over `accumulate` passes, whose
    gradients add up to the step's (recipe.accumulate: the paper's global batch on fewer GPUs)."""
    if local_batch % accumulate:
        raise ReproError(
            f"the per-process batch {local_batch} does not split into recipe.accumulate={accumulate} equal "
            f"micro-batches; use an accumulate that divides it"
        )
    return local_batch // accumulate


def _micro_batches(indices: list[int], size: int, where: tuple[int, ...]) -> list[_SeededBatch]:
    """One step's sample indices as forward passes of `size` (the last step of an epoch may have fewer), each
    with the seed its samples are drawn with in a loader worker (`where`: recipe seed, rank, epoch, step)."""
    out = []
    for j in range(0, len(indices), size):
        batch = _SeededBatch(indices[j : j + size])
        batch.seed = _batch_seed(*where, j // size)
        out.append(batch)
    return out


def _accumulate(net, batches, micros, loss_step, summed: bool, loss_scale: int, scaler, precision: str, dev):
    """One step's gradients from its micro-batches (`batches` yields them in order), and its loss. A loss summed
    over samples adds up over the micro-batches as it is; a mean is weighted by each micro-batch's share of the
    step's samples, so that the gradients are those of the whole batch (to float rounding; one micro-batch is
    the whole batch exactly). DDP synchronises the gradients at the last micro-batch only (`no_sync`)."""
    total = sum(len(m) for m in micros)
    loss = None
    for j, micro in enumerate(micros):
        batch = to_device(next(batches), dev)
        last = j == len(micros) - 1
        with nullcontext() if last or not hasattr(net, "no_sync") else net.no_sync():
            with _autocast(precision, dev):
                part = loss_step(net, batch)
            weight = 1.0 if summed else len(micro) / total
            scaled = part * weight * loss_scale
            if scaler is not None:
                scaler.scale(scaled).backward()
            else:
                scaled.backward()
        value = part.detach().float() * weight
        loss = value if loss is None else loss + value
    return loss


LossStep = Callable[[nn.Module, dict[str, Any]], torch.Tensor]
PredictStep = Callable[[nn.Module, dict[str, Any]], torch.Tensor]


def recipe_loss_step(loss_name: str) -> LossStep:
    """The default loss step: the recipe's loss of `model(batch)` against `batch["target"]`."""

    def step(model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        if "target" not in batch:
            raise ReproError("training batches need a 'target' entry (or the family's own loss step)")
        return compute_loss(loss_name, model(batch), batch["target"])

    return step


def logits_predict_step(model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
    return model(batch)


def fit(
    model: nn.Module,
    train_dataset: Dataset,
    recipe: Recipe,
    workdir: Path,
    *,
    resume: bool = False,
    device: str | torch.device | None = None,
    log_every: int = 1,
    progress: bool = True,
    collate_fn: Callable | None = None,
    on_step: Callable[[int], None] | None = None,
    loss_step: LossStep | None = None,
    loggers: Iterable[str] | None = None,
) -> TrainState:
    """Train `model` on `train_dataset` by `recipe`; checkpoints and logs go to `workdir`.

    Runs as one process, or as one rank of a torchrun job (DDP, per-process batch = global / world).
    `on_step(step)` is called after every optimisation step (hooks for tests and tools). `loggers`: the
    experiment loggers beside train.jsonl (tensorboard, wandb; default: those REPRO_LOGGERS names).
    """
    workdir = Path(workdir)
    env = dist_utils.init_from_env(device=device)
    dev = dist_utils.device_for(env, device)
    precision = resolve_precision(recipe.precision, dev, model)
    local_batch = dist_utils.per_device_batch(recipe.batch_size, env)
    micro_batch = micro_batch_size(local_batch, recipe.accumulate)
    if len(train_dataset) == 0:
        raise ReproError("the training set is empty")
    if log_every < 1:
        raise ReproError(f"log_every must be at least 1, got {log_every}")
    started = time.perf_counter()
    ckpt_path = workdir / ckpt.LAST
    log_path = workdir / LOG_NAME

    model.to(dev)
    # A model may train parts at a multiple of the schedule's rate: `lr_groups()` gives parameter groups
    # with an `lr_scale` each (e.g. a pre-trained encoder at 0.1).
    optimizer = build_optimizer(recipe, model.lr_groups() if hasattr(model, "lr_groups") else model.parameters())
    scaler = torch.amp.GradScaler(dev.type) if precision == "fp16" else None
    sampler = dist_utils.sampler(train_dataset, env, seed=recipe.seed)
    steps_per_epoch = math.ceil(len(sampler) / local_batch)

    start_epoch, start_step_in_epoch, step, resumed_from, resumed_loss = 0, 0, 0, None, None
    if resume and ckpt_path.exists():
        state = ckpt.load_checkpoint(ckpt_path, map_location=dev)
        saved = state["extra"]
        if saved.get("global_batch") != recipe.batch_size or saved.get("dataset_size") != len(train_dataset):
            raise ReproError(
                f"{ckpt_path}: saved with global batch {saved.get('global_batch')} on "
                f"{saved.get('dataset_size')} samples; this run has {recipe.batch_size} on "
                f"{len(train_dataset)}; start again without --resume"
            )
        ckpt.restore(state, model=model, optimizer=optimizer, scaler=scaler, rank=env.rank)
        start_epoch, start_step_in_epoch, step = state["epoch"], state["step_in_epoch"], state["step"]
        resumed_from = {"epoch": start_epoch, "step": step}
        resumed_loss = saved.get("last_loss")  # a run resumed after its last step still reports its final loss
        if env.is_main:
            _rewrite_log(log_path, step)
    else:
        torch.manual_seed(recipe.seed + env.rank)  # dropout streams; the weights come from the caller
        if env.is_main:
            workdir.mkdir(parents=True, exist_ok=True)
            log_path.write_text("", encoding="utf-8")
    dist_utils.barrier(env)

    net = dist_utils.wrap(model, env, dev)
    loss_step = loss_step or recipe_loss_step(recipe.loss)
    summed = is_summed(recipe.loss)
    loss_scale = env.world_size if summed else 1
    extra = {
        "global_batch": recipe.batch_size,
        "dataset_size": len(train_dataset),
        "world_size": env.world_size,
        "recipe": recipe.name,
    }
    flag = _StopFlag()
    last_loss: float | None = resumed_loss
    samples = step * recipe.batch_size
    total_steps = steps_per_epoch * recipe.epochs

    with (
        matmul_precision(precision),
        _catch_signals(flag),
        _progress(progress and env.is_main) as bar,
        (
            open_loggers(
                workdir, log_path, loggers, config=recipe.to_json(), resume_step=step if resumed_from else None
            )
            if env.is_main
            else nullcontext()
        ) as log,
        run_log(
            workdir,
            append=resumed_from is not None,
            started=f"training {type(model).__name__} by recipe {recipe.name} (seed {recipe.seed}) on {dev}, "
            f"{precision}, {env.world_size} process(es), {len(train_dataset)} samples, {total_steps} steps"
            + (f", resumed at epoch {start_epoch + 1}, step {step}" if resumed_from else ""),
        ),
    ):
        task = bar.add_task(recipe.name, total=total_steps, completed=step, loss="–", lr="–", rate="–")
        epoch_batches = _EpochBatches()
        ready = isinstance(train_dataset, ReadyTensors) and collate_fn is None  # repro.train.ready: the same batches
        loader = DataLoader(
            _WorkerSeeded(train_dataset),
            batch_sampler=epoch_batches,
            num_workers=recipe.num_workers,
            collate_fn=collate_fn,
            pin_memory=dev.type == "cuda",
            persistent_workers=recipe.num_workers > 0,
            worker_init_fn=_worker_ignores_stop_signals if recipe.num_workers > 0 else None,
            generator=torch.Generator().manual_seed(recipe.seed),  # not the process's: dropout's stream stays put
        )

        def save(epoch: int, step_in_epoch: int) -> None:
            rng = dist_utils.gather_objects(ckpt.rng_state(), env)  # every rank's, for its own resume
            if env.is_main:
                ckpt.save_checkpoint(
                    ckpt_path,
                    model=model,
                    optimizer=optimizer,
                    scaler=scaler,
                    epoch=epoch,
                    step=step,
                    step_in_epoch=step_in_epoch,
                    extra={**extra, "last_loss": last_loss},
                    rng_ranks=rng,
                )

        try:
            for epoch in range(start_epoch, recipe.epochs):
                sampler.set_epoch(epoch)
                order = list(iter(sampler))
                first = start_step_in_epoch if epoch == start_epoch else 0
                steps = [
                    _micro_batches(order[i : i + local_batch], micro_batch, (recipe.seed, env.rank, epoch, k))
                    for k, i in enumerate(range(first * local_batch, len(order), local_batch), start=first)
                ]
                epoch_batches.batches = [m for micros in steps for m in micros]
                net.train()
                tick = time.perf_counter()
                if ready:  # a split held as ready tensors: each forward pass one index into them, no loader
                    batches = (train_dataset.batch(list(m)) for m in epoch_batches.batches)
                else:
                    with _workers_start():
                        batches = iter(loader)
                for i, micros in enumerate(steps, start=first):
                    lr = learning_rate(recipe.schedule, epoch, i, steps_per_epoch) * recipe.lr_factor
                    for group in optimizer.param_groups:
                        group["lr"] = lr * group.get("lr_scale", 1.0)
                    optimizer.zero_grad(set_to_none=True)
                    loss = _accumulate(net, batches, micros, loss_step, summed, loss_scale, scaler, precision, dev)
                    if scaler is not None:
                        scaler.unscale_(optimizer)
                    if recipe.grad_clip is not None:
                        nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
                    if scaler is not None:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    step += 1
                    samples += recipe.batch_size
                    value = float(loss)
                    last_loss = dist_utils.all_reduce_mean(value, env, dev) * (env.world_size if loss_scale > 1 else 1)
                    now = time.perf_counter()
                    rate = recipe.batch_size / max(now - tick, 1e-9)
                    tick = now
                    if log is not None and (step % log_every == 0 or i + 1 == steps_per_epoch):
                        log.log_dict(
                            {
                                "epoch": epoch + 1,
                                "epochs": recipe.epochs,
                                "step": step,
                                "steps": min(total_steps, recipe.max_steps or total_steps),
                                "loss": last_loss,
                                "lr": lr,
                                "samples_per_s": round(rate, 3),
                                "elapsed_s": round(now - started, 3),
                            },
                            step,
                        )
                    bar.update(task, advance=1, loss=f"{last_loss:.4g}", lr=f"{lr:.3g}", rate=f"{rate:.1f}")
                    if on_step is not None:
                        on_step(step)
                    stop = flag.signal is not None
                    if env.distributed:
                        stop = dist_utils.all_reduce_mean(float(stop), env, dev) > 0
                    if stop:
                        save(epoch, i + 1)
                        dist_utils.barrier(env)
                        name = signal.Signals(flag.signal).name if flag.signal else "a signal on another rank"
                        raise TrainingInterrupted(
                            f"training interrupted by {name} at epoch {epoch + 1}, step {step}; "
                            f"checkpoint saved to {ckpt_path}; run again with --resume to continue"
                        )
                    if recipe.max_steps is not None and step >= recipe.max_steps:
                        break
                if recipe.max_steps is not None and step >= recipe.max_steps:
                    break  # a short run (e.g. a regression fingerprint): no checkpoint
                save(epoch + 1, 0)
                _log.info(
                    "epoch %d/%d done: step %d, loss %s, %.1f s",
                    epoch + 1,
                    recipe.epochs,
                    step,
                    last_loss,
                    time.perf_counter() - started,
                    extra=file_only(),
                )
                dist_utils.barrier(env)
                if flag.signal is not None:  # arrived while the epoch's checkpoint was being written
                    raise TrainingInterrupted(
                        f"training interrupted by {signal.Signals(flag.signal).name} after epoch "
                        f"{epoch + 1}; checkpoint saved to {ckpt_path}; run again with --resume"
                    )
        finally:
            _close_workers(loader)

    result = TrainState(
        epochs_done=recipe.epochs if recipe.max_steps is None else epoch + 1,
        step=step,
        world_size=env.world_size,
        gpu_count=dist_utils.gpu_count(env, dev),
        global_batch=recipe.batch_size,
        per_device_batch=local_batch,
        device=str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
        precision=precision,
        final_loss=last_loss,
        wall_time_s=round(time.perf_counter() - started, 3),
        samples_seen=samples,
        checkpoint=str(ckpt_path),
        log=str(log_path),
        resumed_from=resumed_from,
        recipe=recipe.to_json(),
    )
    if env.is_main:
        write_json_atomic(workdir / STATE_NAME, result.to_json())
    return result


@torch.no_grad()
def predict(
    model: nn.Module,
    dataset: Dataset,
    batch_size: int,
    *,
    device: str | torch.device | None = None,
    collate_fn: Callable | None = None,
    top_k: int | None = None,
    progress: bool = True,
    precision: str = "fp32",
    predict_step: PredictStep | None = None,
    num_workers: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score every sample in order: (question_ids [N], logits [N, A]) or, with top_k, (ids, indices [N, k]).

    Runs on `device`, by default where the model is (where `fit` trained it); results are on the CPU. Under
    torchrun each rank scores its share (whole batches, `distributed.shard_of_batches`) and every rank gets the
    gathered result, in the dataset's order and equal to one process's; rank 0 alone writes what is made of it.
    `num_workers` loader processes read the samples (a recipe's `num_workers`).
    """
    if batch_size < 1:
        raise ReproError(f"batch size must be at least 1, got {batch_size}")
    env = dist_utils.current()
    dev = dist_utils.model_device(model) if device is None else dist_utils.device_for(env, device)
    precision = resolve_precision(precision, dev, model)
    model.to(dev).eval()
    share = Subset(dataset, dist_utils.shard_of_batches(len(dataset), batch_size, env)) if env.distributed else dataset
    loader = DataLoader(
        share,
        batch_size=batch_size,
        shuffle=False,
        collate_fn=collate_fn,
        num_workers=num_workers,
        pin_memory=dev.type == "cuda",
    )
    ids, outs = [], []
    with _progress(progress and env.is_main) as bar:
        task = bar.add_task("predict", total=len(loader), loss="–", lr="–", rate="–")
        for batch in loader:
            tick = time.perf_counter()
            batch = to_device(batch, dev)
            with _autocast(precision, dev):
                logits = (predict_step or logits_predict_step)(model, batch).float()
            outs.append(logits.topk(top_k, dim=-1).indices.cpu() if top_k else logits.cpu())
            if "question_id" not in batch:
                raise ReproError("prediction batches need a 'question_id' entry")
            ids.append(torch.as_tensor(batch["question_id"]).cpu())
            rate = len(logits) / max(time.perf_counter() - tick, 1e-9)
            bar.update(task, advance=1, rate=f"{rate:.1f}")
    question_ids = torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long)
    scores = torch.cat(outs) if outs else torch.zeros(0)
    if env.distributed:
        return dist_utils.gather_rows(question_ids, env), dist_utils.gather_rows(scores, env)
    return question_ids, scores
