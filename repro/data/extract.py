"""Safe extraction of zip and tar archives into a dataset's folder.

Every member is checked before anything is written: absolute paths, drive letters, `..`
components, links that point outside the folder, device files and names of the toolkit's own
files (`.repro-*`) are refused, so an archive can never write outside `dest`. Members are unpacked
into a hidden staging folder (in the data root, next to `dest`) and moved into place only when the
whole archive has been read, so a failed extraction leaves no half-unpacked tree that looks complete.

Moving into place never deletes what the toolkit did not put there: a folder that exists is merged
into, a file that exists with the same content is kept, and a file that exists with other content
is replaced only when the caller says the toolkit unpacked it (from an earlier version of the same
archive) and nobody changed it since. Anything else is a conflict: the extraction is refused before
a single file is moved, and the message names the files.
"""

from __future__ import annotations

import errno
import filecmp
import gzip
import lzma
import os
import shutil
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from repro.errors import ReproError, reason
from repro.utils import work_dir

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
OWN_PREFIX = ".repro"  # the toolkit's own files in a dataset folder: record, locks, staging
STAGING_PREFIX = ".repro-extract-"
# what a damaged archive raises while it is read (besides BadZipFile / TarError)
_READ_ERRORS = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile, NotImplementedError, RuntimeError, ValueError)

Placed = dict[str, list[int]]  # relative path -> [size, mtime_ns] of what an archive put in place


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _check_name(archive: Path, name: str) -> PurePosixPath:
    """A member name as a relative path that stays inside the destination, or ReproError."""
    cleaned = name.replace("\\", "/")
    path = PurePosixPath(cleaned)
    if cleaned.startswith("/") or (len(cleaned) > 1 and cleaned[1] == ":"):
        raise ReproError(f"{archive}: refused to extract {name!r}: absolute path in archive")
    if ".." in path.parts:
        raise ReproError(f"{archive}: refused to extract {name!r}: '..' in path would leave the dataset folder")
    if "\0" in cleaned:
        raise ReproError(f"{archive}: refused to extract {name!r}: NUL in a name")
    parts = [p for p in path.parts if p != "."]
    if parts and parts[0].startswith(OWN_PREFIX):
        raise ReproError(
            f"{archive}: refused to extract {name!r}: names starting with {OWN_PREFIX!r} are the toolkit's own files"
        )
    return path


def _link_stays_inside(member: PurePosixPath, target: str) -> bool:
    target = target.replace("\\", "/")
    if target.startswith("/") or (len(target) > 1 and target[1] == ":"):
        return False
    depth = len(member.parent.parts)
    for part in PurePosixPath(target).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def archive_members_size(archive: Path) -> int | None:
    """Uncompressed size of a zip's members (for the disk-space check); None when not cheap to know."""
    if archive.name.lower().endswith(".zip"):
        try:
            with zipfile.ZipFile(archive) as zf:
                return sum(info.file_size for info in zf.infolist())
        except (zipfile.BadZipFile, OSError):
            return None
    return None


def safe_extract(archive: Path, dest: Path) -> list[str]:
    """Unpack `archive` into `dest` without replacing anything; returns the top-level names it provides."""
    return sorted({rel.split("/", 1)[0] for rel in unpack(archive, dest)})


def unpack(
    archive: Path,
    dest: Path,
    replaceable: Iterable[str] = (),
    keep: Iterable[str] = (),
    staging_root: Path | None = None,
    check_space: Callable[[int], None] | None = None,
) -> Placed:
    """Unpack `archive` into `dest`, merging into what is there; returns every file it provides.

    `replaceable`: relative paths the toolkit unpacked earlier (from this archive) and that are unchanged
    since; only those may be replaced by different content. `keep`: paths to leave as they are when their
    content differs (a user's edit of a file this same archive provided, when restoring missing files).
    `staging_root` (default: the folder holding `dest`) receives the temporary folder. `check_space(bytes)`
    is called with the unpacked size before anything is written.
    """
    dest.mkdir(parents=True, exist_ok=True)
    staging_root = staging_root if staging_root is not None else dest.parent
    if os.stat(staging_root).st_dev != os.stat(dest).st_dev:
        staging_root = dest  # a dataset folder linked to another disk: moves must stay on one filesystem
    staging = work_dir(staging_root, STAGING_PREFIX)  # sweeps what a killed run left here
    try:
        lower = archive.name.lower()
        if lower.endswith(".zip"):
            _extract_zip(archive, staging, check_space)
        elif lower.endswith(ARCHIVE_SUFFIXES):
            _extract_tar(archive, staging, check_space)
        else:
            raise ReproError(f"{archive}: not a zip or tar archive; set extract: false in the catalog")
        return _merge(archive, staging, dest, set(replaceable), set(keep))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stat(path: Path) -> list[int]:
    st = path.lstat()
    return [st.st_size, st.st_mtime_ns]


