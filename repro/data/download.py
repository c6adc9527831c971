"""Downloads a user can trust: resumable, retried, checksummed, recorded, safely extracted.

For each file of a catalog entry, into `<data_dir>/<dataset>/`:

1. A file already recorded as verified (same size and modification time as when its sha256 was
   checked, same expected digest) is not fetched or hashed again; `verify=True` rehashes it.
2. Otherwise it is fetched into `<name>.part`: an existing `.part` is resumed with an HTTP Range
   request; a dropped connection or a short body is retried with exponential backoff (attempts
   that make progress do not count against the limit); mirrors are tried in order.
3. Free disk space is checked before a transfer starts (catalog size, else Content-Length).
4. The `.part` is renamed to its final name only when its sha256 matches the catalog. On a
   mismatch it is deleted and the error names the file, the expected and the actual digest.
   A file with no known digest is accepted and its digest recorded (and printed) so later runs
   and other machines can compare.
5. Archives marked `extract` are unpacked with `repro.data.extract.safe_extract`; the record
   remembers which digest was unpacked, so a second run does not unpack again.

Files without a url (datasets behind a registration form) are never fetched: the user puts them
in the folder and the same verification applies.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import requests
from rich.progress import Progress

from repro.data.catalog import DatasetEntry, FileEntry
from repro.data.extract import archive_members_size, safe_extract
from repro.data.progress import Bar
from repro.errors import ReproError
from repro.results import now_iso, write_json_atomic

RECORD_NAME = ".repro-verified.json"
CHUNK = 1 << 20  # for hashing files on disk
NET_CHUNK = 1 << 16  # for network reads: a dropped connection loses at most one partial chunk
DISK_RESERVE = 64 << 20  # bytes left free after a transfer or extraction
_RETRYABLE = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


class TransferInterrupted(Exception):
    """The server closed the connection before the announced number of bytes arrived."""


class _ServerError(Exception):
    """A 5xx answer: worth a retry."""


def disk_free(path: Path) -> int:
    """Free bytes on the filesystem holding `path` (a function so tests can stand in for a full disk)."""
    return shutil.disk_usage(path).free


def check_disk_space(folder: Path, needed: int | None, what: str) -> None:
    if not needed:
        return
    free = disk_free(folder)
    if needed + DISK_RESERVE > free:
        raise ReproError(f"{what}: needs {_gb(needed)} but only {_gb(free)} is free in {folder}; "
                         "free some space or set REPRO_DATA_DIR to a larger disk")


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


# --- the verification record -----------------------------------------------------------------


class VerificationRecord:
    """`<dataset folder>/.repro-verified.json`: per file the sha256 found, with size and mtime then."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / RECORD_NAME
        self.files: dict[str, dict[str, Any]] = {}
        self.extracted: dict[str, str] = {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.files = dict(data.get("files", {}))
            self.extracted = dict(data.get("extracted", {}))
        except (OSError, ValueError, AttributeError):
            pass  # no record, or an unreadable one: everything is verified again

    def current(self, entry: FileEntry, path: Path) -> str | None:
        """The recorded digest if `path` is unchanged since it was verified against `entry`."""
        rec = self.files.get(entry.name)
        try:
            st = path.stat()
        except OSError:
            return None
        if not rec or rec.get("size") != st.st_size or rec.get("mtime_ns") != st.st_mtime_ns:
            return None
        digest = rec.get("sha256", "")
        return digest if entry.digest_matches(digest) else None

    def mark(self, entry: FileEntry, path: Path, digest: str) -> None:
        st = path.stat()
        self.files[entry.name] = {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                                  "expected": entry.sha256, "verified_at": now_iso()}
        self.save()

    def forget(self, name: str) -> None:
        self.files.pop(name, None)
        self.extracted.pop(name, None)
        self.save()

    def save(self) -> None:
        write_json_atomic(self.path, {"files": self.files, "extracted": self.extracted})


# --- hashing ----------------------------------------------------------------------------------


def sha256_file(path: Path, progress: Progress | None = None, label: str | None = None) -> str:
    bar = Bar(progress, f"verify {label or path.name}", path.stat().st_size)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            bar.advance(len(chunk))
    return h.hexdigest()


# --- one file ---------------------------------------------------------------------------------


@dataclass
class FetchOptions:
    retries: int = 5  # attempts without progress per url before trying the next mirror
    backoff: float = 1.0  # seconds; doubled after each attempt without progress
    timeout: float = 60.0  # seconds without a byte before the connection counts as dropped
    sleep: Callable[[float], None] = time.sleep


def fetch_file(entry: FileEntry, target: Path, session: requests.Session | None = None,
               progress: Progress | None = None, options: FetchOptions | None = None) -> str:
    """Download `entry` to `target` (atomically, via `<target>.part`); returns the verified sha256."""
    options = options or FetchOptions()
    session = session or requests.Session()
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    bar = Bar(progress, entry.name, entry.expected_bytes)
    errors: list[str] = []
    for url in entry.urls:
        failures = 0
        while True:
            before = part.stat().st_size if part.exists() else 0
            try:
                digest = _transfer(url, entry, part, session, bar, options)
                break
            except ReproError:
                raise
            except requests.HTTPError as exc:  # 4xx: this mirror will not serve the file
                errors.append(f"{url}: HTTP {exc.response.status_code if exc.response is not None else '?'}")
                digest = None
                break
            except (*_RETRYABLE, TransferInterrupted, _ServerError) as exc:
                after = part.stat().st_size if part.exists() else 0
                failures = 0 if after > before else failures + 1
                if failures > options.retries:
                    errors.append(f"{url}: {type(exc).__name__}: {exc}")
                    digest = None
                    break
                options.sleep(options.backoff * (2 ** max(failures - 1, 0)))
        if digest is None:
            continue
        if not entry.digest_matches(digest):
            part.unlink(missing_ok=True)
            raise ReproError(f"{target}: checksum mismatch: expected sha256 {entry.sha256}, got {digest}; "
                             "the download was deleted (a moved or changed file? update the catalog with REPRO_CATALOG)")
        size = part.stat().st_size
        if entry.sha256 is None and entry.size is not None and size != entry.size:
            part.unlink(missing_ok=True)
            raise ReproError(f"{target}: size mismatch: expected {entry.size} bytes, got {size}; the download was deleted")
        os.replace(part, target)
        return digest
    if not entry.urls:
        raise ReproError(f"{target}: no url to download from")
    raise ReproError(f"{target}: download failed from every url ({'; '.join(errors)}); "
                     f"run again to resume from {part.name}")


def _transfer(url: str, entry: FileEntry, part: Path, session: requests.Session, bar: Bar,
              options: FetchOptions) -> str:
    """One request: resume `part` from its current size, stream to the end, return the sha256."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    if entry.expected_bytes is not None and offset == 0:
        check_disk_space(part.parent, entry.expected_bytes, f"download of {entry.name}")
    with session.get(url, headers=headers, stream=True, timeout=(min(options.timeout, 30), options.timeout)) as resp:
        if resp.status_code == 416 and offset:  # asked past the end: the .part may already be whole
            total = _content_range_total(resp.headers.get("Content-Range", ""))
            if total == offset:
                return _hash_existing(part, bar, offset)
            part.unlink()
            raise TransferInterrupted("server refused the resume range; starting again")
        if resp.status_code >= 500:
            raise _ServerError(f"HTTP {resp.status_code}")
        resp.raise_for_status()
        if offset and resp.status_code == 206:
            start = _content_range_start(resp.headers.get("Content-Range", ""))
            if start != offset:
                part.unlink()
                raise TransferInterrupted(f"server resumed at byte {start}, not {offset}; starting again")
        elif offset:  # 200: the server ignored the Range header and sends everything
            offset = 0
        length = resp.headers.get("Content-Length")
        total = offset + int(length) if length is not None and length.isdigit() else entry.expected_bytes
        if total is not None:
            check_disk_space(part.parent, total - offset, f"download of {entry.name}")
            bar.update(total=total)
        hasher = hashlib.sha256()
        if offset:
            _hash_into(part, hasher)
        bar.update(completed=offset)
        with open(part, "ab" if offset else "wb") as fh:
            for chunk in resp.iter_content(NET_CHUNK):
                fh.write(chunk)
                hasher.update(chunk)
                bar.advance(len(chunk))
            fh.flush()
            os.fsync(fh.fileno())
    size = part.stat().st_size
    if length is not None and length.isdigit() and size < offset + int(length):
        raise TransferInterrupted(f"connection closed after {size} of {offset + int(length)} bytes")
    return hasher.hexdigest()


def _hash_into(path: Path, hasher: "hashlib._Hash") -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            hasher.update(chunk)


def _hash_existing(part: Path, bar: Bar, size: int) -> str:
    hasher = hashlib.sha256()
    _hash_into(part, hasher)
    bar.update(total=size, completed=size)
    return hasher.hexdigest()


def _content_range_start(value: str) -> int | None:
    # "bytes 100-199/200"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _content_range_total(value: str) -> int | None:
    # "bytes */200"
    try:
        return int(value.rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return None


# --- a dataset --------------------------------------------------------------------------------


@dataclass
class FileStatus:
    name: str
    state: str  # verified | present | partial | missing
    size: int | None
    sha256: str | None = None


def dataset_status(entry: DatasetEntry, root: Path) -> list[FileStatus]:
    """What is on disk for `entry`, without hashing anything."""
    folder = root / entry.name
    record = VerificationRecord(folder)
    out = []
    for f in entry.files:
        path = folder / f.name
        part = path.with_name(path.name + ".part")
        if path.is_file():
            digest = record.current(f, path)
            out.append(FileStatus(f.name, "verified" if digest else "present", path.stat().st_size, digest))
        elif part.is_file():
            out.append(FileStatus(f.name, "partial", part.stat().st_size))
        else:
            out.append(FileStatus(f.name, "missing", None))
    return out


def download_dataset(entry: DatasetEntry, root: Path, verify: bool = False, progress: Progress | None = None,
                     session: requests.Session | None = None, options: FetchOptions | None = None,
                     log: Callable[[str], None] = lambda message: None) -> dict[str, str]:
    """Fetch, verify and extract every file of `entry` into `root/<name>/`; returns {file: sha256}."""
    folder = root / entry.name
    folder.mkdir(parents=True, exist_ok=True)
    record = VerificationRecord(folder)
    missing_manual = [f for f in entry.files if f.manual and not (folder / f.name).is_file()]
    if missing_manual:
        names = ", ".join(f.name for f in missing_manual)
        how = entry.manual or "the catalog gives no url for them"
        raise ReproError(f"{entry.name}: put {names} in {folder} by hand ({how.strip()})")
    digests: dict[str, str] = {}
    session = session or requests.Session()
    for f in entry.files:
        path = folder / f.name
        digest = None if verify else record.current(f, path)
        if digest is None and path.is_file():
            digest = sha256_file(path, progress)
            if not f.digest_matches(digest):
                record.forget(f.name)
                if f.manual:
                    raise ReproError(f"{path}: checksum mismatch: expected sha256 {f.sha256}, got {digest}; "
                                     "replace the file with a good copy")
                bad = path.with_name(path.name + ".corrupt")
                os.replace(path, bad)
                log(f"{path}: checksum mismatch (expected sha256 {f.sha256}, got {digest}); "
                    f"moved to {bad.name}, downloading again")
                digest = None
            else:
                record.mark(f, path, digest)
        if digest is None:
            digest = fetch_file(f, path, session=session, progress=progress, options=options)
            record.mark(f, path, digest)
            if f.sha256 is None:
                log(f"{path}: no checksum in the catalog; recorded sha256 {digest}")
        digests[f.name] = digest
        if f.extract and record.extracted.get(f.name) != digest:
            check_disk_space(folder, archive_members_size(path), f"extraction of {f.name}")
            safe_extract(path, folder)
            record.extracted[f.name] = digest
            record.save()
    return digests
