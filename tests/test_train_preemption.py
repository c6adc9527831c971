"""Preemption that saves: Slurm's SIGTERM goes to the whole process group, DataLoader workers included. The main
process saves a step checkpoint whatever happens to its workers, and the resumed run ends with the weights of an
uninterrupted one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from repro.paths import REPO_DIR

pytestmark = pytest.mark.slow  # three training processes with loader workers

RECIPE = """\
optimizer: {name: adam, betas: [0.9, 0.98], eps: 1.0e-9}
schedule: {name: constant, base_lr: 0.001}
epochs: 3
batch_size: 8
loss: bce-sum
seed: 5
num_workers: 2
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), os.environ.get("PYTHONPATH", "")])}
    env.update(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _run(workdir: Path, recipe: Path, mode: str) -> subprocess.Popen:
    workdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "tests.preempt_worker", str(workdir), str(recipe), mode]
    return subprocess.Popen(
        command, cwd=REPO_DIR, env=_env(), stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _workers(pid: int) -> list[int]:
    """The processes of `pid`'s group other than itself: its loader workers."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pid and int(stat.parent.name) != pid:  # fields[2]: the process group
            out.append(int(stat.parent.name))
    return out


def test_sigterm_to_the_process_group_saves_and_resumes_to_the_same_weights(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    full = _run(tmp_path / "full", recipe, "full")
    stopped = _run(tmp_path / "part", recipe, "stop")
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "part" / "ready").exists():
            assert stopped.poll() is None and time.monotonic() < deadline, stopped.stderr.read()[-3000:]
            time.sleep(0.05)
        assert len(_workers(stopped.pid)) >= 2  # the loader's workers share the group, as under Slurm
        os.killpg(stopped.pid, signal.SIGTERM)
        (tmp_path / "part" / "sent").touch()
        _, err = stopped.communicate(timeout=120)
    finally:
        if stopped.poll() is None:
            os.killpg(stopped.pid, signal.SIGKILL)
    assert stopped.returncode == 130, err[-3000:]
    assert "killed by signal" not in err
    assert "interrupted by SIGTERM at epoch 1, step 2" in err
    saved = torch.load(tmp_path / "part" / "last.pt", weights_only=True)
    assert (saved["epoch"], saved["step"], saved["step_in_epoch"]) == (0, 2, 2)

    resumed = _run(tmp_path / "part", recipe, "resume")
    for run in (resumed, full):
        _, err = run.communicate(timeout=180)
        assert run.returncode == 0, err[-3000:]
    expected = torch.load(tmp_path / "full" / "weights.pt", weights_only=True)
    got = torch.load(tmp_path / "part" / "weights.pt", weights_only=True)
    for name, value in expected.items():
        assert torch.equal(value, got[name]), name
