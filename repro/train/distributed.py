"""Multi-GPU and multi-node training through torchrun: process group, DDP wrapping, sharded sampling.

Launch with `torchrun --nproc_per_node=G [--nnodes=N ...] <script>`; torchrun sets RANK, WORLD_SIZE
and LOCAL_RANK, which `init_from_env` reads. The recipe's batch size is the global batch: each of
the W processes takes batch/W samples per step, so the paper's batch holds whatever the GPU count.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

from repro.errors import ReproError


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_from_env(backend: str | None = None, device: str | torch.device | None = None) -> DistEnv:
    """Join the torchrun job described by RANK/WORLD_SIZE/LOCAL_RANK: nccl where this process trains on a GPU
    (`device_for` with `device`), gloo where it trains on the CPU (`--device cpu` on a GPU machine too).

    Without those variables, or with WORLD_SIZE=1, this is a single process and nothing is initialised.
    """
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        raise ReproError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (they are set by torchrun)") from None
    if world <= 1:
        return DistEnv()
    if dist.is_initialized():
        return DistEnv(dist.get_rank(), dist.get_world_size(), local, dist.get_backend())
    dev = device_for(DistEnv(rank, world, local), device)
    backend = backend or ("nccl" if dev.type == "cuda" else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend=backend)
    return DistEnv(rank, world, local, backend)


DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
_requested: str | None = None  # set by `use_device` for the units of a run (`repro run --device`)


def parse_device(text: str | None, option: str = "--device") -> str | None:
    """A device request as written (`auto`, `cpu`, `cuda`, `cuda:N`): checked for form only, so a Slurm job
    asks for a GPU from a login node that has none; None and `auto` mean the same."""
    if text is None:
        return None
    text = str(text).strip()
    if not _DEVICE.fullmatch(text):
        raise ReproError(f"{option} {text}: not a device; use {DEVICE_CHOICES}")
    return text


def check_device(text: str | None, option: str = "--device") -> str | None:
    """`parse_device`, and a CUDA device must exist on this machine."""
    text = parse_device(text, option)
    if text is not None and text.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(text.split(":")[1]) if ":" in text else 0
        if count == 0:
            raise ReproError(
                f"{option} {text}: no CUDA GPU on this machine (torch {torch.__version__}); use --device cpu"
            )
        if index >= count:
            raise ReproError(f"{option} {text}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return text


@contextmanager
def use_device(text: str | None) -> Iterator[None]:
    """Within it, trainers asked for no device train on `text` (a unit's `RunContext.device`)."""
    global _requested
    previous, _requested = _requested, parse_device(text)
    try:
        yield
    finally:
        _requested = previous


def device_for(env: DistEnv, device: str | torch.device | None = None) -> torch.device:
    """The device this process trains on: the requested one (or the one `use_device` set), else its local
    GPU, else the CPU. `cuda` without an index is the process's local GPU (LOCAL_RANK under torchrun)."""
    if device is None:
        device = _requested
    if isinstance(device, torch.device):
        return device
    if device is None or device == "auto":
        return _local_gpu(env) if torch.cuda.is_available() else torch.device("cpu")
    text = check_device(device)
    if text == "cpu":
        return torch.device("cpu")
    if ":" not in text:
        return _local_gpu(env)
    if env.distributed:
        raise ReproError(
            f"--device {text}: with {env.world_size} processes use --device cuda (each takes its LOCAL_RANK GPU)"
        )
    return torch.device(text)


def _local_gpu(env: DistEnv) -> torch.device:
    """The GPU of this process: its LOCAL_RANK's; a node with fewer GPUs than processes is refused in one line
    (CUDA's own answer comes later, as "invalid device ordinal", from inside the first allocation)."""
    count = torch.cuda.device_count()
    if env.local_rank >= count:
        raise ReproError(
            f"process {env.local_rank} of this node has no GPU: the node has {count}; start one process per GPU "
            f"(torchrun --nproc-per-node {count}) or train on the CPU (--device cpu)"
        )
    return torch.device("cuda", env.local_rank)


def model_device(model: nn.Module) -> torch.device:
    """Where a model's weights are (the CPU for a model without any): evaluation feeds its batches there."""
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


def per_device_batch(global_batch: int, env: DistEnv) -> int:
    """Global batch / world size; the global batch must split evenly."""
    if global_batch % env.world_size:
        raise ReproError(
            f"the global batch {global_batch} does not split over {env.world_size} processes; "
            f"use a process count that divides it"
        )
    return global_batch // env.world_size


def wrap(model: nn.Module, env: DistEnv, device: torch.device) -> nn.Module:
    """DistributedDataParallel around `model` when there are several processes, else the model itself. A model
    whose loss leaves some of its trainable parameters out (a module a row switches off, a head another step
    trains) says so with `find_unused_parameters = True`: DDP then marks them ready instead of waiting for them."""
    if not env.distributed:
        return model
    ids = [device.index] if device.type == "cuda" else None
    unused = bool(getattr(model, "find_unused_parameters", False))
    return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=unused)


def sampler(dataset, env: DistEnv, *, seed: int, shuffle: bool = True) -> DistributedSampler:
    """A DistributedSampler (also used with one process, so the sample order is the same code path)."""
    return DistributedSampler(
        dataset, num_replicas=env.world_size, rank=env.rank, shuffle=shuffle, seed=seed, drop_last=False
    )


def barrier(env: DistEnv) -> None:
    if env.distributed:
        dist.barrier()


def all_reduce_mean(value: float, env: DistEnv, device: torch.device) -> float:
    if not env.distributed:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item()) / env.world_size


def gpu_count(env: DistEnv, device: torch.device) -> int:
    """GPUs taking part in training (0 on CPU)."""
    return env.world_size if device.type == "cuda" else 0


def shutdown(env: DistEnv) -> None:
    if env.distributed and dist.is_initialized():
        dist.destroy_process_group()
