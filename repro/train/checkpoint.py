"""Checkpoints: model, optimiser, grad scaler, RNG states (every rank's under torchrun), epoch/step and sampler
position, saved atomically.

A checkpoint is written to a temp file beside `last.pt` and renamed over it, so a crash or a second
signal during the save never leaves a truncated file under the name that `--resume` reads.

Reading one never runs code: `torch.load(..., weights_only=True)` takes tensors, numbers, strings and containers
only. The RNG states are saved in those terms (numpy's key as a tensor); files of format 1, which hold numpy's key
as an array, are read with numpy's array constructors allowed and nothing more. Anything else a file asks for
(a planted `os.system`, any other callable) refuses the file in one line.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro.errors import ReproError, cut
from repro.train import spent
from repro.utils import atomic_open

LAST = "last.pt"
# 2: numpy's RNG key saved as a tensor, so that weights_only=True reads the whole file; 3: every rank's RNG states
# (`rng_ranks`), so that each rank of a resumed torchrun job draws on as it would have (its dropout masks)
FORMAT = 3
READABLE = (1, 2, 3)

# What format 1 needs beyond weights_only's defaults: numpy's array of its RNG key, rebuilt from its raw bytes.
_reconstruct = np._core.multiarray._reconstruct if hasattr(np, "_core") else np.core.multiarray._reconstruct
_NUMPY_ARRAY_GLOBALS = [
    _reconstruct,
    (_reconstruct, "numpy.core.multiarray._reconstruct"),  # the name numpy 1 pickles it under
    np.ndarray,
    np.dtype,
    type(np.dtype(np.uint32)),
]


def rng_state() -> dict[str, Any]:
    kind, key, pos, has_gauss, cached = np.random.get_state()
    numpy_state = (kind, torch.from_numpy(key.astype(np.int64)), int(pos), int(has_gauss), float(cached))
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """The generators' states as `rng_state` saved them. A checkpoint loaded onto a GPU (`map_location`) brings
    these byte tensors there too, and torch's generators take theirs from the CPU only."""
    random.setstate(state["python"])
    kind, key, *rest = state["numpy"]
    key = key.cpu().numpy() if isinstance(key, torch.Tensor) else np.asarray(key)
    np.random.set_state((kind, key.astype(np.uint32), *rest))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def save_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any = None,
    epoch: int,
    step: int,
    step_in_epoch: int,
    extra: dict[str, Any] | None = None,
    rng_ranks: list[dict[str, Any]] | None = None,
) -> Path:
    """Save everything a resumed run needs. `epoch` is the epoch in progress (0-indexed) and
    `step_in_epoch` how many of its batches are done; an epoch boundary is (epoch + 1, 0). `rng_ranks`: every
    rank's `rng_state()` in rank order (a torchrun job's, gathered by rank 0, which saves); default this process's."""
    rng_ranks = rng_ranks or [rng_state()]
    state = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": epoch,
        "step": step,
        "step_in_epoch": step_in_epoch,
        "rng": rng_ranks[0],
        "rng_ranks": rng_ranks,
        "extra": extra or {},
    }
    with atomic_open(path, "wb") as handle:
        torch.save(state, handle)
    spent.mark()  # the unit's seconds up to this checkpoint, for its record if it is resumed from here
    return path


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint`; a missing or unreadable file is a ReproError."""
    if not path.is_file():
        raise ReproError(f"no checkpoint to resume from at {path}")
    try:
        with torch.serialization.safe_globals(_NUMPY_ARRAY_GLOBALS):
            state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refused a global: the file asks to run code
        raise ReproError(
            f"{path}: refused: the file asks for {_refused_global(exc)} on load, and a checkpoint of this toolkit "
            "holds only tensors, numbers and RNG states; it was not read"
        ) from None
    except Exception as exc:  # a truncated or foreign file
        raise ReproError(f"{path}: not a readable checkpoint ({_first_line(exc)})") from None
    if not isinstance(state, dict) or state.get("format") not in READABLE:
        found = state.get("format") if isinstance(state, dict) else "?"
        raise ReproError(f"{path}: not a checkpoint of this toolkit (format {found})")
    for part in ("model", "optimizer"):  # nothing trains on, or is evaluated with, a weight that is not a number
        for name, tensor in _tensors(state.get(part), part):
            problem = unusable_values(name, tensor, torch.float32)
            if problem:
                raise ReproError(f"{path}: {problem}; refused (resume from an earlier checkpoint or train again)")
    return state


def _tensors(value: Any, name: str):
    """(dotted name, tensor) of every tensor in a nested dict/list (a state dict, an optimizer's state)."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from _tensors(inner, f"{name}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, inner in enumerate(value):
            yield from _tensors(inner, f"{name}.{i}")


def unusable_values(name: str, tensor: torch.Tensor, dtype: torch.dtype | None = None) -> str | None:
    """Why the floating-point `tensor` cannot be used as the weight `name` of a model of `dtype`: NaN or infinite
    values, or values beyond what `dtype` holds (a float64 file loaded into float32 becomes infinite); else None."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return None
    bad = ~torch.isfinite(tensor)
    if bad.any():
        return f"{cut(name)} holds {int(bad.sum()):,} NaN or infinite value(s) of {tensor.numel():,}"
    if dtype is not None and dtype.is_floating_point and torch.finfo(dtype).bits < torch.finfo(tensor.dtype).bits:
        largest, top = float(tensor.abs().max()), torch.finfo(dtype).max
        if largest > top:
            return f"{cut(name)} holds {largest:.3g}, beyond what {str(dtype).replace('torch.', '')} holds ({top:.3g})"
    return None


def _refused_global(exc: BaseException) -> str:
    """The global weights_only refused, from torch's message ("Unsupported global: GLOBAL posix.system ...")."""
    for word in ("GLOBAL ", "global "):
        text = str(exc)
        if word in text:
            name = text.split(word, 1)[1].split()[0].strip(".,;'\"`")
            if name and len(name) <= 120:
                return f"the callable {name}"
    return "something other than data"


def _first_line(exc: BaseException) -> str:
    line = (str(exc).strip().splitlines() or [""])[0]
    return line[:200] if line else "unreadable"


def restore(
    state: dict[str, Any],
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any = None,
    rng: bool = True,
    rank: int = 0,
) -> None:
    """Load model/optimizer/scaler states (and the RNG states unless rng=False) from a checkpoint dict: `rank`'s
    own RNG states where the file has them (format 3), else the only ones it has (rank 0's, or one process's)."""
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise ReproError(f"checkpoint does not fit this model: {str(exc).splitlines()[0]}") from None
    optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and state.get("scaler") is not None:
        scaler.load_state_dict(state["scaler"])
    if rng:
        set_rng_state(rank_rng_state(state, rank))


def rank_rng_state(state: dict[str, Any], rank: int) -> dict[str, Any]:
    """The RNG states `rank` saved; a rank the file has none for (a run resumed on more processes than it was
    saved with, or a file of format 1 or 2) takes rank 0's."""
    ranks = state.get("rng_ranks") or []
    return ranks[rank] if rank < len(ranks) else state["rng"]
