"""Temporary folders left by a killed process are swept by the next run; nobody else's are touched."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import zipfile

from repro.data.extract import STAGING_PREFIX, unpack
from repro.data.store import FeatureStoreWriter
from repro.utils import sweep_work_dirs, work_dir


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _left_behind(root, prefix, host, pid):
    folder = root / f"{prefix}{host}.{pid}.abc123"
    folder.mkdir(parents=True)
    (folder / "half.bin").write_bytes(b"x" * 10)
    return folder


def test_only_a_dead_process_folder_on_this_host_is_swept(tmp_path):
    host = socket.gethostname()
    dead = _left_behind(tmp_path, ".p-", host, _dead_pid())
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as live_child:
        try:
            live = _left_behind(tmp_path, ".p-", host, live_child.pid)
            elsewhere = _left_behind(tmp_path, ".p-", "another-host.example", _dead_pid())
            other_prefix = _left_behind(tmp_path, ".q-", host, _dead_pid())
            assert sweep_work_dirs(tmp_path, ".p-") == [dead]
            assert not dead.exists() and live.exists() and elsewhere.exists() and other_prefix.exists()
        finally:
            live_child.kill()
    mine = work_dir(tmp_path, ".p-")
    assert mine.name.startswith(f".p-{host}.") and mine.is_dir()
    assert sweep_work_dirs(tmp_path, ".p-") == []  # this process runs: its folder stays


def test_unpack_and_store_sweep_what_a_killed_run_left(tmp_path):
    host = socket.gethostname()
    dest = tmp_path / "data" / "vqa2"
    stale_extract = _left_behind(tmp_path / "data", STAGING_PREFIX, host, _dead_pid())
    archive = tmp_path / "a.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("q.json", "{}")
    archive.write_bytes(buffer.getvalue())
    unpack(archive, dest)
    assert not stale_extract.exists() and (dest / "q.json").is_file()

    store = tmp_path / "stores" / "train"
    stale_store = _left_behind(store.parent, ".train.tmp-", host, _dead_pid())
    with FeatureStoreWriter(store, num_images=0, max_boxes=2, dim=4):
        pass
    assert not stale_store.exists() and store.is_dir()
    assert [p.name for p in store.parent.iterdir()] == ["train"]
