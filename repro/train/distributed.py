"""Multi-GPU and multi-node training through torchrun: process group, DDP wrapping, sharded sampling.

Launch with `torchrun --nproc_per_node=G [--nnodes=N ...] <script>`; torchrun sets RANK, WORLD_SIZE
and LOCAL_RANK, which `init_from_env` reads. The recipe's batch size is the global batch: each of
the W processes takes batch/W samples per step, so the paper's batch holds whatever the GPU count.
"""

from __future__ import annotations

import math
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


def current() -> DistEnv:
    """The torchrun job this process has joined (`init_from_env`), or a single process: never initialises one."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() <= 1:
        return DistEnv()
    local = int(os.environ.get("LOCAL_RANK", "0") or 0)
    return DistEnv(dist.get_rank(), dist.get_world_size(), local, dist.get_backend())


def is_main_process() -> bool:
    """Rank 0 of a torchrun job, or a single process: the one that writes a unit's files and prints its lines."""
    return current().is_main


_cpu_groups: dict[int, object] = {}


def _cpu_group():
    """A gloo group over every rank for gathering CPU tensors and objects: the default group where it is gloo,
    else one made once (collectively) beside nccl, so that gathered answers never pass through GPU memory."""
    if dist.get_backend() == "gloo":
        return None
    key = id(dist.distributed_c10d._get_default_group())
    if key not in _cpu_groups:
        _cpu_groups[key] = dist.new_group(backend="gloo")
    return _cpu_groups[key]


def gather_objects(value, env: DistEnv) -> list:
    """Every rank's `value` (picklable, small: RNG states, a rank's answers), in rank order, on every rank."""
    if not env.distributed:
        return [value]
    out = [None] * env.world_size
    dist.all_gather_object(out, value, group=_cpu_group())
    return out


def gather_rows(tensor: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """Every rank's rows of `tensor` (its first dimension; the same trailing shape and dtype on every rank),
    concatenated in rank order on every rank, on the CPU."""
    tensor = tensor.detach().cpu().contiguous()
    if not env.distributed:
        return tensor
    shapes = gather_objects((len(tensor), tuple(tensor.shape[1:]), tensor.dtype), env)
    counts = [n for n, _, _ in shapes]
    _, trailing, dtype = next((s for s in shapes if s[0]), shapes[0])  # a rank without rows takes another's shape
    padded = torch.zeros((max(counts), *trailing), dtype=dtype)
    if len(tensor):
        padded[: len(tensor)] = tensor
    parts = [torch.empty_like(padded) for _ in range(env.world_size)]
    dist.all_gather(parts, padded, group=_cpu_group())
    return torch.cat([part[:n] for part, n in zip(parts, counts)])


def shard_of_batches(size: int, batch_size: int, env: DistEnv) -> range:
    """The items this rank evaluates: a contiguous run of whole batches of `batch_size`, the ranks' runs in order
    covering `range(size)` once. Whole batches, so that each batch is the one a single process forms (the same
    numbers to the last bit); the ranks' shares differ by at most one batch."""
    batches = math.ceil(size / batch_size)
    first, last = (batches * env.rank) // env.world_size, (batches * (env.rank + 1)) // env.world_size
    return range(min(first * batch_size, size), min(last * batch_size, size))


def gpu_count(env: DistEnv, device: torch.device) -> int:
    """GPUs taking part in training (0 on CPU)."""
    return env.world_size if device.type == "cuda" else 0


def shutdown(env: DistEnv | None = None) -> None:
    """Leave the torchrun job (the end of `repro run` under torchrun): the process group destroyed, once."""
    if dist.is_available() and dist.is_initialized() and (env is None or env.distributed):
        _cpu_groups.clear()
        dist.destroy_process_group()
