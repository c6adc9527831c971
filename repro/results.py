"""Result records: `results/<paper>/<table-id>/<row>[.<scale>].json`, written atomically, read tolerantly.

A record says what produced it: spec id, row, scale, split, metrics (keyed by the spec's column
names), config hash, git commit, seed(s), hardware, wall time and date. Records at a scale other
carries a `reference`: the metrics of the run that first produced the record, kept when a later run
rewrites it, so `repro check` can tell when a change moves a number that is not compared with the
paper (other scales, and columns with an explained deviation from the paper).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.utils import now_iso, write_json_atomic  # noqa: F401 (re-exported until every caller imports utils)
from repro.paths import REPO_DIR, results_dir
from repro.specs import Row, Spec, row_slug


@dataclass
class Result:
    spec: str
    paper: str
    row: str
    scale: str
    split: str
    metrics: dict[str, float]
    std: dict[str, float] = field(default_factory=dict)  # across seeds, when several were run
    seeds: list[int] = field(default_factory=list)
    reference: dict[str, float] | None = None
    config_hash: str = ""
    git_commit: str = ""
    hardware: dict[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0
    date: str = ""
    toolkit_version: str = __version__
    extra: dict[str, Any] = field(default_factory=dict)  # anything else a run wants to keep

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Result":
        known = {f for f in cls.__dataclass_fields__}
        missing = {"spec", "row", "scale", "metrics"} - set(data)
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
        if not isinstance(data["metrics"], dict):
            raise ValueError("metrics is not a mapping")
        for name, value in data["metrics"].items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"metric {name!r} is not a number")
        data = {k: v for k, v in data.items() if k in known}
        data.setdefault("paper", "")
        data.setdefault("split", "")
        return cls(**data)


class CorruptResult(UserWarning):
    """A result file that cannot be read; it is named and skipped."""


def result_path(spec: Spec, row: Row | str, scale: str, root: Path | None = None) -> Path:
    name = row_slug(row if isinstance(row, str) else row.name)
    suffix = "" if scale == "paper" else f".{scale}"
    return (root or results_dir()) / spec.paper / spec.id / f"{name}{suffix}.json"


def write_result(result: Result, spec: Spec, root: Path | None = None, rebaseline: bool = False) -> Path:
    """Store a result, keeping the reference of an existing record unless `rebaseline`."""
    path = result_path(spec, result.row, result.scale, root)
    previous = _read_one(path) if path.exists() and not rebaseline else None
    if previous is not None and previous.reference:
        result.reference = previous.reference
    elif result.reference is None:
        result.reference = dict(result.metrics)
    write_json_atomic(path, result.to_json())
    return path


def _read_one(path: Path) -> Result | None:
    try:
        return Result.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        warnings.warn(f"{path}: unreadable result skipped ({exc})", CorruptResult, stacklevel=3)
        return None


def read_results(spec: Spec, scale: str | None = None, root: Path | None = None) -> dict[tuple[str, str], Result]:
    """Results of one spec as {(row name, scale): Result}; corrupt files are warned about and skipped."""
    folder = (root or results_dir()) / spec.paper / spec.id
    by_slug = {r.slug: r.name for r in spec.rows}
    found: dict[tuple[str, str], Result] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        stem = path.name[: -len(".json")]
        slug, _, file_scale = stem.partition(".")
        file_scale = file_scale or "paper"
        if scale is not None and file_scale != scale:
            continue
        if slug not in by_slug:
            warnings.warn(f"{path}: no row {slug!r} in {spec.id}; skipped", CorruptResult, stacklevel=2)
            continue
        result = _read_one(path)
        if result is not None:
            found[(by_slug[slug], file_scale)] = result
    return found


# --- provenance -------------------------------------------------------------------------------


def config_hash(config: Any) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_DIR, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = out.stdout.strip()
    if not commit:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_DIR,
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "cpu_count": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info
