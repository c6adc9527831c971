"""Write a file so that it is either complete or absent: a temporary file in the same folder,
flushed and fsynced, then renamed over the target. An error or interrupt leaves the old file."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


@contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO]:
    """`with atomic_open(p, "wb") as f: ...` writes `p` atomically ("w" for text, "wb" for bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
