"""The dataset catalog: `repro/catalog/datasets.yaml`, plus the user's file named by `REPRO_CATALOG`.

A user file has the same schema (at least `datasets: {NAME: {files: [{url, sha256, extract}]}}`).
An entry in it replaces the built-in entry of the same name key by key (a `files` list given there
replaces the whole list); a new name adds a dataset.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import yaml

from repro.errors import ReproError
from repro.paths import PACKAGE_DIR

BUILTIN_CATALOG = PACKAGE_DIR / "catalog" / "datasets.yaml"
_HEX = re.compile(r"^[0-9a-f]{8,64}$")
_DATASET_KEYS = {"title", "papers", "licence", "manual", "files", "note"}
_FILE_KEYS = {"name", "url", "sha256", "size", "size_hint", "extract", "note"}


@dataclass(frozen=True)
class FileEntry:
    name: str
    urls: tuple[str, ...] = ()
    sha256: str | None = None  # full digest, or a prefix of >= 8 hex digits
    size: int | None = None  # exact, checked when no sha256 is known
    size_hint: int | None = None  # approximate, for listings and the disk-space check
    extract: bool = False
    note: str = ""

    @property
    def manual(self) -> bool:
        """No url: the user puts the file in place by hand; downloads only verify it."""
        return not self.urls

    @property
    def expected_bytes(self) -> int | None:
        return self.size if self.size is not None else self.size_hint

    def digest_matches(self, actual: str) -> bool:
        return self.sha256 is None or actual.lower().startswith(self.sha256)


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    title: str = ""
    papers: tuple[str, ...] = ()
    licence: str = ""
    manual: str | None = None  # how to obtain files that have no url
    note: str = ""
    files: tuple[FileEntry, ...] = field(default_factory=tuple)
    source: str = ""  # the catalog file the entry came from

    @property
    def expected_bytes(self) -> int | None:
        sizes = [f.expected_bytes for f in self.files]
        return sum(sizes) if sizes and all(s is not None for s in sizes) else None


def load_catalog(extra: Path | None = None) -> dict[str, DatasetEntry]:
    """The built-in catalog overlaid with `extra` (default: the file named by `REPRO_CATALOG`)."""
    raw = _read(BUILTIN_CATALOG)
    sources = {name: str(BUILTIN_CATALOG) for name in raw}
    if extra is None and os.environ.get("REPRO_CATALOG"):
        extra = Path(os.environ["REPRO_CATALOG"])
    if extra is not None:
        if not extra.is_file():
            raise ReproError(f"catalog {extra}: no such file (from REPRO_CATALOG)")
        for name, entry in _read(extra).items():
            merged = dict(raw.get(name, {}))
            merged.update(entry)
            raw[name] = merged
            sources[name] = str(extra)
    return {name: _dataset(name, entry, sources[name]) for name, entry in raw.items()}


def get_dataset(name: str, catalog: dict[str, DatasetEntry] | None = None) -> DatasetEntry:
    catalog = catalog if catalog is not None else load_catalog()
    if name not in catalog:
        import difflib

        close = difflib.get_close_matches(name, list(catalog), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(catalog))}"
        raise ReproError(f"unknown dataset {name!r}{hint}")
    return catalog[name]


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ReproError(f"catalog {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except OSError as exc:
        raise ReproError(f"catalog {path}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict) or not isinstance(data.get("datasets"), dict):
        raise ReproError(f"catalog {path}: expected a mapping with a 'datasets' mapping at the top")
    for name, entry in data["datasets"].items():
        if not isinstance(entry, dict):
            raise ReproError(f"catalog {path}: datasets.{name}: expected a mapping")
    return {str(k): v for k, v in data["datasets"].items()}


def _dataset(name: str, raw: dict[str, Any], source: str) -> DatasetEntry:
    where = f"catalog {source}: datasets.{name}"
    unknown = set(raw) - _DATASET_KEYS
    if unknown:
        raise ReproError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    files = raw.get("files")
    if not isinstance(files, list) or not files:
        raise ReproError(f"{where}.files: expected a non-empty list")
    entries = tuple(_file(f"{where}.files[{i}]", item) for i, item in enumerate(files))
    names = [f.name for f in entries]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ReproError(f"{where}.files: file name(s) listed twice: {', '.join(sorted(dupes))}")
    papers = raw.get("papers") or []
    if not isinstance(papers, list):
        raise ReproError(f"{where}.papers: expected a list")
    return DatasetEntry(name=name, title=str(raw.get("title") or ""), papers=tuple(map(str, papers)),
                        licence=str(raw.get("licence") or ""), manual=raw.get("manual") or None,
                        note=str(raw.get("note") or ""), files=entries, source=source)


def _file(where: str, raw: Any) -> FileEntry:
    if not isinstance(raw, dict):
        raise ReproError(f"{where}: expected a mapping with url/sha256/extract")
    unknown = set(raw) - _FILE_KEYS
    if unknown:
        raise ReproError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    urls = raw.get("url") or []
    urls = [urls] if isinstance(urls, str) else urls
    if not isinstance(urls, list) or not all(isinstance(u, str) and u for u in urls):
        raise ReproError(f"{where}.url: expected a url or a list of urls")
    for url in urls:
        if urlparse(url).scheme not in ("http", "https"):
            raise ReproError(f"{where}.url: {url!r} is not an http(s) url")
    name = raw.get("name") or (unquote(Path(urlparse(urls[0]).path).name) if urls else "")
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ReproError(f"{where}.name: expected a plain file name, got {name!r}")
    sha = raw.get("sha256")
    if sha is not None:
        sha = str(sha).lower()
        if not _HEX.match(sha):
            raise ReproError(f"{where}.sha256: expected 8 to 64 hex digits, got {sha!r}")
    sizes = {}
    for key in ("size", "size_hint"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ReproError(f"{where}.{key}: expected a byte count, got {value!r}")
        sizes[key] = value
    extract = raw.get("extract", False)
    if not isinstance(extract, bool):
        raise ReproError(f"{where}.extract: expected true or false, got {extract!r}")
    return FileEntry(name=name, urls=tuple(urls), sha256=sha, size=sizes["size"],
                     size_hint=sizes["size_hint"], extract=extract, note=str(raw.get("note") or ""))
