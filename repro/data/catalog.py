"""The dataset catalog: `repro/catalog/datasets.yaml`, plus the user's file named by `REPRO_CATALOG`.

A user file has the same schema (at least `datasets: {NAME: {files: [{url, sha256, extract}]}}`).
An entry in it replaces the built-in entry of the same name key by key (a `files` list given there
replaces the whole list); a new name adds a dataset.

Names become paths (`<data_dir>/<dataset>/<file>`), so each must be a plain name: one component, no
separator, not `.`/`..`, not hidden, no control characters, at most 200 bytes, and a dataset may not
take the name of a folder the toolkit keeps in the data folder (`runs`, `prepared`, `synthetic`).
The YAML is read with a safe loader that also refuses tags, more than a few aliases, recursive
aliases and a key given twice; every error names the file and, where known, the line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from repro.errors import ReproError, echoed
from repro.names import inside, plain_name_problem
from repro.paths import PACKAGE_DIR
from repro.utils import parsed_once

BUILTIN_CATALOG = PACKAGE_DIR / "catalog" / "datasets.yaml"
_HEX = re.compile(r"^[0-9a-f]{8,64}$")
_DATASET_KEYS = {"title", "papers", "licence", "manual", "files", "note"}
_FILE_KEYS = {"name", "url", "sha256", "sha256_from", "size", "size_hint", "extract", "note"}
# where a digest comes from: published by someone who pins it, or computed from the official file
SHA256_ORIGINS = ("published", "computed")
# folders of the data root the toolkit itself writes (checkpoints, prepared data, synthetic sets)
RESERVED_NAMES = frozenset({"runs", "prepared", "synthetic"})
# what the downloader adds next to a file; a catalog file name must not collide with it
TEMP_SUFFIXES = (".part", ".corrupt")


def dataset_name_problem(value: Any) -> str | None:
    """Why `value` cannot name a dataset (its folder is `<data_dir>/<value>`), or None."""
    problem = plain_name_problem(value)
    if problem is None and value in RESERVED_NAMES:
        problem = f"'{value}' is a folder the toolkit itself keeps in the data folder"
    return problem


def folder_inside(root: Path, name: str, what: str = "dataset") -> Path:
    """`root / name`, or ReproError when `name` is not a plain name (code that builds entries by hand)."""
    problem = dataset_name_problem(name) if what == "dataset" else plain_name_problem(name)
    if problem:
        raise ReproError(f"{what} name {echoed(name)} refused: {problem}")
    return inside(root, name, what=what)


class _Loc:
    """Where a key of the catalog is: file, line (when known) and key path, for error messages."""

    def __init__(self, source: str, lines: dict[tuple, int], at: tuple) -> None:
        self.source, self.lines, self.at = source, lines, at

    def __call__(self, *more: Any) -> "_Loc":
        return _Loc(self.source, self.lines, self.at + more)

    def __str__(self) -> str:
        line = None
        for n in range(len(self.at), 0, -1):  # the nearest key that has a line
            line = self.lines.get(tuple(str(k) if not isinstance(k, int) else k for k in self.at[:n]))
            if line:
                break
        path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in self.at).lstrip(".")
        return f"catalog {self.source}{f':{line}' if line else ''}: {path}"


@dataclass(frozen=True)
class FileEntry:
    name: str
    urls: tuple[str, ...] = ()
    sha256: str | None = None  # full digest, or a prefix of >= 8 hex digits
    sha256_from: str = ""  # "published: <who pins it>" or "computed: <which official file>"
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
    """The built-in catalog overlaid with `extra` (default: the file named by `REPRO_CATALOG`).

    Every value that becomes a path (dataset names, file names) is checked to be a plain name; a bad
    one is a ReproError naming the catalog file, the line and the value.
    """
    raw, lines = _read(BUILTIN_CATALOG)
    # per dataset and key: (file, lines) it came from, so an error points at the right file
    origins = {name: {key: (str(BUILTIN_CATALOG), lines) for key in entry} for name, entry in raw.items()}
    sources = {name: (str(BUILTIN_CATALOG), lines) for name in raw}
    if extra is None and os.environ.get("REPRO_CATALOG"):
        extra = Path(os.environ["REPRO_CATALOG"])
    if extra is not None:
        if not extra.is_file():
            raise ReproError(f"catalog {extra}: no such file (from REPRO_CATALOG)")
        user, user_lines = _read(extra)
        for name, entry in user.items():
            merged = dict(raw.get(name, {}))
            merged.update(entry)
            raw[name] = merged
            origins.setdefault(name, {}).update({key: (str(extra), user_lines) for key in entry})
            sources[name] = (str(extra), user_lines)
    return {name: _dataset(name, entry, sources[name], origins[name]) for name, entry in raw.items()}


def get_dataset(name: str, catalog: dict[str, DatasetEntry] | None = None) -> DatasetEntry:
    catalog = catalog if catalog is not None else load_catalog()
    if name not in catalog:
        import difflib

        close = difflib.get_close_matches(name, list(catalog), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(catalog))}"
        raise ReproError(f"unknown dataset {name!r}{hint}")
    return catalog[name]


def _load_yaml(path: Path) -> tuple[Any, dict[tuple, int]]:
    """The document in `path` and the line of every mapping key and list item (by key path)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ReproError(f"catalog {path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ReproError(
            f"catalog {path}:{line}: not valid UTF-8 (byte {raw[exc.start]:#04x} "
            f"at offset {exc.start}); save the file as UTF-8"
        ) from None

    def parse() -> tuple[Any, dict[tuple, int]]:
        from repro.data import catalog_yaml

        return catalog_yaml.parse(path, text)

    return parsed_once(raw, parse, Path(__file__).with_name("catalog_yaml.py"))


