"""One rank of the DDP test: `torchrun --nproc_per_node=2 -m tests.ddp_worker WORKDIR RECIPE`.

Each rank starts from different weights (seeded by its rank); DDP must broadcast rank 0's and keep
them in step. Every rank saves its final weights and TrainState to WORKDIR/rank<R>.pt.
"""

import os
import sys
from pathlib import Path

import torch

from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import fit
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA

SIZES = {**TINY_SIZES, "dropout": 0.0}


def main(workdir: Path, recipe_path: str) -> None:
    rank = int(os.environ["RANK"])
    torch.manual_seed(rank)
    model = build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=SIZES)
    state = fit(model, TinyVQA(16), load_recipe(recipe_path), workdir, progress=False)
    torch.save({"weights": model.state_dict(), "state": state.to_json()}, workdir / f"rank{rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
