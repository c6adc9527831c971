"""Generated data written once: a generator's folder is (re)written only when its stored configuration differs, and
never by two processes at a time.

A generator stores the configuration it wrote a folder with (a manifest or stamp, JSON). `same_config` compares it
with the configuration asked for as JSON keeps it (tuples as lists), so a folder written once is found again, and
`generating(folder)` holds a lock file beside the folder while one process checks and writes it: another process
(a second `repro run`, the workers of `-j 2`, pilots side by side) waits, then finds it written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def same_config(stored: Any, config: Mapping[str, Any]) -> bool:
    """Whether a stored (JSON-read) configuration is `config`."""
    return stored == json.loads(json.dumps(config, default=str))


@contextmanager
def generating(folder: Path) -> Iterator[None]:
    """Hold `<folder>.lock` (beside the folder, so removing the folder leaves no stale lock inside it)."""
    from filelock import FileLock

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f"{folder.name}.lock")):
        yield
