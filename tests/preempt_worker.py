"""One training run of the preemption test: `python -m tests.preempt_worker WORKDIR RECIPE full|stop|resume`.

A tiny MCAN+PA (dropout on) trains on TinyVQA with 2 DataLoader workers. `stop`: after step 2 it writes
WORKDIR/ready and waits (up to a minute) for WORKDIR/sent, which the test writes once it has signalled the whole
process group, workers included. The final weights go to WORKDIR/weights.pt; a stopped run exits 130.
"""

import sys
import time
from pathlib import Path

import torch

from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import TrainingInterrupted, fit
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA


def main(workdir: Path, recipe_path: str, mode: str) -> int:
    torch.manual_seed(0)
    model = build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=TINY_SIZES)

    def wait_for_the_signal(step: int) -> None:
        if mode == "stop" and step == 2:
            (workdir / "ready").touch()
            deadline = time.monotonic() + 60
            while not (workdir / "sent").exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    recipe = load_recipe(recipe_path)
    try:
        fit(model, TinyVQA(22), recipe, workdir, resume=mode == "resume", progress=False, on_step=wait_for_the_signal)
    except TrainingInterrupted as exc:
        print(exc, file=sys.stderr)
        return 130
    torch.save(model.state_dict(), workdir / "weights.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
