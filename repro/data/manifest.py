"""What produced a prepared artefact: source files and digests, parameters, toolkit version.

A prepared folder or store is current when its recorded manifest equals the one the inputs give
now; otherwise it is rebuilt. Files up to `FULL_HASH_LIMIT` are hashed in full (sha256). Larger
ones (feature TSVs of 25 GB, the 5.6 GB GloVe file) get a `sampled-sha256`: the digest of their
size and their first and last 16 MiB, which detects a replaced or truncated file without reading
it all. A folder of thousands of per-image files is fingerprinted by its file names and sizes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from repro import __version__

FULL_HASH_LIMIT = 1 << 30
SAMPLE = 16 << 20


def file_digest(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        if size <= FULL_HASH_LIMIT:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
            return {"path": str(path), "size": size, "sha256": h.hexdigest()}
        h.update(str(size).encode())
        h.update(fh.read(SAMPLE))
        fh.seek(size - SAMPLE)
        h.update(fh.read(SAMPLE))
    return {"path": str(path), "size": size, "sampled-sha256": h.hexdigest()}


def folder_digest(path: Path, pattern: str = "*") -> dict[str, Any]:
    h = hashlib.sha256()
    count = total = 0
    for p in sorted(path.glob(pattern)):
        size = p.stat().st_size
        h.update(f"{p.name}\0{size}\n".encode())
        count, total = count + 1, total + size
    return {"path": str(path), "files": count, "size": total, "listing-sha256": h.hexdigest()}


def build_manifest(kind: str, sources: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "sources": sources, "params": params, "toolkit_version": __version__}


def _comparable(manifest: dict[str, Any]) -> str:
    keep = {k: manifest.get(k) for k in ("kind", "sources", "params", "toolkit_version")}
    return json.dumps(keep, sort_keys=True, default=str)


def is_current(recorded: dict[str, Any] | None, expected: dict[str, Any]) -> bool:
    return recorded is not None and _comparable(recorded) == _comparable(expected)


def read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
