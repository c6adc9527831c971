"""The digest the generators' pinned-output tests compare: sha256 over a generator's files, each question or
annotation file (a JSON path the generator returns) as the indented encoding it was written in until generated data
was written on one line (`write_json_atomic(compact=True)`): digests pinned before that still name the content."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def generated_digest(paths: dict[str, Path]) -> str:
    h = hashlib.sha256()
    for key in sorted(paths):
        path = paths[key]
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f == path and f.suffix == ".json":
                h.update((json.dumps(json.loads(f.read_text()), sort_keys=True, indent=2) + "\n").encode())
            elif f.is_file():
                h.update(f.read_bytes())
    return h.hexdigest()
