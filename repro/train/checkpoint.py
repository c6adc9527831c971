"""Checkpoints: model, optimiser, grad scaler, RNG states, epoch/step and sampler position, saved atomically.

A checkpoint is written to a temp file beside `last.pt` and renamed over it, so a crash or a second
signal during the save never leaves a truncated file under the name that `--resume` reads.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro.errors import ReproError
from repro.utils import atomic_open

LAST = "last.pt"
FORMAT = 1


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """The generators' states as `rng_state` saved them. A checkpoint loaded onto a GPU (`map_location`) brings
    these byte tensors there too, and torch's generators take theirs from the CPU only."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
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
) -> Path:
    """Save everything a resumed run needs. `epoch` is the epoch in progress (0-indexed) and
    `step_in_epoch` how many of its batches are done; an epoch boundary is (epoch + 1, 0)."""
    state = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": epoch,
        "step": step,
        "step_in_epoch": step_in_epoch,
        "rng": rng_state(),
        "extra": extra or {},
    }
    with atomic_open(path, "wb") as handle:
        torch.save(state, handle)
    return path


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint`; a missing or unreadable file is a ReproError."""
    if not path.is_file():
        raise ReproError(f"no checkpoint to resume from at {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # a truncated or foreign file
        raise ReproError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else "?"
        raise ReproError(f"{path}: not a checkpoint of this toolkit (format {found})")
    return state


def restore(
    state: dict[str, Any],
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any = None,
    rng: bool = True,
) -> None:
    """Load model/optimizer/scaler states (and the RNG states unless rng=False) from a checkpoint dict."""
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise ReproError(f"checkpoint does not fit this model: {str(exc).splitlines()[0]}") from None
    optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and state.get("scaler") is not None:
        scaler.load_state_dict(state["scaler"])
    if rng:
        set_rng_state(state["rng"])