def _read(path: Path) -> tuple[dict[str, dict[str, Any]], dict[tuple, int]]:
    """The `datasets` mapping of `path` (names checked) and the lines of its keys."""
    data, lines = _load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("datasets"), dict):
        raise ReproError(f"catalog {path}: expected a mapping with a 'datasets' mapping at the top")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data["datasets"].items():
        line = lines.get(("datasets", str(name)))
        where = f"catalog {path}:{line}" if line else f"catalog {path}"
        problem = dataset_name_problem(name)
        if problem:
            raise ReproError(f"{where}: dataset name {name!r} refused: {problem}")
        if not isinstance(entry, dict):
            raise ReproError(f"{where}: datasets.{name}: expected a mapping")
        out[name] = entry
    return out, lines


def _dataset(name: str, raw: dict[str, Any], source: tuple[str, dict], origins: dict[str, tuple]) -> DatasetEntry:
    where = _Loc(source[0], source[1], ("datasets", name))

    def at(key: str) -> _Loc:
        file, lines = origins.get(key, source)
        return _Loc(file, lines, ("datasets", name, key))

    unknown = set(raw) - _DATASET_KEYS
    if unknown:
        raise ReproError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    files = raw.get("files")
    if not isinstance(files, list) or not files:
        raise ReproError(f"{at('files')}: expected a non-empty list")
    entries = tuple(_file(at("files")(i), item) for i, item in enumerate(files))
    names = [f.name for f in entries]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ReproError(f"{at('files')}: file name(s) listed twice: {', '.join(sorted(dupes))}")
    clashes = sorted(n + s for n in names for s in TEMP_SUFFIXES if n + s in names)
    if clashes:
        raise ReproError(
            f"{at('files')}: file name(s) {', '.join(clashes)} clash with the downloader's "
            "temporary names (.part, .corrupt) of another file"
        )
    papers = raw.get("papers") or []
    if not isinstance(papers, list):
        raise ReproError(f"{at('papers')}: expected a list")
    manual = raw.get("manual") or None
    if manual is not None and not isinstance(manual, str):
        raise ReproError(f"{at('manual')}: expected text, got {type(manual).__name__}")
    return DatasetEntry(
        name=name,
        title=_text(raw.get("title"), at("title")),
        papers=tuple(_text(p, at("papers")(i)) for i, p in enumerate(papers)),
        licence=_text(raw.get("licence"), at("licence")),
        manual=manual,
        note=_text(raw.get("note"), at("note")),
        files=entries,
        source=source[0],
    )


def _text(value: Any, where: _Loc) -> str:
    """A free-text value as one string (YAML may give a number or a date, but not a list or mapping)."""
    if isinstance(value, (dict, list)):
        raise ReproError(f"{where}: expected text, got a {'mapping' if isinstance(value, dict) else 'list'}")
    return "" if value is None else str(value)


def _file(where: _Loc, raw: Any) -> FileEntry:
    if not isinstance(raw, dict):
        raise ReproError(f"{where}: expected a mapping with url/sha256/extract")
    unknown = set(raw) - _FILE_KEYS
    if unknown:
        raise ReproError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    urls = raw.get("url") or []
    urls = [urls] if isinstance(urls, str) else urls
    if not isinstance(urls, list) or not all(isinstance(u, str) and u for u in urls):
        raise ReproError(f"{where('url')}: expected a url or a list of urls")
    for url in urls:
        problem = _url_problem(url)
        if problem:
            raise ReproError(f"{where('url')}: {url!r} is not {problem}")
    name = raw.get("name") or (unquote(Path(urlparse(urls[0]).path).name) if urls else "")
    problem = plain_name_problem(name)
    if problem:
        raise ReproError(f"{where('name')}: expected a plain file name, got {name!r} ({problem})")
    sha = raw.get("sha256")
    if sha is not None:
        sha = str(sha).lower()
        if not _HEX.match(sha):
            raise ReproError(f"{where('sha256')}: expected 8 to 64 hex digits, got {sha!r}")
    sha_from = _text(raw.get("sha256_from"), where("sha256_from")).strip()
    if sha_from and sha is None:
        raise ReproError(f"{where('sha256_from')}: says where a sha256 comes from, but the file has no sha256")
    if sha_from and sha_from.split(":", 1)[0] not in SHA256_ORIGINS:
        raise ReproError(
            f"{where('sha256_from')}: expected 'published: <who pins it>' or 'computed: <which official file>', "
            f"got {sha_from!r}"
        )
    sizes = {}
    for key in ("size", "size_hint"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ReproError(f"{where(key)}: expected a byte count, got {value!r}")
        sizes[key] = value
    extract = raw.get("extract", False)
    if not isinstance(extract, bool):
        raise ReproError(f"{where('extract')}: expected true or false, got {extract!r}")
    return FileEntry(
        name=name,
        urls=tuple(urls),
        sha256=sha,
        sha256_from=sha_from,
        size=sizes["size"],
        size_hint=sizes["size_hint"],
        extract=extract,
        note=_text(raw.get("note"), where("note")),
    )


def _url_problem(url: str) -> str | None:
    """Why `url` cannot be fetched, or None."""
    if any(ord(c) <= 32 or ord(c) == 127 for c in url):
        return "a url (spaces or control characters)"
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        return f"a valid url ({exc})"
    if parsed.scheme not in ("http", "https"):
        return "an http(s) url"
    if not parsed.hostname:
        return "a url with a host name"
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        return "a valid url (not valid Unicode)"
    return None
