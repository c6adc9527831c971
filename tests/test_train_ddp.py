"""DistributedDataParallel for real: two CPU processes under torchrun (gloo) train a tiny model."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import fit
from tests.ddp_worker import SIZES
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TinyVQA

pytestmark = pytest.mark.slow  # over ~10 s: left out by `make test-fast`

ROOT = Path(__file__).resolve().parent.parent
RECIPE = """\
optimizer: {name: sgd, momentum: 0.9}
schedule: {name: constant, base_lr: 0.002}
epochs: 2
batch_size: 8
loss: bce-sum
seed: 3
"""


def test_two_ranks_end_identical_and_match_one_process(tmp_path):
    recipe_path = tmp_path / "ddp.yaml"
    recipe_path.write_text(RECIPE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",  # gloo ranks on the CPU, on a GPU machine too
    }
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "tests.ddp_worker",
        str(tmp_path / "ddp"),
        str(recipe_path),
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]

    ranks = [torch.load(tmp_path / "ddp" / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    for name, a in ranks[0]["weights"].items():
        assert torch.equal(a, ranks[1]["weights"][name]), name
    state = ranks[0]["state"]
    assert state["world_size"] == 2 and state["global_batch"] == 8 and state["per_device_batch"] == 4
    assert state["gpu_count"] == 0 and state["step"] == 4

    # One process with the global batch, from rank 0's initial weights, takes the same steps. SGD, not
    # Adam: it is sensitive to the gradient's scale (the summed loss must be summed over the global
    # batch) and does not blow up float noise in gradients that are zero in exact arithmetic.
    torch.manual_seed(0)
    single = build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=SIZES)
    fit(single, TinyVQA(16), load_recipe(str(recipe_path)), tmp_path / "single", progress=False, device="cpu")
    for name, a in single.state_dict().items():
        assert torch.allclose(a, ranks[0]["weights"][name], atol=1e-5), name


def test_task_heads_and_switched_off_modules_sync_gradients_as_one_process(tmp_path):
    """ace-rpe's SNLI-VE head (its loss the wrapped module's forward) and a model with a module its loss leaves out
    (`find_unused_parameters`): two ranks under torchrun end each step with the gradients, and after two steps
    the weights, of one process on the same global batch."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",  # gloo ranks on the CPU, on a GPU machine too
    }
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    worker = ["-m", "tests.ddp_heads_worker", str(tmp_path)]
    two = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *worker]
    for cmd in (two, [sys.executable, *worker]):
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    for name in ("snli-ve", "switched-off"):
        single, *ranks = (torch.load(tmp_path / f"{name}.rank{r}.pt") for r in ("single", 0, 1))
        assert sorted(single["grads"]) == [1, 2]
        for step, grads in single["grads"].items():
            for rank in ranks:
                assert sorted(rank["grads"][step]) == sorted(grads), (name, step)
                for key, g in grads.items():
                    assert torch.allclose(rank["grads"][step][key], g, atol=1e-5), (name, step, key)
        for key, w in single["weights"].items():
            assert torch.allclose(ranks[0]["weights"][key], w, atol=1e-5) and torch.equal(
                ranks[0]["weights"][key], ranks[1]["weights"][key]
            ), (name, key)
