"""The dataset catalog (built-in YAML + REPRO_CATALOG overrides) and safe extraction of archives."""

from __future__ import annotations

import io
import tarfile

import pytest
import yaml

from repro.data.catalog import get_dataset, load_catalog
from repro.data.extract import safe_extract
from repro.errors import ReproError

REQUIRED = {
    "vqa1",
    "vqa2",
    "coco-qa",
    "vg-qa",
    "bottom-up-36",
    "openvqa-features",
    "grid-features",
    "glove-840b",
    "wordnet",
    "textvqa",
    "textvqa-mmf",
    "st-vqa",
    "tgif-qa",
    "tgif-qa-features",
    "gqa",
    "gqa-features",
    "albef-data",
    "flickr30k",
    "snli-ve",
    "nlvr2",
    "refcoco-plus",
    "albef-checkpoints",
    "bert-base-uncased",
    "deit-b16",
}


def test_builtin_catalog_covers_every_dataset_the_papers_use(monkeypatch):
    monkeypatch.delenv("REPRO_CATALOG", raising=False)
    catalog = load_catalog()
    assert REQUIRED <= set(catalog)
    vqa2 = catalog["vqa2"]
    assert vqa2.files[0].sha256 == "05a64b6e2582d06d7585f5429674a9a33851878be1bff9f8668cdcf792df611e"
    assert len(vqa2.files[0].urls) == 2 and vqa2.files[0].extract
    assert catalog["vg-qa"].manual and all(f.manual for f in catalog["vg-qa"].files)
    assert catalog["deit-b16"].files[0].digest_matches("b5f2ef4d" + "0" * 56)
    assert catalog["coco-images"].files[0].size == 13510573713


def test_override_replaces_and_adds(tmp_path, monkeypatch):
    path = tmp_path / "mine.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "datasets": {
                    "vqa2": {"files": [{"url": "http://127.0.0.1:1/v.zip", "sha256": "a" * 64, "extract": True}]},
                    "my-set": {"files": [{"url": "https://example.org/x/data.tar.gz"}]},
                }
            }
        )
    )
    monkeypatch.setenv("REPRO_CATALOG", str(path))
    catalog = load_catalog()
    assert [f.name for f in catalog["vqa2"].files] == ["v.zip"] and catalog["vqa2"].licence  # other keys kept
    assert catalog["my-set"].files[0].name == "data.tar.gz"
    with pytest.raises(ReproError, match="unknown dataset 'vqa3'; did you mean vqa2"):
        get_dataset("vqa3", catalog)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"files": [{"url": "http://x/a", "sha256": "xyz"}]}, r"datasets\.bad\.files\[0\]\.sha256"),
        ({"files": [{"url": "ftp://x/a"}]}, r"files\[0\]\.url: 'ftp://x/a' is not an http"),
        ({"files": []}, r"datasets\.bad\.files: expected a non-empty list"),
        ({"files": [{"url": "http://x/a", "extract": "yes"}]}, r"extract: expected true or false"),
        ({"files": [{"url": "http://x/a", "colour": 1}]}, r"unknown key\(s\) colour"),
        ({"files": [{"name": "../up", "url": "http://x/a"}]}, r"expected a plain file name"),
    ],
)
def test_bad_override_names_the_key(tmp_path, monkeypatch, entry, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"datasets": {"bad": entry}}))
    monkeypatch.setenv("REPRO_CATALOG", str(path))
    with pytest.raises(ReproError, match=message):
        load_catalog()


def test_unparsable_override_names_file_and_line(tmp_path, monkeypatch):
    path = tmp_path / "broken.yaml"
    path.write_text("datasets:\n  a: [unclosed\n")
    monkeypatch.setenv("REPRO_CATALOG", str(path))
    with pytest.raises(ReproError, match=r"broken\.yaml:\d+: not valid YAML"):
        load_catalog()


def make_tar(path, members):
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)


def tar_file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def tar_link(name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def test_tar_extraction_and_refusals(tmp_path):
    dest = tmp_path / "ds"
    make_tar(tmp_path / "ok.tar.gz", [tar_file("feats/a.npz"), tar_link("feats/b.npz", "a.npz")])
    assert safe_extract(tmp_path / "ok.tar.gz", dest) == ["feats"]
    assert (dest / "feats" / "a.npz").read_bytes() == b"x"
    for name, members, why in [
        ("abs.tar.gz", [tar_file("/etc/evil")], "absolute path"),
        ("dots.tar.gz", [tar_file("a/../../evil")], "'..'"),
        ("link.tar.gz", [tar_link("feats/l", "../../../etc/passwd")], "points outside"),
        ("hard.tar.gz", [tar_link("feats/h", "/etc/passwd", tarfile.LNKTYPE)], "points outside"),
    ]:
        make_tar(tmp_path / name, members)
        with pytest.raises(ReproError, match=why):
            safe_extract(tmp_path / name, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["feats"]  # no staging folders left behind


def test_toolkit_names_in_archives_are_refused(tmp_path):
    dest = tmp_path / "ds"
    make_tar(tmp_path / "own.tar.gz", [tar_file("feats/a.npz"), tar_file(".repro-verified.json", b"{}")])
    with pytest.raises(ReproError, match=r"\.repro-verified\.json.*toolkit's own"):
        safe_extract(tmp_path / "own.tar.gz", dest)
    assert not dest.exists() or not any(dest.iterdir())


def test_links_from_two_archives_cannot_be_combined_to_write_elsewhere(tmp_path):
    from repro.data.extract import unpack

    dest = tmp_path / "ds"
    make_tar(tmp_path / "one.tar.gz", [tar_file("sub/keep.txt", b"keep"), tar_link("d", "sub")])
    unpack(tmp_path / "one.tar.gz", dest)
    assert (dest / "d").is_symlink()
    make_tar(tmp_path / "two.tar.gz", [tar_file("d/keep.txt", b"overwritten"), tar_file("d/new.txt")])
    with pytest.raises(ReproError, match=r"not unpacked.*\bd \(a folder in the archive"):
        unpack(tmp_path / "two.tar.gz", dest)
    assert (dest / "sub" / "keep.txt").read_bytes() == b"keep" and not (dest / "sub" / "new.txt").exists()


def test_unpack_replaces_only_its_own_unchanged_files(tmp_path):
    from repro.data.extract import unpack

    dest = tmp_path / "ds"
    make_tar(tmp_path / "v1.tar.gz", [tar_file("a.txt", b"v1"), tar_file("b.txt", b"v1")])
    placed = unpack(tmp_path / "v1.tar.gz", dest)
    assert set(placed) == {"a.txt", "b.txt"}
    make_tar(tmp_path / "v2.tar.gz", [tar_file("a.txt", b"v2"), tar_file("b.txt", b"v2")])
    with pytest.raises(ReproError, match=r"2 file\(s\).*a\.txt.*b\.txt"):  # not told they are the toolkit's
        unpack(tmp_path / "v2.tar.gz", dest)
    assert (dest / "a.txt").read_bytes() == b"v1"
    assert set(unpack(tmp_path / "v2.tar.gz", dest, replaceable={"a.txt", "b.txt"})) == {"a.txt", "b.txt"}
    assert (dest / "a.txt").read_bytes() == b"v2" and (dest / "b.txt").read_bytes() == b"v2"
