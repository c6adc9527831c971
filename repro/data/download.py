"""Downloads a user can trust: resumable, retried, checksummed, recorded, safely extracted.

For each file of a catalog entry, into `<data_dir>/<dataset>/`:

1. A file already recorded as verified (same size and modification time as when its sha256 was
   checked, same expected digest) is not fetched or hashed again; `verify=True` rehashes it.
2. Otherwise it is fetched into `<name>.part`: an existing `.part` is resumed with an HTTP Range
   request; a dropped connection or a short body is retried with exponential backoff (attempts
   that make progress do not count against the limit); mirrors are tried in order.
3. Free disk space is checked before a transfer starts (catalog size, else Content-Length), and
   while it runs: a server that sends more than the catalog's exact `size` or its own
   `Content-Length` is cut off (the `.part` is deleted), and a stream of unknown length is stopped
   before it fills the disk.
4. The `.part` is renamed to its final name only when its sha256 matches the catalog. On a
   mismatch it is deleted and the error names the file, the expected and the actual digest.
   A file with no known digest is accepted and its digest recorded (and printed) so later runs
   and other machines can compare.
5. Archives marked `extract` are unpacked with `repro.data.extract.unpack`, which never replaces
   what the toolkit did not put there; the record remembers which digest was unpacked and every file
   it provided, so a second run does not unpack again unless one of those files is gone.
6. Each file is handled under a lock (`<dataset>/.repro-locks/<name>.lock`): a second process
   downloading the same file waits for the first, then finds it verified.

Files without a url (datasets behind a registration form) are never fetched: the user puts them
in the folder and the same verification applies.

No wait is without end (settings, also in docs/data.md): `REPRO_DOWNLOAD_TIMEOUT_S` (default 30) bounds
connecting, waiting for the headers and any silence in the body; `REPRO_DOWNLOAD_MIN_RATE` (bytes/s,
default 1024) stops a transfer slower than that on average once it has run that long (the `.part` is
kept for a later resume and the next mirror is tried); `REPRO_DOWNLOAD_DEADLINE_S` (default 300) is the
longest one url is retried without progress. A name that does not resolve or a refused connection is
not retried: it is one line naming the url and what to do. A redirect without `Location` is an error.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from filelock import FileLock, Timeout
from rich.progress import Progress

from repro.data.catalog import DatasetEntry, FileEntry, folder_inside
from repro.data.extract import Placed, unpack
from repro.data.progress import Bar
from repro.errors import ReproError, reason
from repro.utils import now_iso, write_json_atomic

RECORD_NAME = ".repro-verified.json"
LOCK_DIR = ".repro-locks"
CHUNK = 1 << 20  # for hashing files on disk
NET_CHUNK = 1 << 16  # for network reads: a dropped connection loses at most one partial chunk
DISK_RESERVE = 64 << 20  # bytes left free after a transfer or extraction
DISK_CHECK_EVERY = 8 << 20  # bytes streamed between two free-space checks
_RETRYABLE = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


class TransferInterrupted(Exception):
    """The server closed the connection before the announced number of bytes arrived."""


class _ServerError(Exception):
    """A 5xx answer: worth a retry."""


class _MirrorRefused(Exception):
    """This mirror sent something unusable (more bytes than declared): try the next one, not again."""


class _Unreachable(Exception):
    """The host's name does not resolve or the connection is refused: not worth a retry."""


class NetworkError(ReproError):
    """No url of a file could be downloaded; exit code 1 (the input was fine)."""

    exit_code = 1


