"""`python -m tests.torchrun_ranks DUMP repro-args...`: the `repro` command line (what `python -m repro` runs), and
each process's trained models saved to DUMP/rank<R>.pt, so a test can compare one process with the ranks of a
torchrun job and the ranks with each other:

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.torchrun_ranks DUMP run ID ...

The trainer wraps every model it trains in `repro.train.distributed.wrap` (DDP under torchrun); that call is watched
here and nothing else changes. DUMP/rank<R>.pt holds a list, one entry per trained model in training order:
{"initial": the weights the training started from, "final": the weights at exit}.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

import torch

from repro.train import distributed

_models: list[tuple[torch.nn.Module, dict[str, torch.Tensor]]] = []
_wrap = distributed.wrap


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _watching_wrap(model, env, device):
    wrapped = _wrap(model, env, device)  # DDP broadcasts rank 0's weights here: what every rank starts from
    _models.append((model, _weights(model)))
    return wrapped


def _dump(folder: Path) -> None:
    rank = os.environ.get("RANK", "0")
    torch.save([{"initial": start, "final": _weights(m)} for m, start in _models], folder / f"rank{rank}.pt")
    # whether `repro run` left its process group at the end, as it should
    (folder / f"rank{rank}.group").write_text(str(torch.distributed.is_initialized()))


def main(argv: list[str]) -> None:
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    distributed.wrap = _watching_wrap
    atexit.register(_dump, folder)
    from repro.cli import main as repro

    sys.argv = ["repro", *argv[1:]]
    repro()


if __name__ == "__main__":
    main(sys.argv[1:])
