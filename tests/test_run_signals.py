"""Signals to `repro run -j 2`: SIGTERM to the main process ends its workers too."""

from __future__ import annotations

import os
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


def test_sigterm_to_the_main_process_ends_the_workers(sandbox):
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    env = {
        **os.environ,
        "REPRO_EXPERIMENTS": str(sandbox / "experiments"),
        "REPRO_RESULTS": str(sandbox / "results"),
        "REPRO_DATA_DIR": str(sandbox / "data"),
    }
    main = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "repro.cli",
            "run",
            "table5-ablation",
            "--scale",
            "synthetic",
            "--rows",
            "MCAN,MCAN+PWA",
            "--seeds",
            "0",
            "-j",
            "2",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while time.monotonic() < deadline and len(workers) < 2:
            workers = {p for p in _children(main.pid) if "spawn_main" in _cmdline(p)}
            time.sleep(0.2)
        assert len(workers) >= 2, "the workers did not start"
        main.send_signal(signal.SIGTERM)
        main.wait(timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.2)
        assert not any(_alive(p) for p in workers), "workers outlived their parent"
        assert main.returncode != 0
    finally:
        if main.poll() is None:
            main.kill()
