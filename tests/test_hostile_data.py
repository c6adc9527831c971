"""Hostile input to the data layer: catalog names that are paths, archives that overlap, two downloads of one
file at once, servers that send too much, and the errors each of these must give (one line, no traceback)."""

from __future__ import annotations

import errno
import hashlib
import io
import struct
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from repro.data import download as dl
from repro.data.catalog import get_dataset, load_catalog
from repro.data.download import FetchOptions, dataset_status, download_dataset
from repro.errors import ReproError
from tests._loopback import FileServer

FAST = FetchOptions(retries=2, backoff=0.0, timeout=5.0, sleep=lambda s: None)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in members.items():
            zf.writestr(name, content)
    return buf.getvalue()


def write_catalog(tmp_path: Path, datasets: dict) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"datasets": datasets}), encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("REPRO_DATA_DIR", str(path))
    return path


def entry_for(tmp_path, monkeypatch, name: str, files: list[dict]):
    monkeypatch.setenv("REPRO_CATALOG", str(write_catalog(tmp_path, {name: {"title": "t", "files": files}})))
    return get_dataset(name, load_catalog())


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# --- 1. dataset names are plain names inside the data folder ------------------------------------


@pytest.mark.parametrize("kind", ["parent", "absolute", "dot"])
def test_1_dataset_name_that_is_a_path_is_refused_and_nothing_is_deleted(tmp_path, monkeypatch, root, kind):
    from repro.cli import app

    victim = tmp_path / "victim"
    (victim / "data").mkdir(parents=True)
    (victim / "data" / "precious.txt").write_text("keep me")
    (root / "runs" / "row1").mkdir(parents=True)
    (root / "runs" / "row1" / "checkpoint.pt").write_bytes(b"weeks of training")
    name = {"parent": "../victim", "absolute": str(victim), "dot": "."}[kind]
    # the archive's top-level folder is the one the old code replaced wholesale
    archive = zip_bytes({"runs/other.txt": b"x", "data/other.txt": b"x"})
    with FileServer({"/a.zip": archive}) as server:
        catalog = write_catalog(
            tmp_path, {name: {"files": [{"url": server.url("/a.zip"), "sha256": sha(archive), "extract": True}]}}
        )
        monkeypatch.setenv("REPRO_CATALOG", str(catalog))
        with pytest.raises(ReproError) as err:
            load_catalog()
        result = CliRunner().invoke(app, ["download", name])
        assert server.gets("/a.zip") == []
    message = one_line_error(err)
    assert str(catalog) + ":2:" in message and repr(name) in message  # file, line and value
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (victim / "data" / "precious.txt").read_text() == "keep me"
    assert (root / "runs" / "row1" / "checkpoint.pt").read_bytes() == b"weeks of training"
    assert not (victim / "data" / "other.txt").exists() and not (root / "runs" / "other.txt").exists()


# --- 2. extraction merges and never deletes what it did not create --------------------------------


def test_2_archives_sharing_a_folder_are_merged_and_a_users_file_is_never_replaced(tmp_path, monkeypatch, root):
    a = zip_bytes({"shared/a.txt": b"from a", "a-only.txt": b"a"})
    b = zip_bytes({"shared/b.txt": b"from b", "shared/deep/b2.txt": b"b2"})
    c = zip_bytes({"shared/mine.txt": b"from the archive", "shared/c.txt": b"c"})
    with FileServer({"/a.zip": a, "/b.zip": b, "/c.zip": c}) as server:
        files = [{"url": server.url(p), "sha256": sha(d), "extract": True} for p, d in (("/a.zip", a), ("/b.zip", b))]
        entry = entry_for(tmp_path, monkeypatch, "two", files)
        download_dataset(entry, root, options=FAST)
        folder = root / "two"
        assert (folder / "shared" / "a.txt").read_bytes() == b"from a"  # the old code lost this one
        assert (folder / "shared" / "b.txt").read_bytes() == b"from b"
        assert (folder / "shared" / "deep" / "b2.txt").read_bytes() == b"b2"
        assert [s.state for s in dataset_status(entry, root)] == ["verified", "verified"]

        # the record must not claim files that are gone; a second run puts them back without downloading
        (folder / "shared" / "a.txt").unlink()
        assert [s.state for s in dataset_status(entry, root)] == ["present", "verified"]
        download_dataset(entry, root, options=FAST)
        assert (folder / "shared" / "a.txt").read_bytes() == b"from a"
        assert [s.state for s in dataset_status(entry, root)] == ["verified", "verified"]
        assert len(server.gets("/a.zip")) == 1 and len(server.gets("/b.zip")) == 1

        # a file the toolkit did not put there is never replaced: the archive is refused as a whole
        (folder / "shared" / "mine.txt").write_bytes(b"the user's own notes")
        entry = entry_for(
            tmp_path, monkeypatch, "two", files + [{"url": server.url("/c.zip"), "sha256": sha(c), "extract": True}]
        )
        with pytest.raises(ReproError) as err:
            download_dataset(entry, root, options=FAST)
    message = one_line_error(err)
    assert "c.zip" in message and "shared/mine.txt" in message and "not unpacked" in message
    assert (folder / "shared" / "mine.txt").read_bytes() == b"the user's own notes"
    assert not (folder / "shared" / "c.txt").exists()  # nothing of the refused archive was moved in
    assert (folder / "shared" / "a.txt").exists() and (folder / "shared" / "b.txt").exists()
    assert [s.state for s in dataset_status(entry, root)] == ["verified", "verified", "present"]
    leftovers = [p for p in list(root.iterdir()) + list(folder.iterdir()) if p.name.startswith(".repro-extract")]
    assert leftovers == []


