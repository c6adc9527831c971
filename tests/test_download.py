"""Downloads against a loopback server: resume, retries, checksums, idempotence, zip-slip, disk space."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from repro.data import download as dl
from repro.data.catalog import get_dataset, load_catalog
from repro.data.download import FetchOptions, dataset_status, download_dataset
from repro.errors import ReproError
from tests._loopback import FileServer

FAST = FetchOptions(retries=3, backoff=0.0, timeout=5.0, sleep=lambda s: None)


def payload(n: int, seed: int = 0) -> bytes:
    out, block = bytearray(), hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_catalog(tmp_path: Path, datasets: dict) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"datasets": datasets}), encoding="utf-8")
    return path


@pytest.fixture
def env(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("REPRO_DATA_DIR", str(root))
    return root


def entry_for(tmp_path, monkeypatch, name: str, files: list[dict], **extra):
    path = write_catalog(tmp_path, {name: {"title": "test", "files": files, **extra}})
    monkeypatch.setenv("REPRO_CATALOG", str(path))
    return get_dataset(name, load_catalog())


def test_resume_after_connection_cut_uses_range(tmp_path, monkeypatch, env):
    data = payload(300_000)
    with FileServer({"/big.bin": data}) as server:
        server.cut_once["/big.bin"] = 120_000
        entry = entry_for(tmp_path, monkeypatch, "big", [{"url": server.url("/big.bin"), "sha256": sha(data)}])
        digests = download_dataset(entry, env, options=FAST)
        ranges = server.gets("/big.bin")
    target = env / "big" / "big.bin"
    assert target.read_bytes() == data
    assert digests == {"big.bin": sha(data)}
    assert len(ranges) == 2 and ranges[0] is None
    resumed_at = int(ranges[1].split("=")[1].rstrip("-"))
    assert 0 < resumed_at <= 120_000
    assert not (env / "big" / "big.bin.part").exists()
    assert [s.state for s in dataset_status(entry, env)] == ["verified"]


def test_server_ignoring_range_restarts_cleanly(tmp_path, monkeypatch, env):
    data = payload(50_000, seed=1)
    with FileServer({"/f.bin": data}) as server:
        server.cut_once["/f.bin"] = 10_000
        server.ignore_range = True
        entry = entry_for(tmp_path, monkeypatch, "f", [{"url": server.url("/f.bin"), "sha256": sha(data)}])
        download_dataset(entry, env, options=FAST)
    assert (env / "f" / "f.bin").read_bytes() == data


def test_checksum_mismatch_names_file_and_digests_and_keeps_nothing(tmp_path, monkeypatch, env):
    data = payload(20_000, seed=2)
    wrong = "0" * 64
    with FileServer({"/x.zip": data}) as server:
        entry = entry_for(tmp_path, monkeypatch, "x", [{"url": server.url("/x.zip"), "sha256": wrong}])
        with pytest.raises(ReproError) as err:
            download_dataset(entry, env, options=FAST)
    message = str(err.value)
    assert "x.zip" in message and wrong in message and sha(data) in message
    assert not (env / "x" / "x.zip").exists() and not (env / "x" / "x.zip.part").exists()
    assert [s.state for s in dataset_status(entry, env)] == ["missing"]


def test_second_run_fetches_and_hashes_nothing_unless_verify(tmp_path, monkeypatch, env):
    data = payload(40_000, seed=3)
    with FileServer({"/a.bin": data}) as server:
        entry = entry_for(tmp_path, monkeypatch, "a", [{"url": server.url("/a.bin"), "sha256": sha(data)}])
        download_dataset(entry, env, options=FAST)
        assert len(server.gets("/a.bin")) == 1

        def no_hashing(*args, **kwargs):
            raise AssertionError("a verified file was hashed again")

        monkeypatch.setattr(dl, "sha256_file", no_hashing)
        download_dataset(entry, env, options=FAST)
        assert len(server.gets("/a.bin")) == 1

        hashed = []
        monkeypatch.setattr(dl, "sha256_file", lambda path, *a, **k: hashed.append(path) or sha(path.read_bytes()))
        download_dataset(entry, env, verify=True, options=FAST)
        assert hashed == [env / "a" / "a.bin"] and len(server.gets("/a.bin")) == 1


def test_changed_file_on_disk_is_rehashed_and_replaced(tmp_path, monkeypatch, env):
    data = payload(30_000, seed=4)
    with FileServer({"/c.bin": data}) as server:
        entry = entry_for(tmp_path, monkeypatch, "c", [{"url": server.url("/c.bin"), "sha256": sha(data)}])
        download_dataset(entry, env, options=FAST)
        target = env / "c" / "c.bin"
        target.write_bytes(b"tampered" + data[8:])
        download_dataset(entry, env, options=FAST)
        assert len(server.gets("/c.bin")) == 2
    assert target.read_bytes() == data
    assert (env / "c" / "c.bin.corrupt").exists()


def test_mirrors_are_tried_in_order(tmp_path, monkeypatch, env):
    data = payload(10_000, seed=5)
    with FileServer({"/good/m.bin": data}) as server:
        entry = entry_for(
            tmp_path,
            monkeypatch,
            "m",
            [{"name": "m.bin", "sha256": sha(data), "url": [server.url("/gone/m.bin"), server.url("/good/m.bin")]}],
        )
        download_dataset(entry, env, options=FAST)
    assert (env / "m" / "m.bin").read_bytes() == data


def test_unknown_checksum_is_recorded_and_size_checked(tmp_path, monkeypatch, env):
    data = payload(10_000, seed=6)
    notes = []
    with FileServer({"/u.bin": data}) as server:
        entry = entry_for(tmp_path, monkeypatch, "u", [{"url": server.url("/u.bin"), "size": len(data)}])
        download_dataset(entry, env, options=FAST, log=notes.append)
        assert any(sha(data) in n for n in notes)
        bad = entry_for(tmp_path, monkeypatch, "u2", [{"url": server.url("/u.bin"), "size": len(data) + 1}])
        with pytest.raises(ReproError, match="size mismatch"):
            download_dataset(bad, env, options=FAST)


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, content in members.items():
            zf.writestr(name, content)
    return buf.getvalue()


def test_extracts_verified_archive_once(tmp_path, monkeypatch, env):
    archive = zip_bytes({"inner/q.json": b"{}", "top.txt": b"hello"})
    with FileServer({"/d.zip": archive}) as server:
        entry = entry_for(
            tmp_path, monkeypatch, "d", [{"url": server.url("/d.zip"), "sha256": sha(archive), "extract": True}]
        )
        download_dataset(entry, env, options=FAST)
        assert (env / "d" / "inner" / "q.json").read_bytes() == b"{}"
        (env / "d" / "top.txt").write_text("edited by the user")
        download_dataset(entry, env, options=FAST)
    assert (env / "d" / "top.txt").read_text() == "edited by the user"  # not unpacked a second time


def test_zip_slip_archive_is_refused(tmp_path, monkeypatch, env):
    archive = zip_bytes({"ok.txt": b"fine", "../../escaped.txt": b"evil"})
    with FileServer({"/evil.zip": archive}) as server:
        entry = entry_for(
            tmp_path, monkeypatch, "evil", [{"url": server.url("/evil.zip"), "sha256": sha(archive), "extract": True}]
        )
        with pytest.raises(ReproError, match=r"escaped\.txt.*'\.\.'"):
            download_dataset(entry, env, options=FAST)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (env / "evil" / "ok.txt").exists()  # nothing unpacked from a refused archive


def test_disk_space_refusal_before_transfer(tmp_path, monkeypatch, env):
    data = payload(50_000, seed=7)
    monkeypatch.setattr(dl, "disk_free", lambda path: 1_000)
    with FileServer({"/huge.bin": data}) as server:
        entry = entry_for(
            tmp_path,
            monkeypatch,
            "huge",
            [{"url": server.url("/huge.bin"), "sha256": sha(data), "size_hint": 30_000_000_000}],
        )
        with pytest.raises(ReproError, match="needs 30.00 GB"):
            download_dataset(entry, env, options=FAST)
        assert server.gets("/huge.bin") == []
        # no size in the catalog: Content-Length is checked before a byte is written
        entry = entry_for(tmp_path, monkeypatch, "huge2", [{"url": server.url("/huge.bin"), "sha256": sha(data)}])
        monkeypatch.setattr(dl, "DISK_RESERVE", 0)
        with pytest.raises(ReproError, match="only 1.0 MB|only 0.0 MB"):
            download_dataset(entry, env, options=FAST)
    assert not (env / "huge2" / "huge.bin.part").exists() or (env / "huge2" / "huge.bin.part").stat().st_size == 0


def test_manual_dataset_says_where_to_put_files_then_verifies(tmp_path, monkeypatch, env):
    content = b"registered content"
    entry = entry_for(
        tmp_path,
        monkeypatch,
        "reg",
        [{"name": "secret.json", "sha256": sha(content)}],
        manual="Register at https://example.org and download secret.json.",
    )
    with pytest.raises(ReproError) as err:
        download_dataset(entry, env, options=FAST)
    assert "secret.json" in str(err.value) and str(env / "reg") in str(err.value) and "Register" in str(err.value)
    (env / "reg").mkdir(parents=True, exist_ok=True)
    (env / "reg" / "secret.json").write_bytes(b"wrong content")
    with pytest.raises(ReproError, match="checksum mismatch"):
        download_dataset(entry, env, options=FAST)
    (env / "reg" / "secret.json").write_bytes(content)
    assert download_dataset(entry, env, options=FAST) == {"secret.json": sha(content)}


def test_silent_server_gives_up_after_retries_with_backoff(tmp_path, monkeypatch, env):
    data = payload(20_000, seed=8)
    with FileServer({"/flaky.bin": data}) as server:
        server.silent["/flaky.bin"] = 2.0  # headers, then nothing
        entry = entry_for(tmp_path, monkeypatch, "flaky", [{"url": server.url("/flaky.bin"), "sha256": sha(data)}])
        sleeps = []
        opts = FetchOptions(retries=2, backoff=0.5, timeout=0.2, sleep=sleeps.append)
        with pytest.raises(ReproError, match="download failed from every url"):
            download_dataset(entry, env, options=opts)
    assert sleeps == [0.5, 1.0]  # exponential backoff between attempts


def test_refused_connection_is_not_retried(tmp_path, monkeypatch, env):
    with FileServer({}) as server:
        url = server.url("/gone.bin")
    entry = entry_for(tmp_path, monkeypatch, "gone", [{"url": url, "sha256": "0" * 64}])
    sleeps = []
    with pytest.raises(ReproError, match="connection was refused") as info:
        download_dataset(entry, env, options=FetchOptions(retries=2, backoff=0.5, timeout=5.0, sleep=sleeps.append))
    assert sleeps == [] and info.value.exit_code == 1
    assert url in str(info.value) and "by hand" in str(info.value)


def test_cli_download_mismatch_is_one_line_exit_2(tmp_path, monkeypatch, env):
    from repro.cli import app

    data = payload(5_000, seed=9)
    with FileServer({"/v.bin": data}) as server:
        path = write_catalog(tmp_path, {"v": {"files": [{"url": server.url("/v.bin"), "sha256": "f" * 64}]}})
        monkeypatch.setenv("REPRO_CATALOG", str(path))
        result = CliRunner().invoke(app, ["download", "v"])
    assert result.exit_code == 2
    assert "checksum mismatch" in result.output and "Traceback" not in result.output


def test_cli_list_shows_every_dataset_and_state(tmp_path, monkeypatch, env):
    from repro.cli import app

    data = payload(5_000, seed=10)
    with FileServer({"/w.bin": data}) as server:
        path = write_catalog(tmp_path, {"w": {"files": [{"url": server.url("/w.bin"), "sha256": sha(data)}]}})
        monkeypatch.setenv("REPRO_CATALOG", str(path))
        runner = CliRunner()
        assert runner.invoke(app, ["download", "w"]).exit_code == 0
        result = runner.invoke(app, ["download", "--list", "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["w"]["verified"] == 1 and rows["vqa2"]["verified"] == 0
    assert {"vqa2", "glove-840b", "bottom-up-36", "deit-b16"} <= set(rows)
