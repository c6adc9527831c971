"""Where the catalog's values come from: every sha256 says who publishes it (or that it was computed from the
official file), files with no public digest carry size hints only and a genuine copy is never refused, every
host an official page lists is a mirror tried in order, and the commands a run names fetch what it asks for."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import socket
import tarfile
from urllib.parse import urlparse

import pytest
import yaml

from repro.data.catalog import SHA256_ORIGINS, load_catalog
from repro.data.download import FetchOptions, download_dataset
from repro.errors import ReproError
from tests._loopback import FileServer

FAST = FetchOptions(retries=1, backoff=0.0, timeout=5.0, sleep=lambda s: None)
OCR_EN_URL = "https://dl.fbaipublicfiles.com/mmf/data/datasets/textvqa/ocr_en/features/features.tar.gz"


@pytest.fixture
def catalog(monkeypatch):
    monkeypatch.delenv("REPRO_CATALOG", raising=False)
    return load_catalog()


@pytest.fixture
def env(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("REPRO_DATA_DIR", str(root))
    return root


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: a connection there is refused


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# --- 1. MMF's textvqa.ocr_en features ---------------------------------------------------------------


def test_textvqa_mmf_holds_the_rosetta_en_ocr_features(catalog):
    files = {f.urls[0]: f for f in catalog["textvqa-mmf"].files if f.urls}
    ocr = files[OCR_EN_URL]
    assert ocr.sha256 == "3542dff9338540ff2add59bb2db290d9ea5f82a4f21ab07fe39351a82b699ee0"
    assert ocr.extract and ocr.sha256_from.startswith("published:")


@pytest.mark.parametrize(("ocr", "det"), [("rosetta-en", "resnet-101"), ("google", "resnext-152")])
def test_every_command_a_paper_scale_sa_m4c_run_names_is_a_catalog_entry_for_that_folder(catalog, env, ocr, det):
    from repro.families.sa_m4c.prepare import _inputs

    needs = _inputs(ocr, det)
    for folder, name, command in needs:
        match = re.fullmatch(r"repro download (\S+)", command)
        assert match, command
        assert match.group(1) in catalog and folder == env / match.group(1), (name, command)
    if ocr == "rosetta-en":  # the OCR-box LMDB comes from the entry the message names
        (command,) = {c for _, n, c in needs if n == "ocr_en_frcn_features.lmdb"}
        named = catalog[command.split()[-1]]
        assert any(OCR_EN_URL in f.urls for f in named.files)


# --- 2. size hints instead of unverified digests ----------------------------------------------------


def test_every_sha256_says_where_it_comes_from(catalog):
    undocumented = [
        f"{d.name}/{f.name}"
        for d in catalog.values()
        for f in d.files
        if f.sha256 is not None and f.sha256_from.split(":", 1)[0] not in SHA256_ORIGINS
    ]
    assert not undocumented
    documented = [f for d in catalog.values() for f in d.files if f.sha256_from]
    assert all(f.sha256 is not None and re.match(r"(published|computed): \S", f.sha256_from) for f in documented)


def test_files_without_a_public_digest_carry_a_size_hint_only(catalog):
    test2015 = next(f for f in catalog["coco-images"].files if f.name == "test2015.zip")
    assert test2015.sha256 is None and test2015.size is None and test2015.size_hint == 13270587935
    flickr = next(f for f in catalog["flickr30k"].files if f.name == "flickr30_images.tar.gz")
    assert flickr.sha256 is None and flickr.size is None and flickr.manual


def test_a_genuine_flickr30k_archive_put_in_place_is_accepted(catalog, env):
    entry = catalog["flickr30k"]
    entry = dataclasses.replace(entry, files=tuple(f for f in entry.files if f.manual))
    archive = _tar_gz({"flickr30k-images/1000092795.jpg": b"\xff\xd8 a user's own copy"})
    (env / "flickr30k").mkdir(parents=True)
    (env / "flickr30k" / "flickr30_images.tar.gz").write_bytes(archive)
    digests = download_dataset(entry, env, options=FAST)
    assert digests == {"flickr30_images.tar.gz": hashlib.sha256(archive).hexdigest()}
    assert (env / "flickr30k" / "flickr30k-images" / "1000092795.jpg").is_file()


def test_coco_test2015_of_any_size_downloads_and_its_digest_is_recorded(catalog, env):
    data = b"PK a test2015.zip smaller than the size hint"
    entry = catalog["coco-images"]
    test2015 = next(f for f in entry.files if f.name == "test2015.zip")
    notes: list[str] = []
    with FileServer({"/zips/test2015.zip": data}) as server:
        f = dataclasses.replace(test2015, urls=(server.url("/zips/test2015.zip"),), extract=False)
        digests = download_dataset(dataclasses.replace(entry, files=(f,)), env, options=FAST, log=notes.append)
    assert digests["test2015.zip"] == hashlib.sha256(data).hexdigest()
    assert any(digests["test2015.zip"] in n for n in notes)


def test_sha256_from_is_checked(tmp_path, monkeypatch):
    def load(file: dict) -> None:
        path = tmp_path / "mine.yaml"
        path.write_text(yaml.safe_dump({"datasets": {"x": {"files": [{"url": "https://example.org/x.bin", **file}]}}}))
        load_catalog(path)

    monkeypatch.delenv("REPRO_CATALOG", raising=False)
    with pytest.raises(ReproError, match=r"sha256_from.*no sha256"):
        load({"sha256_from": "published: somebody"})
    with pytest.raises(ReproError, match=r"sha256_from.*expected 'published"):
        load({"sha256": "ab" * 32, "sha256_from": "a forum post"})
    load({"sha256": "ab" * 32, "sha256_from": "computed: the official file"})


# --- 3. every mirror the official pages list --------------------------------------------------------


def test_official_mirrors_are_listed_in_order(catalog):
    for dataset in ("gqa", "gqa-features"):
        for f in catalog[dataset].files:
            hosts = [urlparse(u).hostname for u in f.urls]
            assert hosts == ["downloads.cs.stanford.edu", "nlp.stanford.edu"], f.name
            assert {urlparse(u).path.rsplit("/", 1)[1] for u in f.urls} == {f.name}
    for dataset in ("vqa1", "vqa2"):  # path-style and virtual-host-style urls of the same bucket
        for f in catalog[dataset].files:
            assert [urlparse(u).hostname for u in f.urls] == ["s3.amazonaws.com", "cvmlp.s3.amazonaws.com"], f.name
    glove = catalog["glove-840b"].files[0]
    assert [urlparse(u).hostname for u in glove.urls] == ["nlp.stanford.edu", "huggingface.co"]
    for dataset in ("bottom-up-36", "bottom-up-adaptive", "refcoco-plus"):
        assert all(len(f.urls) == 2 for f in catalog[dataset].files), dataset


def test_a_host_that_refuses_the_connection_hands_over_to_the_next_mirror(catalog, env):
    data = b"scene graphs"
    entry = catalog["gqa"]
    scene = next(f for f in entry.files if f.name == "sceneGraphs.zip")
    first, second = (urlparse(u).path for u in scene.urls)
    with FileServer({second: data}) as server:
        urls = (f"http://127.0.0.1:{_closed_port()}{first}", server.url(second))
        f = dataclasses.replace(scene, urls=urls, extract=False, size_hint=None)
        digests = download_dataset(dataclasses.replace(entry, files=(f,)), env, options=FAST)
        assert server.gets(second)
    assert digests["sceneGraphs.zip"] == hashlib.sha256(data).hexdigest()
    assert (env / "gqa" / "sceneGraphs.zip").read_bytes() == data
