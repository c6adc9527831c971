"""Training losses named by recipes. Each takes (logits, target) and returns the loss of the local batch.

bce-sum: BCE-with-logits over soft answer scores, summed over answers and samples (MCAN's
         `BCELoss(reduction='sum')` after a sigmoid, written stably; Eq. 4 of mcan-pa).
bce-mean: the same, averaged over every element.
cross-entropy: softmax cross-entropy against class indices (or soft distributions), mean over samples.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from repro.errors import ReproError

REDUCTIONS = {"bce-sum": "sum", "bce-mean": "mean", "cross-entropy": "mean"}
FAMILY_LOSSES = ("decoding-bce", "per-task", "objectives")  # computed by the family's loss step


def compute_loss(name: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if name == "bce-sum":
        return F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="sum")
    if name == "bce-mean":
        return F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="mean")
    if name == "cross-entropy":
        return F.cross_entropy(logits.float(), target)
    if name in FAMILY_LOSSES:
        raise ReproError(f"loss {name!r} is computed by its family's loss step, not by the shared losses")
    raise ReproError(f"unknown loss {name!r}; one of {', '.join(REDUCTIONS)}")


def is_summed(name: str) -> bool:
    """Summed losses are scaled by the world size under DDP, whose gradient averaging would otherwise
    turn the sum over the global batch into a sum over one process's share."""
    return REDUCTIONS.get(name) == "sum"
