"""Two gloo ranks under torchrun (CPU): a resumed run ends where an uninterrupted one does (each rank's RNG states
are in the checkpoint), accumulated passes give the one-process step on the whole batch, and evaluation split over
the ranks writes the file one process writes (each rank scoring its share, rank 0 alone writing)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repro.families import load_recipe
from repro.paths import REPO_DIR
from tests.tiny_vqa import TinyVQA

pytestmark = pytest.mark.slow  # a torchrun job of two ranks each

RECIPE = """\
optimizer: {name: sgd, momentum: 0.9}
schedule: {name: constant, base_lr: 0.01}
epochs: 2
batch_size: 8
loss: bce-sum
seed: 3
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), os.environ.get("PYTHONPATH", "")])}
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")  # gloo ranks on the CPU, on a GPU machine too
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _run(mode: str, folder: Path, ranks: int | None = 2) -> None:
    head = [sys.executable]
    if ranks:
        head += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
    command = [*head, "-m", "tests.ddp_round2_worker", mode, str(folder)]
    done = subprocess.run(command, cwd=REPO_DIR, env=_env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_ranks_resumed_end_with_the_weights_of_an_uninterrupted_two_rank_run(tmp_path):
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    _run("resume", tmp_path)
    saved = torch.load(tmp_path / "part" / "last.pt", weights_only=True)
    assert len(saved["rng_ranks"]) == 2  # each rank's generators, rank 1's dropout stream among them
    assert not torch.equal(saved["rng_ranks"][0]["torch"], saved["rng_ranks"][1]["torch"])
    ranks = [torch.load(tmp_path / f"resume.rank{r}.pt", weights_only=True) for r in (0, 1)]
    for name, value in ranks[0]["full"].items():
        assert torch.equal(ranks[0]["resumed"][name], value), name
        assert torch.equal(ranks[1]["resumed"][name], value), name


def test_two_ranks_accumulating_take_the_one_process_step_on_the_whole_batch(tmp_path):
    """Global batch 8 over 2 ranks in 2 passes of 2 samples each: the weights of one process taking 8 at once."""
    from repro.train import fit
    from repro.train.distributed import use_device
    from tests.ddp_round2_worker import model

    (tmp_path / "recipe.yaml").write_text(RECIPE + "accumulate: 2\n")
    _run("accumulate", tmp_path)
    single = model(dropout=0.0)
    with use_device("cpu"):
        fit(single, TinyVQA(16), load_recipe(str(tmp_path / "recipe.yaml")).replace(accumulate=1), tmp_path / "one")
    single = single.state_dict()
    ranks = [torch.load(tmp_path / f"accumulate.rank{r}.pt", weights_only=True) for r in (0, 1)]
    for name, value in single.items():
        assert torch.equal(ranks[0][name], ranks[1][name]), name
        assert torch.allclose(ranks[0][name], value, rtol=1e-5, atol=1e-6), name


def test_evaluation_split_over_two_ranks_writes_the_one_process_file(tmp_path):
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    _run("evaluate", tmp_path)
    _run("evaluate", tmp_path, ranks=None)
    single = (tmp_path / "answers.ranksingle.json").read_bytes()
    assert (tmp_path / "answers.rank0.json").read_bytes() == single
    assert not (tmp_path / "answers.rank1.json").exists()  # one writer
    seen = [torch.load(tmp_path / f"seen.rank{r}.pt", weights_only=True) for r in (0, 1)]
    everything = list(range(1000, 1023))
    assert seen[0]["seen"] == everything[:12] and seen[1]["seen"] == everything[12:]  # whole batches of 4, no repeat
    assert seen[0]["ids"] == seen[1]["ids"] == everything  # every rank holds the gathered answers, in order