def _same(a: Path, b: Path) -> bool:
    """Same content: both links with one target, or both regular files with equal bytes."""
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    return a.is_file() and b.is_file() and filecmp.cmp(a, b, shallow=False)


def _files_under(folder: Path, rel: str) -> Placed:
    out: Placed = {}
    for base, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            path = Path(base) / name
            out[f"{rel}/{path.relative_to(folder).as_posix()}"] = _stat(path)
    return out


def _merge(archive: Path, staging: Path, dest: Path, replaceable: set[str], keep: set[str]) -> Placed:
    """Plan the moves from `staging` into `dest`, refuse on any conflict, then move."""
    moves: list[tuple[Path, Path]] = []  # (staged, target): target absent, or ours and unchanged
    placed: Placed = {}
    conflicts: list[str] = []

    def plan(src: Path, dst: Path, rel: str) -> None:
        for name in sorted(os.listdir(src)):
            s, d, r = src / name, dst / name, f"{rel}/{name}" if rel else name
            s_dir = s.is_dir() and not s.is_symlink()
            if not d.exists() and not d.is_symlink():
                moves.append((s, d))
                placed.update(_files_under(s, r) if s_dir else {r: _stat(s)})
            elif s_dir and d.is_dir() and not d.is_symlink():
                plan(s, d, r)
            elif s_dir or (d.is_dir() and not d.is_symlink()):
                conflicts.append(
                    f"{r} (a {'folder' if s_dir else 'file'} in the archive, "
                    f"a {'file' if s_dir else 'folder'} in {dest})"
                )
            elif _same(s, d):
                placed[r] = _stat(d)  # already there, byte for byte: nothing to move
            elif r in replaceable:
                moves.append((s, d))
                placed[r] = _stat(s)
            elif r in keep:
                placed[r] = _stat(d)
            else:
                conflicts.append(f"{r} (exists with other content, not unpacked by repro)")

    plan(staging, dest, "")
    if conflicts:
        shown = "; ".join(conflicts[:5]) + (f"; and {len(conflicts) - 5} more" if len(conflicts) > 5 else "")
        raise ReproError(
            f"{archive}: not unpacked, {len(conflicts)} file(s) in {dest} would be overwritten: "
            f"{shown}. Move them away (or delete them) and run again"
        )
    for s, d in moves:
        os.replace(s, d)
    return placed


def _extract_zip(archive: Path, staging: Path, check_space: Callable[[int], None] | None) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            for info in infos:
                _check_name(archive, info.filename)
                mode = (info.external_attr >> 16) & 0o170000
                if mode == 0o120000:  # a symlink stored in a zip
                    raise ReproError(f"{archive}: refused to extract {info.filename!r}: symbolic link in archive")
            if check_space is not None:
                check_space(sum(info.file_size for info in infos))
            for info in infos:
                zf.extract(info, staging)
    except (zipfile.BadZipFile, *_READ_ERRORS) as exc:
        raise ReproError(f"{archive}: not a readable zip archive ({reason(exc)})") from None
    except OSError as exc:
        raise _write_error(archive, exc) from None


def _extract_tar(archive: Path, staging: Path, check_space: Callable[[int], None] | None) -> None:
    try:
        with tarfile.open(archive) as tf:
            members = tf.getmembers()
            for m in members:
                path = _check_name(archive, m.name)
                if m.issym() or m.islnk():
                    if not _link_stays_inside(path, m.linkname) or (
                        m.islnk() and ".." in PurePosixPath(m.linkname).parts
                    ):
                        raise ReproError(
                            f"{archive}: refused to extract {m.name!r}: link to "
                            f"{m.linkname!r} points outside the dataset folder"
                        )
                elif not (m.isfile() or m.isdir()):
                    raise ReproError(f"{archive}: refused to extract {m.name!r}: device or special file")
            if check_space is not None:
                check_space(sum(m.size for m in members if m.isfile()))
            tf.extractall(staging, members=members, filter="data")
    except tarfile.FilterError as exc:
        raise ReproError(f"{archive}: refused to extract ({exc})") from None
    except (tarfile.TarError, *_READ_ERRORS) as exc:
        raise ReproError(f"{archive}: not a readable tar archive ({reason(exc)})") from None
    except OSError as exc:
        raise _write_error(archive, exc) from None


def _write_error(archive: Path, exc: OSError) -> ReproError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why = "the disk is full; free some space or set REPRO_DATA_DIR to a larger disk"
    else:
        why = exc.strerror or str(exc)
    where = f" {exc.filename}" if exc.filename else ""
    return ReproError(f"{archive}: cannot unpack{where}: {why}")
