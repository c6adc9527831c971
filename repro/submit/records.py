"""What `repro submit` remembers: the submissions it made, and EvalAI phase ids looked up by name.

Records go to `results/submissions.jsonl`, one JSON object a line (target, challenge, phase, host,
file and sha256, submission id, time, later status and result), next to the results they belong to.
The file is rewritten whole (temp file + rename) under a file lock (`filelock`), so a crash or a concurrent
`repro submit` never leaves it half-written. Tokens are never stored here.

Phase ids found by name are cached in `$XDG_CACHE_HOME/repro/evalai-phases.json`, per host and target.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from repro.errors import ReproError
from repro.paths import results_dir
from repro.submit.check import Target, cache_dir
from repro.utils import write_bytes_atomic

# --- submission records -------------------------------------------------------------------------


def records_path() -> Path:
    return results_dir() / "submissions.jsonl"


# how long a `repro submit` waits for another one writing the records (each holds the lock for one rewrite)
LOCK_TIMEOUT_S = 60.0


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    held = FileLock(str(lock))
    try:
        held.acquire(timeout=LOCK_TIMEOUT_S)
    except Timeout:
        raise ReproError(
            f"{path}: another repro submit still holds {lock} after {LOCK_TIMEOUT_S:g} s; run again when it is done"
        ) from None
    try:
        yield
    finally:
        held.release()


def read_records(path: Path | None = None) -> list[dict]:
    path = path or records_path()
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise ReproError(f"{path}:{number}: not a JSON record") from None
    return records


def _rewrite(path: Path, records: list[dict]) -> None:
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    write_bytes_atomic(path, text.encode("utf-8"))


def add_record(record: dict) -> Path:
    path = records_path()
    with _locked(path):
        _rewrite(path, read_records(path) + [record])
    return path


def update_record(submission_id: int, host: str, **changes: Any) -> None:
    path = records_path()
    with _locked(path):
        records = read_records(path)
        for record in reversed(records):
            if record.get("submission_id") == submission_id and record.get("host") == host:
                record.update(changes)
                _rewrite(path, records)
                return


def find_record(submission_id: int) -> dict | None:
    return next((r for r in reversed(read_records()) if r.get("submission_id") == submission_id), None)


# --- phases -------------------------------------------------------------------------------------


def _norm(name: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name or "").lower())


def phase_cache_path() -> Path:
    return cache_dir() / "evalai-phases.json"


def resolve_phase(target: Target, client: Any, override: int | None = None) -> tuple[int, str]:
    """(phase id, name): `--phase`, the catalog's id, the cache, or a lookup by name on the server."""
    if override is not None:
        return override, "given with --phase"
    if target.phase:
        return int(target.phase), target.phase_names[0] if target.phase_names else ""
    cache_path = phase_cache_path()
    key = f"{client.conn.host} {target.challenge} {target.name}"
    cache = _read_cache(cache_path)
    if isinstance(cache.get(key), dict) and isinstance(cache[key].get("id"), int):
        return cache[key]["id"], cache[key].get("name", "")
    phases = client.phases(target.challenge)
    for wanted in target.phase_names:
        hits = [p for p in phases if any(_norm(p.get(k)) == _norm(wanted) for k in ("name", "codename", "slug"))]
        if len(hits) == 1 and isinstance(hits[0].get("id"), int):
            cache[key] = {"id": hits[0]["id"], "name": hits[0].get("name", wanted)}
            _write_cache(cache_path, cache)
            return cache[key]["id"], cache[key]["name"]
    listed = ", ".join(f"{p.get('id')} {p.get('name')!r}" for p in phases) or "none"
    raise ReproError(
        f"challenge {target.challenge} has no phase named {' / '.join(target.phase_names)} "
        f"(phases: {listed}); pass --phase ID"
    )


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, data: dict) -> None:
    write_bytes_atomic(path, json.dumps(data, indent=2, sort_keys=True).encode("utf-8"))