# --- 3. two downloads of one file at once ---------------------------------------------------------


def test_3_two_downloads_of_one_file_at_once_give_one_verified_file(tmp_path, monkeypatch, root):
    data = bytes(range(256)) * 1024  # 256 kB, sent in 16 pieces
    with FileServer({"/same.bin": data}) as server:
        server.slow["/same.bin"] = 0.05
        entry = entry_for(tmp_path, monkeypatch, "same", [{"url": server.url("/same.bin"), "sha256": sha(data)}])
        results: dict[str, object] = {}
        notes: dict[str, list[str]] = {"first": [], "second": []}

        def run(who: str) -> None:
            try:
                results[who] = download_dataset(entry, root, options=FAST, log=notes[who].append)
            except BaseException as exc:  # noqa: BLE001 - the test reports whatever happened
                results[who] = exc

        first = threading.Thread(target=run, args=("first",))
        first.start()
        deadline = time.monotonic() + 10
        while server.sent.get("/same.bin", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert first.is_alive(), "the first download ended before the second could start"
        second = threading.Thread(target=run, args=("second",))
        second.start()
        first.join(30)
        second.join(30)
        gets = server.gets("/same.bin")
    assert results["first"] == {"same.bin": sha(data)}
    assert results["second"] == {"same.bin": sha(data)}  # waited, then found the file verified
    assert (root / "same" / "same.bin").read_bytes() == data
    assert not (root / "same" / "same.bin.part").exists()
    assert gets == [None]  # fetched once, never resumed on top of the other's .part
    assert any("waiting" in n for n in notes["second"])


def test_3_a_held_lock_with_a_time_limit_is_a_clear_error(tmp_path, monkeypatch, root):
    from repro.data.download import file_lock

    entry = entry_for(tmp_path, monkeypatch, "held", [{"url": "http://127.0.0.1:9/held.bin", "sha256": "a" * 64}])
    folder = root / "held"
    with file_lock(folder, "held.bin", "test"):
        with pytest.raises(ReproError, match="another repro process") as err:
            download_dataset(entry, root, options=FetchOptions(lock_timeout=0.2))
    one_line_error(err)


# --- 4. the declared size is enforced while streaming ---------------------------------------------


def test_4_server_sending_more_than_the_declared_size_is_cut_off(tmp_path, monkeypatch, root):
    block = bytes(range(256)) * 256  # 64 kB, repeated without end
    big = bytes(200_000)
    with FileServer({"/endless.bin": block, "/big.bin": big}) as server:
        server.endless["/endless.bin"] = 50 << 20
        entry = entry_for(
            tmp_path, monkeypatch, "over", [{"url": server.url("/endless.bin"), "sha256": "b" * 64, "size": 100_000}]
        )
        with pytest.raises(ReproError) as err:
            download_dataset(entry, root, options=FAST)
        assert "more than the catalog's size of 100000 bytes" in one_line_error(err)
        assert not (root / "over" / "endless.bin.part").exists() and not (root / "over" / "endless.bin").exists()
        assert len(server.gets("/endless.bin")) == 1  # not retried: the mirror is at fault

        # a Content-Length above the declared size: refused before a byte is written
        entry = entry_for(tmp_path, monkeypatch, "over2", [{"url": server.url("/big.bin"), "size": 100_000}])
        with pytest.raises(ReproError) as err:
            download_dataset(entry, root, options=FAST)
        assert "announces 200000 bytes but the catalog's size is 100000" in one_line_error(err)
        assert not (root / "over2" / "big.bin.part").exists() and not (root / "over2" / "big.bin").exists()


def test_4_stream_of_unknown_length_is_stopped_before_the_disk_is_full(tmp_path, monkeypatch, root):
    block = bytes(range(256)) * 256
    part = root / "nosize" / "endless.bin.part"
    budget = dl.DISK_RESERVE + (1 << 20)  # the disk has 1 MB beyond the reserve

    def free(path: Path) -> int:
        return budget - (part.stat().st_size if part.exists() else 0)

    monkeypatch.setattr(dl, "disk_free", free)
    monkeypatch.setattr(dl, "DISK_CHECK_EVERY", 1 << 16)
    with FileServer({"/endless.bin": block}) as server:
        server.endless["/endless.bin"] = 20 << 20
        entry = entry_for(tmp_path, monkeypatch, "nosize", [{"url": server.url("/endless.bin")}])
        with pytest.raises(ReproError) as err:
            download_dataset(entry, root, options=FAST)
    assert "download stopped" in one_line_error(err) and "left free" in str(err.value)
    assert part.stat().st_size <= (1 << 20) + (1 << 16)  # stopped within one check of the reserve
    assert not (root / "nosize" / "endless.bin").exists()


# --- 5. every failure is one line, not a traceback ------------------------------------------------


def unsupported_zip() -> bytes:
    data = bytearray(zip_bytes({"a.txt": b"hello " * 1000}))
    data[8:10] = struct.pack("<H", 99)  # compression method: none that zipfile knows
    central = data.find(b"PK\x01\x02")
    data[central + 10 : central + 12] = struct.pack("<H", 99)
    return bytes(data)


def truncated_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in ("a.bin", "b.bin"):
            content = hashlib.sha256(name.encode()).digest() * 8000
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
    return buf.getvalue()[: len(buf.getvalue()) // 2]


@pytest.mark.parametrize(
    "case, expect",
    [
        ("redirect-loop", "Exceeded 30 redirects"),
        ("unparsable-host", "a..b"),
        ("disk-full", "disk is full"),
        ("bad-zip", "not a readable zip archive"),
        ("bad-tar", "not a readable tar archive"),
    ],
)
def test_5_download_failures_are_one_line_errors(tmp_path, monkeypatch, root, case, expect):
    files = {"/loop": b"", "/bad.zip": unsupported_zip(), "/bad.tar.gz": truncated_tar(), "/f.bin": b"z" * 5000}
    with FileServer(files) as server:
        server.redirects["/loop"] = "/loop"
        spec = {
            "redirect-loop": {"url": server.url("/loop"), "name": "loop.bin"},
            "unparsable-host": {"url": "http://a..b/x.bin"},
            "disk-full": {"url": server.url("/f.bin")},
            "bad-zip": {"url": server.url("/bad.zip"), "sha256": sha(files["/bad.zip"]), "extract": True},
            "bad-tar": {"url": server.url("/bad.tar.gz"), "sha256": sha(files["/bad.tar.gz"]), "extract": True},
        }[case]
        if case == "disk-full":
            real_open = open

            class Full:
                def __init__(self, fh):
                    self.fh = fh

                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    self.fh.close()

                def write(self, chunk):
                    raise OSError(errno.ENOSPC, "No space left on device", self.fh.name)

                def __getattr__(self, name):
                    return getattr(self.fh, name)

            def full_open(path, mode="r", *args, **kwargs):
                fh = real_open(path, mode, *args, **kwargs)
                return Full(fh) if str(path).endswith(".part") and "b" in mode and "r" not in mode else fh

            monkeypatch.setattr(dl, "open", full_open, raising=False)
        entry = entry_for(tmp_path, monkeypatch, "bad", [spec])
        with pytest.raises(ReproError) as err:
            download_dataset(entry, root, options=FAST)
    assert expect in one_line_error(err)


@pytest.mark.parametrize(
    "case, content, expect",
    [
        (
            "invalid-utf8",
            b"datasets:\n  a:\n    title: caf\xe9\n    files: [{url: 'http://h/a'}]\n",
            r"catalog\.yaml:3: not valid UTF-8",
        ),
        (
            "invalid-url",
            b"datasets:\n  a:\n    files: [{url: 'http://[::1/x'}]\n",
            r"catalog\.yaml:3: .*not a valid url",
        ),
        ("bad-yaml", b"datasets:\n  a: {files: [\n", r"catalog\.yaml:\d+: not valid YAML"),
        (
            "aliases",
            b"datasets:\n  a:\n    files: [{url: 'http://h/a'}]\n    note: &n [x, x, x]\n"
            b"    title: &m [*n, *n, *n, *n]\n    licence: &k [*m, *m, *m, *m]\n    papers: [*k, *k]\n",
            r"catalog\.yaml:7: refused \(more than \d+ aliases",
        ),
        (
            "recursive-alias",
            b"datasets:\n  a: &a\n    files: [{url: 'http://h/a'}]\n    note: *a\n",
            r"catalog\.yaml:4: refused \(recursive alias",
        ),
        (
            "tag",
            b"datasets:\n  a:\n    title: !!binary aGVsbG8=\n    files: [{url: 'http://h/a'}]\n",
            r"catalog\.yaml:3: refused \(YAML tags",
        ),
        ("local-tag", b"datasets:\n  a: !thing\n    files: [{url: 'http://h/a'}]\n", r"catalog\.yaml:2: refused"),
        (
            "twice",
            b"datasets:\n  a:\n    files: [{url: 'http://h/a'}]\n  a:\n    files: [{url: 'http://h/b'}]\n",
            r"catalog\.yaml:4: refused \(key 'a' given twice",
        ),
        (
            "nested-title",
            b"datasets:\n  a:\n    title: {x: 1}\n    files: [{url: 'http://h/a'}]\n",
            r"catalog\.yaml:3: datasets\.a\.title: expected text",
        ),
    ],
)
def test_5_hostile_catalog_files_are_one_line_errors(tmp_path, monkeypatch, case, content, expect):
    from repro.cli import app

    path = tmp_path / "catalog.yaml"
    path.write_bytes(content)
    monkeypatch.setenv("REPRO_CATALOG", str(path))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(ReproError, match=expect) as err:
        load_catalog()
    one_line_error(err)
    result = CliRunner().invoke(app, ["download", "--list"])
    assert result.exit_code == 2 and "Traceback" not in result.output and not isinstance(result.exception, ReproError)


# --- the catalog reader on random input -------------------------------------------------------------

NASTY = st.sampled_from(
    [
        "..",
        ".",
        "/etc",
        "a/b",
        "a\\b",
        "C:x",
        "runs",
        ".hidden",
        "x\x00y",
        "\ud800",
        " a",
        "ok",
        "a" * 300,
        "é",
        "",
        "~",
        "$HOME",
        "-rf",
        "a.part",
    ]
)
NAMES = st.one_of(NASTY, st.text(max_size=20))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10), NAMES)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)
FILES = st.fixed_dictionaries(
    {"url": st.one_of(st.builds(lambda n: f"http://127.0.0.1:1/{n}", NAMES), st.text(max_size=15), VALUES)},
    optional={"name": st.one_of(NAMES, VALUES), "sha256": VALUES, "size": VALUES, "extract": VALUES, "note": VALUES},
)
DATASETS = st.dictionaries(
    NAMES,
    st.fixed_dictionaries(
        {"files": st.lists(FILES, min_size=1, max_size=2)}, optional={"title": VALUES, "manual": VALUES}
    ),
    min_size=1,
    max_size=3,
)