def _env_number(name: str, default: float, minimum: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (minimum <= value < float("inf")):
        raise ReproError(f"{name}={raw!r}: give a number >= {minimum:g}")
    return value


def disk_free(path: Path) -> int:
    """Free bytes on the filesystem holding `path` (a function so tests can stand in for a full disk)."""
    return shutil.disk_usage(path).free


def check_disk_space(folder: Path, needed: int | None, what: str) -> None:
    if not needed:
        return
    free = disk_free(folder)
    if needed + DISK_RESERVE > free:
        raise ReproError(
            f"{what}: needs {_gb(needed)} but only {_gb(free)} is free in {folder}; "
            "free some space or set REPRO_DATA_DIR to a larger disk"
        )


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


# --- locks -----------------------------------------------------------------------------------


@contextmanager
def file_lock(
    folder: Path, name: str, what: str, timeout: float | None = None, log: Callable[[str], None] = lambda message: None
) -> Iterator[None]:
    """Hold `<folder>/.repro-locks/<name>.lock`; another holder is waited for (at most `timeout` s)."""
    path = folder / LOCK_DIR / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log(f"{what}: another repro process is at work on it; waiting for it to finish")
        try:
            lock.acquire(timeout=-1 if timeout is None else timeout)
        except Timeout:
            raise ReproError(
                f"{what}: another repro process still holds {path} after {timeout:g} s; run again when it has finished"
            ) from None
    try:
        yield
    finally:
        lock.release()


# --- the verification record -----------------------------------------------------------------


class VerificationRecord:
    """`<dataset folder>/.repro-verified.json`: per file the sha256 found, with size and mtime then.

    For an unpacked archive: the digest unpacked (`extracted`) and every file it provided, with size and
    mtime (`unpacked`). Changes are written under a lock, re-reading the file first, so two processes
    working on two files of one dataset do not drop each other's entries.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / RECORD_NAME
        self.reload()

    def reload(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}
        self.extracted: dict[str, str] = {}
        self.unpacked: dict[str, Placed] = {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.files = dict(data.get("files", {}))
            self.extracted = dict(data.get("extracted", {}))
            self.unpacked = {k: dict(v) for k, v in data.get("unpacked", {}).items()}
        except (OSError, ValueError, AttributeError, TypeError):
            pass  # no record, or an unreadable one: everything is verified again

    @contextmanager
    def update(self) -> Iterator[None]:
        with file_lock(self.folder, RECORD_NAME, str(self.path)):
            self.reload()
            yield
            self.save()

    def current(self, entry: FileEntry, path: Path) -> str | None:
        """The recorded digest if `path` is unchanged since it was verified against `entry`."""
        rec = self.files.get(entry.name)
        try:
            st = path.stat()
        except OSError:
            return None
        if not isinstance(rec, dict) or rec.get("size") != st.st_size or rec.get("mtime_ns") != st.st_mtime_ns:
            return None
        digest = rec.get("sha256", "")
        return digest if isinstance(digest, str) and entry.digest_matches(digest) else None

    def mark(self, entry: FileEntry, path: Path, digest: str) -> None:
        with self.update():
            st = path.stat()
            self.files[entry.name] = {
                "sha256": digest,
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "expected": entry.sha256,
                "verified_at": now_iso(),
            }

    def forget(self, name: str) -> None:
        with self.update():
            self.files.pop(name, None)
            self.extracted.pop(name, None)

    def mark_unpacked(self, name: str, digest: str, placed: Placed) -> None:
        with self.update():
            self.extracted[name] = digest
            self.unpacked[name] = placed

    def _placed(self, name: str) -> Placed:
        placed = self.unpacked.get(name)
        return placed if isinstance(placed, dict) else {}

    def unpacked_whole(self, name: str, digest: str) -> bool:
        """`name` was unpacked at `digest` and every file it provided is still there."""
        if self.extracted.get(name) != digest:
            return False
        if name not in self.unpacked:
            return True  # recorded before the file lists were kept: trusted as before
        return all(os.path.lexists(self.folder / rel) for rel in self._placed(name))

    def unchanged(self, name: str) -> tuple[set[str], set[str]]:
        """Files archive `name` provided: (those unchanged since, those changed or replaced since)."""
        same, changed = set(), set()
        for rel, stat in self._placed(name).items():
            try:
                st = (self.folder / rel).lstat()
            except OSError:
                continue
            (same if [st.st_size, st.st_mtime_ns] == stat else changed).add(rel)
        return same, changed

    def save(self) -> None:
        write_json_atomic(self.path, {"files": self.files, "extracted": self.extracted, "unpacked": self.unpacked})


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
    timeout: float = 30.0  # seconds to connect, to get the headers, or without a byte before the attempt fails
    sleep: Callable[[float], None] = time.sleep
    lock_timeout: float | None = None  # seconds to wait for another process on the same file; None: no limit
    min_rate: float = 1024.0  # bytes/s on average, checked once a transfer has run `timeout` seconds; 0: none
    deadline: float = 300.0  # seconds one url is retried without progress

    @classmethod
    def from_env(cls) -> "FetchOptions":
        """The defaults, with REPRO_DOWNLOAD_TIMEOUT_S, REPRO_DOWNLOAD_MIN_RATE, REPRO_DOWNLOAD_DEADLINE_S."""
        return cls(
            timeout=_env_number("REPRO_DOWNLOAD_TIMEOUT_S", cls.timeout, 0.001),
            min_rate=_env_number("REPRO_DOWNLOAD_MIN_RATE", cls.min_rate, 0.0),
            deadline=_env_number("REPRO_DOWNLOAD_DEADLINE_S", cls.deadline, 0.0),
        )


def fetch_file(
    entry: FileEntry,
    target: Path,
    session: requests.Session | None = None,
    progress: Progress | None = None,
    options: FetchOptions | None = None,
) -> str:
    """Download `entry` to `target` (atomically, via `<target>.part`); returns the verified sha256.

    The caller holds `file_lock(target.parent, entry.name, ...)` (as `download_dataset` does), so no
    other process writes the same `.part`.
    """
    options = options or FetchOptions.from_env()
    session = session or requests.Session()
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    bar = Bar(progress, entry.name, entry.expected_bytes)
    errors: list[str] = []
    unreachable: list[str] = []
    for url in entry.urls:
        failures = 0
        since = time.monotonic()  # last progress on this url
        while True:
            before = part.stat().st_size if part.exists() else 0
            try:
                digest = _transfer(url, entry, part, session, bar, options)
                break
            except ReproError:
                raise
            except _Unreachable as exc:
                errors.append(f"{url}: {exc}")
                unreachable.append(url)
                digest = None
                break
            except requests.HTTPError as exc:  # 4xx: this mirror will not serve the file
                errors.append(f"{url}: HTTP {exc.response.status_code if exc.response is not None else '?'}")
                digest = None
                break
            except (*_RETRYABLE, TransferInterrupted, _ServerError) as exc:
                after = part.stat().st_size if part.exists() else 0
                failures = 0 if after > before else failures + 1
                if after > before:
                    since = time.monotonic()
                pause = options.backoff * (2 ** max(failures - 1, 0))
                if failures > options.retries or time.monotonic() - since + pause > options.deadline:
                    errors.append(f"{url}: {_short(exc)}")
                    digest = None
                    break
                options.sleep(pause)
            except (_MirrorRefused, requests.RequestException, ValueError) as exc:
                # a url requests cannot use, a redirect loop, more bytes than declared: not worth a retry
                errors.append(f"{url}: {reason(exc)}" if not isinstance(exc, _MirrorRefused) else f"{url}: {exc}")
                digest = None
                break
        if digest is None:
            continue
        if not entry.digest_matches(digest):
            part.unlink(missing_ok=True)
            raise ReproError(
                f"{target}: checksum mismatch: expected sha256 {entry.sha256}, got {digest}; "
                "the download was deleted (a moved or changed file? "
                "update the catalog with REPRO_CATALOG)"
            )
        size = part.stat().st_size
        if entry.size is not None and size != entry.size:
            part.unlink(missing_ok=True)
            raise ReproError(
                f"{target}: size mismatch: expected {entry.size} bytes, got {size}; the download was deleted"
            )
        os.replace(part, target)
        return digest
    if not entry.urls:
        raise ReproError(f"{target}: no url to download from")
    resume = f"; run again to resume from {part.name}" if part.exists() else ""
    if unreachable and len(unreachable) == len(entry.urls):
        raise NetworkError(
            f"{target}: download failed: {'; '.join(errors)}; check the network, or name a reachable mirror "
            f"in a catalog of your own (--catalog / REPRO_CATALOG), or place the file by hand at {target}"
        )
    raise NetworkError(f"{target}: download failed from every url ({'; '.join(errors)}){resume}")


def _short(exc: BaseException) -> str:
    """An exception's text in one short line (urllib3's nest the whole pool and connection repr)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _cannot_connect(exc: requests.ConnectionError) -> str | None:
    """Why no connection could be made (name not resolved, refused), or None for a failure after connecting."""
    import urllib3.exceptions as u3

    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        cause = todo.pop()
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, u3.NameResolutionError):
            return "the host's name does not resolve (offline?)"
        if isinstance(cause, (u3.NewConnectionError, ConnectionRefusedError)):
            return "the connection was refused or could not be made (offline?)"
        linked = [getattr(cause, "reason", None), cause.__cause__, cause.__context__, *cause.args]
        todo += [c for c in linked if isinstance(c, BaseException)]
    return None


