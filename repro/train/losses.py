"""Training losses named by recipes. Each takes (logits, target) and returns the loss of the local batch.

bce-sum: BCE-with-logits over soft answer scores, summed over answers and samples (MCAN's
         `BCELoss(reduction='sum')` after a sigmoid, written stably; Eq. 4 of mcan-pa).
bce-mean: the same, averaged over every element.
cross-entropy: softmax cross-entropy against class indices (or soft distributions), mean over samples.

`LOSSES` is the one table of them: a recipe's `loss:` is checked against it, and adding a loss is one entry.
torch is imported when a loss is computed, so that reading a recipe does not load it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from repro.errors import ReproError

if TYPE_CHECKING:
    import torch


def bce_sum(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="sum")


def bce_mean(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="mean")


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return F.cross_entropy(logits.float(), target)


@dataclass(frozen=True)
class Loss:
    # (logits, target) -> loss; None: computed by its family's loss step (repro.families.base), which a
    # recipe naming it must be trained with
    compute: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None
    # summed over the samples: scaled by the world size under DDP, whose gradient averaging would otherwise
    # turn the sum over the global batch into a sum over one process's share
    summed: bool = False


LOSSES: dict[str, Loss] = {
    "bce-sum": Loss(bce_sum, summed=True),
    "bce-mean": Loss(bce_mean),
    "cross-entropy": Loss(cross_entropy),
    # computed by their family's loss step
    "decoding-bce": Loss(None),
    "per-task": Loss(None),
    "objectives": Loss(None),
}


def compute_loss(name: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if name not in LOSSES:
        shared = [n for n, loss in LOSSES.items() if loss.compute is not None]
        raise ReproError(f"unknown loss {name!r}; one of {', '.join(shared)}")
    compute = LOSSES[name].compute
    if compute is None:
        raise ReproError(f"loss {name!r} is computed by its family's loss step, not by the shared losses")
    return compute(logits, target)


def is_summed(name: str) -> bool:
    """Summed losses are scaled by the world size under DDP (see `Loss.summed`)."""
    return name in LOSSES and LOSSES[name].summed
