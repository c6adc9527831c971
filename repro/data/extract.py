"""Safe extraction of zip and tar archives into a dataset's folder.

Every member is checked before anything is written: absolute paths, drive letters, `..`
components, links that point outside the folder, and device files are refused, so an archive can
never write outside `dest`. Members are unpacked into a hidden staging folder inside `dest` and
moved into place only when the whole archive has been read, so a failed extraction leaves no
half-unpacked tree that looks complete.
"""
from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from repro.errors import ReproError

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


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
    """Unpack `archive` into `dest`; returns the top-level names it produced."""
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".extracting-{archive.name}-", dir=dest))
    try:
        if archive.name.lower().endswith(".zip"):
            _extract_zip(archive, staging)
        elif archive.name.lower().endswith(ARCHIVE_SUFFIXES):
            _extract_tar(archive, staging)
        else:
            raise ReproError(f"{archive}: not a zip or tar archive; set extract: false in the catalog")
        tops = sorted(os.listdir(staging))
        for top in tops:
            target = dest / top
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            os.replace(staging / top, target)
        return tops
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract_zip(archive: Path, staging: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            for info in infos:
                _check_name(archive, info.filename)
                mode = (info.external_attr >> 16) & 0o170000
                if mode == 0o120000:  # a symlink stored in a zip
                    raise ReproError(f"{archive}: refused to extract {info.filename!r}: symbolic link in archive")
            for info in infos:
                zf.extract(info, staging)
    except zipfile.BadZipFile as exc:
        raise ReproError(f"{archive}: not a readable zip archive ({exc})") from None


def _extract_tar(archive: Path, staging: Path) -> None:
    try:
        with tarfile.open(archive) as tf:
            members = tf.getmembers()
            for m in members:
                path = _check_name(archive, m.name)
                if m.issym() or m.islnk():
                    if not _link_stays_inside(path, m.linkname) or (m.islnk() and ".." in PurePosixPath(m.linkname).parts):
                        raise ReproError(f"{archive}: refused to extract {m.name!r}: link to "
                                         f"{m.linkname!r} points outside the dataset folder")
                elif not (m.isfile() or m.isdir()):
                    raise ReproError(f"{archive}: refused to extract {m.name!r}: device or special file")
            tf.extractall(staging, members=members, filter="data")
    except tarfile.TarError as exc:
        raise ReproError(f"{archive}: not a readable tar archive ({exc})") from None