def _transfer(
    url: str, entry: FileEntry, part: Path, session: requests.Session, bar: Bar, options: FetchOptions
) -> str:
    """One request: resume `part` from its current size, stream to the end, return the sha256.

    The body may not grow `part` past the catalog's exact `size` nor past the server's own
    `Content-Length`: the transfer is cut there and `part` deleted (`_MirrorRefused`). With neither
    known, it is stopped before the disk is full (`DISK_RESERVE` left).
    """
    offset = part.stat().st_size if part.exists() else 0
    if entry.size is not None and offset > entry.size:  # a .part from a bigger file: useless
        part.unlink()
        offset = 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    if entry.expected_bytes is not None:
        check_disk_space(part.parent, max(entry.expected_bytes - offset, 0), f"download of {entry.name}")
    try:
        resp = session.get(url, headers=headers, stream=True, timeout=(options.timeout, options.timeout))
    except requests.ConnectTimeout:
        raise _Unreachable(f"no connection within {options.timeout:g} s (REPRO_DOWNLOAD_TIMEOUT_S)") from None
    except requests.ConnectionError as exc:
        why = _cannot_connect(exc)
        if why is not None:
            raise _Unreachable(why) from None
        raise
    with resp:
        if 300 <= resp.status_code < 400:
            where = resp.headers.get("Location")
            raise _MirrorRefused(
                f"HTTP {resp.status_code} redirect " + ("without a Location header" if not where else "not followed")
            )
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
        length = resp.headers.get("Content-Length", "")
        announced = offset + int(length) if length.isascii() and length.isdigit() else None
        if entry.size is not None and announced is not None and announced > entry.size:
            part.unlink(missing_ok=True)
            raise _MirrorRefused(
                f"announces {announced} bytes but the catalog's size is {entry.size}; nothing downloaded"
            )
        limits = [n for n in (entry.size, announced) if n is not None]
        limit = min(limits) if limits else None
        total = announced if announced is not None else entry.expected_bytes
        if total is not None:
            check_disk_space(part.parent, total - offset, f"download of {entry.name}")
            bar.update(total=total)
        hasher = hashlib.sha256()
        if offset:
            _hash_into(part, hasher)
        bar.update(completed=offset)
        written, checked = offset, offset
        started = time.monotonic()
        with open(part, "ab" if offset else "wb") as fh:
            for chunk in _body(resp):
                written += len(chunk)
                _check_rate(written - offset, time.monotonic() - started, options)
                if limit is not None and written > limit:
                    fh.close()
                    part.unlink(missing_ok=True)
                    what = "the catalog's size" if limit == entry.size else "its Content-Length"
                    raise _MirrorRefused(f"sent more than {what} of {limit} bytes; stopped, and {part.name} deleted")
                if written - checked >= DISK_CHECK_EVERY:  # before writing: pieces arrive in any size
                    checked = written
                    _check_disk_while_streaming(part, written - len(chunk), incoming=len(chunk))
                fh.write(chunk)
                hasher.update(chunk)
                bar.advance(len(chunk))
            fh.flush()
            os.fsync(fh.fileno())
    size = part.stat().st_size
    if announced is not None and size < announced:
        raise TransferInterrupted(f"connection closed after {size} of {announced} bytes")
    if announced is None and entry.size is not None and size < entry.size:
        raise TransferInterrupted(f"connection closed after {size} of {entry.size} bytes")
    return hasher.hexdigest()


