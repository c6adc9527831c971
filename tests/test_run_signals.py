"""Signals to `repro run -j 2`: SIGTERM to the main process ends its workers too."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.paths import REPO_DIR

pytestmark = pytest.mark.slow  # over ~10 s: left out by `make test-fast`


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_two_workers(sandbox: Path) -> tuple[subprocess.Popen, set[int]]:
    """`repro run -j 2` of two synthetic MCAN rows, once both its workers are up."""
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    env = {
        **os.environ,
        "REPRO_EXPERIMENTS": str(sandbox / "experiments"),
        "REPRO_RESULTS": str(sandbox / "results"),
        "REPRO_DATA_DIR": str(sandbox / "data"),
    }
    command = ["run", "table5-ablation", "--scale", "synthetic", "--rows", "MCAN,MCAN+PWA", "--seeds", "0", "-j", "2"]
    command += ["generator.train_images=150", "generator.val_images=40"]  # short epochs: a variant, in the sandbox
    main = subprocess.Popen(
        [sys.executable, "-m", "repro.cli", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers: set[int] = set()

    def both_up() -> bool:
        workers.update(p for p in _children(main.pid) if "spawn_main" in _cmdline(p))
        return len(workers) >= 2 or main.poll() is not None

    _wait_for(both_up)
    if len(workers) < 2:
        main.kill()
        pytest.fail("the workers did not start")
    return main, workers


# How long a wait may last before the test calls it a failure: only a guard against hanging the suite, far above
# what any step takes on a busy machine (each wait ends as soon as what it waits for happens).
HANG_GUARD_S = 300


def _wait_for(condition) -> None:
    """Polls `condition` until it holds or the hang guard passes."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)


def _gone(workers: set[int]) -> bool:
    """Waits for the workers (not our children: no waitpid) to exit, on their pidfds; False if one outlives the
    hang guard."""
    fds = []
    for pid in workers:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue  # already gone
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        waiting = list(fds)
        while waiting and time.monotonic() < deadline:
            ready, _, _ = select.select(waiting, [], [], deadline - time.monotonic())
            waiting = [fd for fd in waiting if fd not in ready]
    finally:
        for fd in fds:
            os.close(fd)
    return not any(_alive(p) for p in workers)


def test_sigterm_to_the_main_process_ends_the_workers(sandbox):
    main, workers = _start_two_workers(sandbox)
    try:
        main.send_signal(signal.SIGTERM)
        main.wait(timeout=HANG_GUARD_S)
        assert _gone(workers), "workers outlived their parent"
        assert main.returncode != 0
    finally:
        if main.poll() is None:
            main.kill()


def test_a_worker_stopped_by_its_parents_death_ends(sandbox):
    """The main process killed outright (SIGKILL, or a second SIGTERM while it stops): its workers get their death
    signal while training, save a checkpoint as for any stop, and must then end rather than wait for more work."""
    main, workers = _start_two_workers(sandbox)
    try:
        _wait_for(lambda: len(list(sandbox.rglob("last.pt"))) >= 2)  # both training: each saved an epoch
        assert len(list(sandbox.rglob("last.pt"))) >= 2, "the workers did not reach their first checkpoint"
        main.kill()
        main.wait(timeout=HANG_GUARD_S)
        assert _gone(workers), "workers outlived their killed parent"
    finally:
        if main.poll() is None:
            main.kill()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
