"""The dataset catalog (built-in YAML + REPRO_CATALOG overrides) and safe extraction of archives."""
from __future__ import annotations

import io
import tarfile

import pytest
import yaml

from repro.data.catalog import get_dataset, load_catalog
from repro.data.extract import safe_extract
from repro.errors import ReproError

REQUIRED = {"vqa1", "vqa2", "coco-qa", "vg-qa", "bottom-up-36", "openvqa-features", "grid-features", "glove-840b",
            "wordnet", "textvqa", "textvqa-mmf", "st-vqa", "tgif-qa", "tgif-qa-features", "gqa", "gqa-features",
            "albef-data", "flickr30k", "snli-ve", "nlvr2", "refcoco-plus", "albef-checkpoints",
            "bert-base-uncased", "deit-b16"}


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
    path.write_text(yaml.safe_dump({"datasets": {
        "vqa2": {"files": [{"url": "http://127.0.0.1:1/v.zip", "sha256": "a" * 64, "extract": True}]},
        "my-set": {"files": [{"url": "https://example.org/x/data.tar.gz"}]},
    }}))
    monkeypatch.setenv("REPRO_CATALOG", str(path))
    catalog = load_catalog()
    assert [f.name for f in catalog["vqa2"].files] == ["v.zip"] and catalog["vqa2"].licence  # other keys kept
    assert catalog["my-set"].files[0].name == "data.tar.gz"
    with pytest.raises(ReproError, match="unknown dataset 'vqa3'; did you mean vqa2"):
        get_dataset("vqa3", catalog)


@pytest.mark.parametrize("entry, message", [
    ({"files": [{"url": "http://x/a", "sha256": "xyz"}]}, r"datasets\.bad\.files\[0\]\.sha256"),
    ({"files": [{"url": "ftp://x/a"}]}, r"files\[0\]\.url: 'ftp://x/a' is not an http"),
    ({"files": []}, r"datasets\.bad\.files: expected a non-empty list"),
    ({"files": [{"url": "http://x/a", "extract": "yes"}]}, r"extract: expected true or false"),
    ({"files": [{"url": "http://x/a", "colour": 1}]}, r"unknown key\(s\) colour"),
    ({"files": [{"name": "../up", "url": "http://x/a"}]}, r"expected a plain file name"),
])
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