def _body(resp: requests.Response) -> Iterator[bytes]:
    """The body in pieces as they arrive (`read1`: a slow server is seen byte by byte, not per 64 kB),
    with urllib3's errors as requests' (a read timeout or a cut connection: retried)."""
    import urllib3.exceptions as u3

    raw = resp.raw
    try:
        while True:
            data = raw.read1(NET_CHUNK, decode_content=True)
            if not data:
                return
            yield data
    except u3.ReadTimeoutError as exc:
        raise requests.ConnectionError(exc) from None
    except (u3.ProtocolError, u3.DecodeError) as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from None


class _TooSlow(_MirrorRefused):
    """Slower than the minimum rate: the `.part` is kept for a later resume, this mirror given up."""


def _check_rate(received: int, elapsed: float, options: FetchOptions) -> None:
    if options.min_rate and elapsed >= options.timeout and received < options.min_rate * elapsed:
        raise _TooSlow(
            f"{received} bytes in {elapsed:.0f} s, slower than {options.min_rate:g} bytes/s "
            "(REPRO_DOWNLOAD_MIN_RATE); stopped, run again to resume"
        )


def _check_disk_while_streaming(part: Path, written: int, incoming: int = 0) -> None:
    free = disk_free(part.parent) - incoming
    if free < DISK_RESERVE:
        raise ReproError(
            f"{part}: download stopped after {_gb(written)} with only {_gb(free)} left free on the "
            f"disk (the server gave no size, or more than announced); {part.name} was kept so a "
            "later run can resume: free some space, or delete it if the server is at fault"
        )


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
    """What is on disk for `entry`, without hashing anything.

    An archive counts as verified only while every file it unpacked is still there.
    """
    folder = folder_inside(root, entry.name)
    record = VerificationRecord(folder)
    out = []
    for f in entry.files:
        path = folder / f.name
        part = path.with_name(path.name + ".part")
        if path.is_file():
            digest = record.current(f, path)
            if digest and f.extract and not record.unpacked_whole(f.name, digest):
                digest = None
            out.append(FileStatus(f.name, "verified" if digest else "present", path.stat().st_size, digest))
        elif part.is_file():
            out.append(FileStatus(f.name, "partial", part.stat().st_size))
        else:
            out.append(FileStatus(f.name, "missing", None))
    return out


