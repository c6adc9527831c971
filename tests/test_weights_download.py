"""Released checkpoints download as datasets do (the catalog's entry and file, the same downloader), here against the
loopback server: `repro weights download` fetches, verifies (a published sha256 checked, a cut connection resumed),
unpacks an archive and finds its one checkpoint; `repro weights ls` then shows it on disk; a checkpoint shared by
share links only is one line saying where to put it, and has its sha256 recorded once there (verified only against a
published one)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest
import yaml

from repro.cli import app
from repro.weights import RELEASED, released_named, released_path, released_state
from tests._loopback import FileServer

ALBEF_FILES = sorted({r.file_name for r in RELEASED if r.dataset == "albef-checkpoints"})


def _tar(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.fixture
def served(sandbox, monkeypatch):
    """A catalog whose ALBEF checkpoints and mmf's M4C archive are served on loopback (the archive with its sha256)."""
    flickr = bytes(range(256)) * 4000  # ~1 MB: resumed after a cut
    archive = _tar({"m4c.textvqa.alone/config.yaml": b"model: m4c\n", "m4c.textvqa.alone/m4c.pth": b"weights" * 99})
    with FileServer({"/flickr30k.pth": flickr, "/m4c.tar.gz": archive}) as server:
        server.cut_once["/flickr30k.pth"] = 300_000
        catalog = {
            "albef-checkpoints": {"files": [{"name": n, "url": server.url(f"/{n}")} for n in ALBEF_FILES]},
            "m4c-textvqa-alone": {
                "files": [
                    {
                        "name": "m4c.textvqa.alone.tar.gz",
                        "url": server.url("/m4c.tar.gz"),
                        "sha256": hashlib.sha256(archive).hexdigest(),
                        "sha256_from": "published: the test",
                        "extract": True,
                    }
                ]
            },
        }
        path = sandbox / "catalog.yaml"
        path.write_text(yaml.safe_dump({"datasets": catalog}))
        monkeypatch.setenv("REPRO_CATALOG", str(path))
        monkeypatch.setenv("REPRO_DOWNLOAD_TIMEOUT_S", "5")
        yield server, flickr


def test_weights_download_fetches_resumes_unpacks_and_ls_shows_it(runner, served, sandbox):
    server, flickr = served
    flickr30k, m4c = released_named("flickr30k.pth"), released_named("m4c")
    assert released_state(flickr30k) == "missing" and not released_path(m4c).is_file()
    out = runner.invoke(app, ["weights", "download", "flickr30k.pth", "m4c"])
    assert out.exit_code == 0, out.output
    assert released_path(flickr30k) == sandbox / "data" / "albef-checkpoints" / "flickr30k.pth"
    assert released_path(flickr30k).read_bytes() == flickr
    ranges = [r for method, p, r in server.requests if p == "/flickr30k.pth" and method == "GET"]
    assert len(ranges) == 2 and ranges[1].startswith("bytes=")  # cut once, resumed where it stopped
    assert released_path(m4c) == sandbox / "data" / "m4c-textvqa-alone" / "m4c.textvqa.alone" / "m4c.pth"
    # verified against m4c's published sha256; flickr30k.pth has none published: its digest is recorded
    assert released_state(flickr30k) == "recorded" and released_state(m4c) == "verified"
    assert "m4c: sha256" in out.output and "verified" in out.output and "recorded (none is published" in out.output
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["weights", "ls", "-f", "json"]).output)}
    assert rows["flickr30k.pth"]["on_disk"] == "recorded" and rows["mscoco.pth"]["on_disk"] == "missing"
    assert rows["m4c"]["path"] == str(released_path(m4c))
    again = runner.invoke(app, ["weights", "download", "flickr30k.pth"])  # verified: nothing fetched again
    assert again.exit_code == 0 and len([r for r in server.requests if r[1] == "/flickr30k.pth"]) == len(ranges)


def test_a_published_sha256_that_does_not_match_is_refused(runner, served, sandbox):
    server, _ = served
    server.files["/m4c.tar.gz"] = _tar({"m4c.pth": b"another file"})
    out = runner.invoke(app, ["weights", "download", "m4c"])
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert "sha256" in out.output and not released_path(released_named("m4c")).is_file()


def test_share_link_checkpoints_are_put_in_place_by_hand_then_their_sha256_recorded(runner, sandbox):
    out = runner.invoke(app, ["weights", "download", "mcan-small"], env={"COLUMNS": "400"})
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "mcan-small: put epoch13.pkl in" in out.output and "OneDrive" in out.output
    path = released_path(released_named("mcan-small"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"a checkpoint")
    out = runner.invoke(app, ["weights", "download", "mcan-small"])
    assert out.exit_code == 0 and released_state(released_named("mcan-small")) == "recorded", out.output
    out = runner.invoke(app, ["weights", "download", "nothing.pth"])
    assert out.exit_code == 2 and "no released checkpoint 'nothing.pth'; one of ALBEF_4M.pth" in out.output
