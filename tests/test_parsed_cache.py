"""A YAML file is parsed once: what it parses to is kept by the hash of its bytes and its reader's code, as JSON, and
read back identical (order, key types, line numbers); an edited file, a corrupt or missing cache, a value JSON
cannot hold, all parse afresh."""

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
1: one
2.5: half
"""


def test_a_file_parses_once_and_reads_back_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "demo.yaml"
    path.write_text(TEXT)
    first, loc = read_yaml(path)
    kept = list(parsed_cache_dir().glob("*.json"))
    assert len(kept) == 1
    second, again = read_yaml(path)
    assert second == first and list(second) == ["name", "rows", 1, 2.5] and list(second["rows"][0]) == ["b", "a"]
    assert type(list(second)[2]) is int and again.lines == loc.lines and loc.lines[("rows", 1)] == 4
    assert again.error(("rows", 1), "bad").args[0] == f"{path}:4: bad"
    path.write_text(TEXT.replace("demo", "edited"))  # another content: parsed afresh, kept beside
    assert read_yaml(path)[0]["name"] == "edited" and len(list(parsed_cache_dir().glob("*.json"))) == 2


def test_a_corrupt_cache_or_an_unkeepable_value_parses_afresh(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "demo.yaml"
    path.write_text(TEXT)
    read_yaml(path)
    (kept,) = parsed_cache_dir().glob("*.json")
    kept.write_text('{"data": ')  # cut short
    assert read_yaml(path)[0]["name"] == "demo" and "demo" in json.loads(kept.read_text())["data"]["\x00pairs"][0]
    dated = tmp_path / "dated.yaml"
    dated.write_text("day: 2026-11-28\n")  # a date: JSON would not give it back as one
    assert str(read_yaml(dated)[0]["day"]) == "2026-11-28" and len(list(parsed_cache_dir().glob("*.json"))) == 1


def test_errors_are_never_kept_and_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE", "off")
    assert parsed_cache_dir() is None
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1, 2\n")
    for _ in range(2):
        with pytest.raises(ReproError, match="invalid YAML"):
            read_yaml(path)
    path.write_text(TEXT)
    assert read_yaml(path)[0]["name"] == "demo"