def download_dataset(
    entry: DatasetEntry,
    root: Path,
    verify: bool = False,
    progress: Progress | None = None,
    session: requests.Session | None = None,
    options: FetchOptions | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> dict[str, str]:
    """Fetch, verify and extract every file of `entry` into `root/<name>/`; returns {file: sha256}."""
    options = options or FetchOptions.from_env()
    folder = folder_inside(root, entry.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _os_error(folder, exc) from None
    missing_manual = [f for f in entry.files if f.manual and not (folder / f.name).is_file()]
    if missing_manual:
        names = ", ".join(f.name for f in missing_manual)
        how = entry.manual or "the catalog gives no url for them"
        raise ReproError(f"{entry.name}: put {names} in {folder} by hand ({how.strip()})")
    digests: dict[str, str] = {}
    session = session or requests.Session()
    for f in entry.files:
        path = folder / f.name
        try:
            with file_lock(folder, f.name, str(path), options.lock_timeout, log):
                digests[f.name] = _one_file(f, path, root, verify, progress, session, options, log)
        except OSError as exc:  # the disk, not the network: requests' errors are handled in fetch_file
            raise _os_error(path, exc) from None
    return digests


def _one_file(
    f: FileEntry,
    path: Path,
    root: Path,
    verify: bool,
    progress: Progress | None,
    session: requests.Session,
    options: FetchOptions,
    log: Callable[[str], None],
) -> str:
    """Verify (or fetch, then verify) one file and unpack it if asked; the caller holds its lock."""
    folder = path.parent
    record = VerificationRecord(folder)  # read now: another process may have just verified the file
    digest = None if verify else record.current(f, path)
    if digest is None and path.is_file():
        digest = sha256_file(path, progress)
        if not f.digest_matches(digest):
            record.forget(f.name)
            if f.manual:
                raise ReproError(
                    f"{path}: checksum mismatch: expected sha256 {f.sha256}, got {digest}; "
                    "replace the file with a good copy"
                )
            bad = path.with_name(path.name + ".corrupt")
            os.replace(path, bad)
            log(
                f"{path}: checksum mismatch (expected sha256 {f.sha256}, got {digest}); "
                f"moved to {bad.name}, downloading again"
            )
            digest = None
        else:
            record.mark(f, path, digest)
    if digest is None:
        digest = fetch_file(f, path, session=session, progress=progress, options=options)
        record.mark(f, path, digest)
        if f.sha256 is None:
            log(f"{path}: no checksum in the catalog; recorded sha256 {digest}")
    if f.extract and not record.unpacked_whole(f.name, digest):
        # one archive at a time per dataset: two may unpack into the same folders
        with file_lock(folder, RECORD_NAME + ".unpack", f"unpacking into {folder}", options.lock_timeout, log):
            record.reload()
            if not record.unpacked_whole(f.name, digest):
                same, changed = record.unchanged(f.name)
                restoring = record.extracted.get(f.name) == digest
                placed = unpack(
                    path,
                    folder,
                    replaceable=same,
                    keep=changed if restoring else (),
                    staging_root=root,
                    check_space=lambda n: check_disk_space(folder, n, f"extraction of {f.name}"),
                )
                record.mark_unpacked(f.name, digest, placed)
    return digest


def _os_error(path: Path, exc: OSError) -> ReproError:
    """A filesystem error as one line: what could not be written, and why."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why = "the disk is full; free some space (or set REPRO_DATA_DIR to a larger disk) and run again to resume"
    else:
        why = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return ReproError(f"{path}: file system error{where}: {why}")
