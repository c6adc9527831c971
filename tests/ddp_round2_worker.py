"""A rank of the two-rank tests in tests/test_train_ddp_round2.py (or one process alone):
`torchrun --nproc_per_node=2 -m tests.ddp_round2_worker MODE FOLDER`.

resume      train a tiny MCAN+PA (dropout on: each rank draws its own masks) uninterrupted into FOLDER/full, then
            again into FOLDER/part, stopped by a SIGTERM to rank 0 after step 4 (mid-epoch), then resumed from it;
            each rank saves both runs' final weights to FOLDER/resume.rank<R>.pt
accumulate  train with the recipe's accumulate (FOLDER/recipe.yaml); weights to FOLDER/accumulate.rank<R>.pt
evaluate    answer TinyVQA(23) in batches of 4 by the VQA family's path (`vqa_scoring.predict_answers`) and write
            them as the server's file (`vqa_server.write_test_file`) to FOLDER/answers.rank<R>.json; the question
            ids each process's model saw go to FOLDER/seen.rank<R>.pt
"""

import os
import signal
import sys
from pathlib import Path

import torch

from repro.datasets import vqa_scoring, vqa_server
from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import TrainingInterrupted, fit
from repro.train import distributed as dist_utils
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA

RANK = os.environ.get("RANK", "single")


def model(dropout: float | None = None):
    torch.manual_seed(0)
    sizes = TINY_SIZES if dropout is None else {**TINY_SIZES, "dropout": dropout}
    return build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=sizes)


def resume(folder: Path) -> None:
    recipe = load_recipe(str(folder / "recipe.yaml"))
    full = model()
    fit(full, TinyVQA(24), recipe, folder / "full", progress=False)

    def stop_rank0(step: int) -> None:
        if step == 4 and RANK == "0":
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        fit(model(), TinyVQA(24), recipe, folder / "part", progress=False, on_step=stop_rank0)
        raise SystemExit("the SIGTERM did not stop the run")
    except TrainingInterrupted:
        pass
    resumed = model()
    state = fit(resumed, TinyVQA(24), recipe, folder / "part", resume=True, progress=False)
    assert state.resumed_from == {"epoch": 1, "step": 4}, state.resumed_from
    torch.save({"full": full.state_dict(), "resumed": resumed.state_dict()}, folder / f"resume.rank{RANK}.pt")


def accumulate(folder: Path) -> None:
    trained = model(dropout=0.0)
    fit(trained, TinyVQA(16), load_recipe(str(folder / "recipe.yaml")), folder / f"run.{RANK}", progress=False)
    torch.save(trained.state_dict(), folder / f"accumulate.rank{RANK}.pt")


def evaluate(folder: Path) -> None:
    scorer = model()
    seen: list[int] = []
    forward = scorer.forward

    def watched(batch):
        seen.extend(batch["question_id"].tolist())
        return forward(batch)

    scorer.forward = watched
    recipe = load_recipe(str(folder / "recipe.yaml")).replace(eval_batch_size=4)
    vocab = [f"answer{i}" for i in range(NUM_ANSWERS)]
    ids, answers = vqa_scoring.predict_answers(scorer, TinyVQA(23), vocab, recipe, progress=False)
    vqa_server.write_test_file(folder / f"answers.rank{RANK}.json", dict(zip(ids, answers)), [])
    torch.save({"seen": seen, "ids": ids}, folder / f"seen.rank{RANK}.pt")


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    dist_utils.init_from_env(device="cpu")
    {"resume": resume, "accumulate": accumulate, "evaluate": evaluate}[mode](where)
    dist_utils.shutdown()