@pytest.fixture
def tiny_builtin(tmp_path, monkeypatch) -> None:
    """A one-entry built-in catalog, so that each random example reads little besides its own file."""
    from repro.data import catalog

    path = tmp_path / "builtin.yaml"
    path.write_text("datasets:\n  base:\n    files: [{url: 'http://127.0.0.1:1/base.bin'}]\n", encoding="utf-8")
    monkeypatch.setattr(catalog, "BUILTIN_CATALOG", path)


def check_catalog_file(path: Path, root: Path) -> None:
    """The property: a catalog loads with every name inside its folder, or fails with one line naming the file."""
    from repro.data.catalog import dataset_name_problem
    from repro.names import plain_name_problem

    try:
        catalog = load_catalog(path)
    except ReproError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    for name, entry in catalog.items():
        assert name == entry.name and dataset_name_problem(name) is None
        folder = (root / name).resolve()
        assert folder.parent == root.resolve()
        for f in entry.files:
            assert plain_name_problem(f.name) is None
            assert (folder / f.name).resolve().parent == folder


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(datasets=DATASETS)
def test_catalog_reader_on_random_names_keeps_every_path_inside(tmp_path, tiny_builtin, datasets):
    try:
        text = yaml.safe_dump({"datasets": datasets}, allow_unicode=True)
        text.encode("utf-8")
    except (yaml.YAMLError, UnicodeEncodeError):
        assume(False)
    path = tmp_path / "random.yaml"
    path.write_text(text, encoding="utf-8")
    check_catalog_file(path, tmp_path / "data")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.text(alphabet=st.sampled_from(list("datses:&*!<>[]{}, -\n\t'\"\\/.aé\x00")), max_size=200).map(
            lambda t: ("datasets:\n " + t).encode("utf-8", "surrogatepass")
        ),
    )
)
def test_catalog_reader_on_random_bytes_fails_in_one_line(tmp_path, tiny_builtin, content):
    path = tmp_path / "random.yaml"
    path.write_bytes(content)
    check_catalog_file(path, tmp_path / "data")
