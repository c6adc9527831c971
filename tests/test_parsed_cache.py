"""A YAML file is parsed once: what it parses to is kept by the hash of its bytes and its reader's code, as JSON, and
read back identical (order, values, line numbers); an edited file, a corrupt or missing cache, all parse afresh; an
error is never kept."""

from __future__ import annotations

import json

import pytest

from repro.errors import ReproError
from repro.utils import parsed_cache_dir, read_yaml

TEXT = """\
name: demo
rows:
  - {b: 2, a: 1}
  - [x, 1.5, .inf, null, true]
  - {"\\0pairs": kept, inner: {"\\0pairs": [1]}}
"1": one
"2.5": half
"""


def test_a_file_parses_once_and_reads_back_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "demo.yaml"
    path.write_text(TEXT)
    first, loc = read_yaml(path)
    kept = list(parsed_cache_dir().glob("*.json"))
    assert len(kept) == 1
    second, again = read_yaml(path)
    assert second == first and list(second) == ["name", "rows", "1", "2.5"] and list(second["rows"][0]) == ["b", "a"]
    assert second["rows"][1] == ["x", 1.5, float("inf"), None, True]
    assert second["rows"][2] == {"\x00pairs": "kept", "inner": {"\x00pairs": [1]}}  # the cache's own marker as a key
    assert again.lines == loc.lines and loc.lines[("rows", 1)] == 4
    assert again.error(("rows", 1), "bad").args[0] == f"{path}:4: bad"
    path.write_text(TEXT.replace("demo", "edited"))  # another content: parsed afresh, kept beside
    assert read_yaml(path)[0]["name"] == "edited" and len(list(parsed_cache_dir().glob("*.json"))) == 2


def test_a_corrupt_cache_parses_afresh(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "demo.yaml"
    path.write_text(TEXT)
    read_yaml(path)
    (kept,) = parsed_cache_dir().glob("*.json")
    kept.write_text('{"data": ')  # cut short
    assert read_yaml(path)[0]["name"] == "demo" and json.loads(kept.read_text())["data"]["name"] == "demo"


def test_errors_are_never_kept_and_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", "off")
    assert parsed_cache_dir() is None
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1, 2\n")
    for _ in range(2):
        with pytest.raises(ReproError, match="invalid YAML"):
            read_yaml(path)
    path.write_text("1: one\n")  # YAML 1.2 read as the toolkit reads it: a key is text
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    for _ in range(2):
        with pytest.raises(ReproError, match="is not a name; quote it"):
            read_yaml(path)
    assert list(parsed_cache_dir().glob("*.json")) == []
    monkeypatch.setenv("REPRO_CACHE", "off")
    path.write_text(TEXT)
    assert read_yaml(path)[0]["name"] == "demo"
