"""Result records, written atomically, read tolerantly.

- `<paper>/<table-id>/seeds/<row>[.<scale>].seed<N>.json`: one (row, scale, seed) unit, written
  as soon as it finishes: metrics, the resolved configuration and its hash, the environment (package
  versions, CPU kernels, GPU, torch's collect_env, git commit and dirty files, command line, data
  manifests), start and end time.
- `<paper>/<table-id>/<row>[.<scale>].json`: the row's record, the mean and standard deviation
  over every seed present, rebuilt after each unit. It says what produced it (spec id, row, scale,
  split, metrics keyed by the spec's column names, config hash, git commit, seeds, hardware, wall
  time, date) and carries a `reference`: the mean over the same seeds of each seed's first metrics,
  kept when a seed is run again, so `repro check` can tell when a change moves a number that is not
  compared with the paper (other scales, and columns with an explained deviation from the paper).

Both under the root of their scale (`repro.paths.results_dir`): the checkout's `results/` for paper and
synthetic, the scratch folder for smoke (or REPRO_RESULTS for every scale), a variant's own folder. A
function given no `root` takes that of the scale: where a run writes (`results_dir`) for what a run reads
back (its seeds, to resume and aggregate), where tables read (`results_read_dir`) for `read_results`.

Paths in a record are portable (`repro.paths`): the files a run wrote relative to the results root, the
data dir as `$REPRO_DATA_DIR/...`, the command as `repro ...`; `repro.paths.resolve` reads them back.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.errors import ReproError
from repro.names import inside
from repro.paths import (
    REPO_DIR,
    command_words,
    in_checkout,
    portable_value,
    read_here,
    results_dir,
    results_read_dir,
    results_read_roots,
)
from repro.specs import Row, Spec, row_slug
from repro.utils import write_json_atomic


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
    variant: dict[str, Any] | None = None  # overrides, --limit or a spec file: not the committed spec (repro.variants)
    # not trained here: `repro run --weights` evaluated a released checkpoint or a given file (repro.weights):
    # {"weights": "released" or the file, "checkpoint": its name, "sha256": its digest}
    weights: dict[str, str] | None = None
    # per seed (as `seeds`), the hash of the spec's design the seed ran under ("": before any design; repro.design)
    design_hashes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def design_hash_of(self, seed: int) -> str:
        """The design hash seed `seed` ran under ("" when pre-design or not recorded)."""
        if len(self.design_hashes) != len(self.seeds) or seed not in self.seeds:
            return ""
        value = self.design_hashes[self.seeds.index(seed)]
        return value if isinstance(value, str) else ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Result":
        known = {f for f in cls.__dataclass_fields__}
        missing = {"spec", "row", "scale", "metrics"} - set(data)
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
        _check_metrics(data["metrics"])
        data = {k: v for k, v in data.items() if k in known}
        data.setdefault("paper", "")
        data.setdefault("split", "")
        return cls(**data)


class CorruptResult(UserWarning):
    """A result file that cannot be read; it is named and skipped."""


def result_path(spec: Spec, row: Row | str, scale: str, root: Path | None = None) -> Path:
    name = row_slug(row if isinstance(row, str) else row.name)
    suffix = "" if scale == "paper" else f".{scale}"
    return inside(root or results_dir(scale), spec.paper, spec.id, f"{name}{suffix}.json")


@dataclass
class SeedResult:
    """One (row, scale, seed) unit: what it measured and everything needed to rebuild it."""

    spec: str
    paper: str
    row: str
    scale: str
    seed: int
    split: str
    metrics: dict[str, float]
    reference: dict[str, float] | None = None  # the metrics this seed first gave (kept unless --rebaseline)
    config: dict[str, Any] = field(default_factory=dict)  # resolved: model, recipe, sizes, generator, overrides
    config_hash: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    predictions: list[str] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    wall_time_s: float = 0.0
    # CPU seconds of the process that trained it (its share when seeds trained together; data-loader workers not
    # counted); None in records made before it was kept
    cpu_time_s: float | None = None
    toolkit_version: str = __version__
    variant: dict[str, Any] | None = None  # overrides, --limit or a spec file: not the committed spec (repro.variants)
    weights: dict[str, str] | None = None  # evaluated from released or given weights, not trained (as Result's)
    legacy: bool = False  # rebuilt from an older record that kept only per-seed metrics
    design_hash: str = ""  # the hash of the spec's design this unit ran under ("": none; repro.design)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SeedResult:
        known = {f for f in cls.__dataclass_fields__}
        missing = {"spec", "row", "scale", "seed", "metrics"} - set(data)
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
        _check_metrics(data["metrics"])
        if isinstance(data["seed"], bool) or not isinstance(data["seed"], int):
            raise ValueError("seed is not an integer")
        data = {k: v for k, v in data.items() if k in known}
        data.setdefault("paper", "")
        data.setdefault("split", "")
        return cls(**data)


def _check_metrics(metrics: Any) -> None:
    if not isinstance(metrics, dict):
        raise ValueError("metrics is not a mapping")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ValueError(f"metric {name!r} is not a number")


def seed_path(spec: Spec, row: Row | str, scale: str, seed: int, root: Path | None = None) -> Path:
    name = row_slug(row if isinstance(row, str) else row.name)
    suffix = "" if scale == "paper" else f".{scale}"
    return inside(root or results_dir(scale), spec.paper, spec.id, "seeds", f"{name}{suffix}.seed{seed}.json")


def read_seed_results(spec: Spec, row: Row, scale: str, root: Path | None = None) -> dict[int, SeedResult]:
    """Every stored seed of a (row, scale): the seed files, plus the seeds an older row record kept only
    as `extra.per_seed` (read as legacy seeds so that no stored seed is lost when the record is rebuilt)."""
    found: dict[int, SeedResult] = {}
    folder = seed_path(spec, row, scale, 0, root).parent
    prefix = seed_path(spec, row, scale, 0, root).name[: -len("0.json")]
    if folder.is_dir():
        for path in sorted(folder.glob(f"{glob_escape(prefix)}*.json")):
            tail = path.name[len(prefix) : -len(".json")]
            if not tail.isdigit():
                continue
            try:
                seed = SeedResult.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError, RecursionError) as exc:
                raise CorruptResultError(
                    f"{path}: unreadable seed result ({exc}); move it away or rerun that seed with --force"
                ) from None
            found[seed.seed] = seed
    aggregate = result_path(spec, row, scale, root)
    if aggregate.exists():
        old = _read_one(aggregate)
        if old is None:
            raise CorruptResultError(f"{aggregate}: unreadable result; move it away before running this row again")
        per_seed = old.extra.get("per_seed", [])
        if len(per_seed) == len(old.seeds):
            for i, (seed, metrics) in enumerate(zip(old.seeds, per_seed)):
                if seed not in found:
                    found[seed] = SeedResult(
                        spec=spec.id,
                        paper=spec.paper,
                        row=row.name,
                        scale=scale,
                        seed=seed,
                        split=old.split,
                        metrics=dict(metrics),
                        reference=dict(metrics),
                        config_hash=old.config_hash,
                        training=(old.extra.get("train") or [None] * len(per_seed))[i],
                        extra={
                            k: v[i]
                            for k, v in old.extra.items()
                            if k not in ("per_seed", "train", "predictions")
                            and isinstance(v, list)
                            and len(v) == len(per_seed)
                        },
                        info={k: v for k, v in old.extra.items() if not isinstance(v, list)},
                        finished=old.date,
                        wall_time_s=old.wall_time_s / max(len(per_seed), 1),
                        legacy=True,
                        environment={"git_commit": old.git_commit, "hardware": old.hardware},
                        design_hash=old.design_hash_of(seed),
                    )
    return dict(sorted(found.items()))


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)


class CorruptResultError(ReproError):
    """A stored result that a run would have to rebuild cannot be read: nothing is overwritten."""


def write_seed_result(spec: Spec, seed_result: SeedResult, root: Path | None = None, rebaseline: bool = False) -> Path:
    """Store one unit, keeping the reference of an earlier run of the same seed and configuration unless
    `rebaseline`. A run under changed settings (another configuration hash) is a new reference: the old one
    measured another experiment."""
    root = root or results_dir(seed_result.scale)
    path = seed_path(spec, seed_result.row, seed_result.scale, seed_result.seed, root)
    previous = read_seed_results(spec, spec.row(seed_result.row), seed_result.scale, root).get(seed_result.seed)
    if previous is not None and previous.reference and not rebaseline and _same_configuration(previous, seed_result):
        seed_result.reference = previous.reference
    elif seed_result.reference is None:
        seed_result.reference = dict(seed_result.metrics)
    write_json_atomic(path, portable_record(seed_result.to_json(), root))
    return path


def _same_configuration(previous: SeedResult, current: SeedResult) -> bool:
    """Both made under one configuration (a record without a hash, made before hashes were kept, counts as one)."""
    return not previous.config_hash or not current.config_hash or previous.config_hash == current.config_hash


def store_seed(
    spec: Spec, row: Row, seed_result: SeedResult, root: Path | None = None, rebaseline: bool = False
) -> tuple[Path, Result]:
    """Store one finished unit and rebuild its row's record from every seed present: (the unit's record, the row's).
    What a launcher calls when a unit ends; the reading is this module's."""
    path = write_seed_result(spec, seed_result, root, rebaseline=rebaseline)
    result = aggregate(spec, row, seed_result.scale, read_seed_results(spec, row, seed_result.scale, root))
    write_result(result, spec, root)
    return path, result


def portable_record(data: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """A record's JSON as it is stored: the paths a run put in it (its files, its extra and info, the
    command line) in the portable form of `repro.paths`, whichever machine and folder wrote it."""
    out = dict(data)
    for key in ("predictions", "extra", "info", "training"):
        if key in out:
            out[key] = portable_value(out[key], root)
    env = out.get("environment")
    if isinstance(env, dict) and isinstance(env.get("command"), list):
        out["environment"] = {**env, "command": command_words(env["command"], root)}
    return out


def aggregate(spec: Spec, row: Row, scale: str, seeds: dict[int, SeedResult]) -> Result:
    """The row's record over the seeds present: mean, standard deviation, the reference over the same seeds."""
    units = list(seeds.values())
    per_seed = [u.metrics for u in units]
    extra: dict[str, Any] = {"per_seed": per_seed}
    if any(u.training for u in units):
        extra["train"] = [u.training for u in units]
    for key in sorted({k for u in units for k in u.extra}):
        extra[key] = [u.extra.get(key) for u in units]
    for u in units:
        extra.update(u.info)
    predictions = [p for u in units for p in u.predictions]
    if predictions:
        extra["predictions"] = predictions
    hashes = sorted({u.config_hash for u in units if u.config_hash})
    commits = sorted({u.environment.get("git_commit", "") for u in units} - {""})
    latest = max(units, key=lambda u: u.finished)
    return Result(
        spec=spec.id,
        paper=spec.paper,
        row=row.name,
        scale=scale,
        split=latest.split,
        metrics=_mean(per_seed),
        std=_std(per_seed) if len(units) > 1 else {},
        seeds=list(seeds),
        reference=_mean([u.reference or u.metrics for u in units]),
        config_hash=hashes[0] if len(hashes) == 1 else ",".join(hashes),
        git_commit=commits[-1] if len(commits) == 1 else ",".join(commits),
        hardware=latest.environment.get("hardware", {}),
        wall_time_s=round(sum(u.wall_time_s for u in units), 2),
        date=latest.finished,
        extra=extra,
        variant=latest.variant,
        weights=latest.weights,
        design_hashes=[u.design_hash for u in units],
    )


def _mean(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in runs[0] if all(k in r for r in runs)] if runs else []
    return {k: statistics.fmean(r[k] for r in runs) for k in keys}


def _std(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in runs[0] if all(k in r for r in runs)] if runs else []
    return {k: statistics.stdev(r[k] for r in runs) for k in keys}


def write_result(result: Result, spec: Spec, root: Path | None = None, rebaseline: bool = False) -> Path:
    """Store a row's record (`aggregate` rebuilds it from its seeds, reference included). A record given
    without a reference keeps the stored one unless `rebaseline`, or takes its own metrics."""
    root = root or results_dir(result.scale)
    path = result_path(spec, result.row, result.scale, root)
    if result.reference is None:
        previous = _read_one(path) if path.exists() and not rebaseline else None
        result.reference = dict(previous.reference if previous is not None and previous.reference else result.metrics)
    write_json_atomic(path, portable_record(result.to_json(), root))
    return path


def _read_one(path: Path) -> Result | None:
    try:
        return Result.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        warnings.warn(f"{path}: unreadable result skipped ({exc})", CorruptResult, stacklevel=3)
        return None


def _split_stem(stem: str, slugs) -> tuple[str, str]:
    """`<row slug>[.<scale>]` -> (slug, scale); a slug may itself end in or hold dots (`PSAC w/ Char.`)."""
    if stem in slugs:
        return stem, "paper"
    known = [s for s in slugs if stem.startswith(s + ".") and "." not in stem[len(s) + 1 :]]
    if known:
        slug = max(known, key=len)
        return slug, stem[len(slug) + 1 :]
    slug, _, scale = stem.partition(".")
    return slug, scale or "paper"


def read_results(spec: Spec, scale: str | None = None, root: Path | None = None) -> dict[tuple[str, str], Result]:
    """Results of one spec as {(row name, scale): Result}; corrupt files are warned about and skipped. Without
    a `root`, each scale's records are read where they live (`repro.paths.results_read_roots`)."""
    if root is not None:
        roots: list[tuple[Path, bool | None]] = [(root, None)]
    elif scale is not None:
        roots = [(results_read_dir(scale), None)]
    else:
        roots = results_read_roots()
    found: dict[tuple[str, str], Result] = {}
    for folder, scratch in roots:
        found.update(_read_folder(spec, inside(folder, spec.paper, spec.id), scale, scratch))
    return found


def _read_folder(spec: Spec, folder: Path, scale: str | None, scratch: bool | None) -> dict[tuple[str, str], Result]:
    by_slug = {r.slug: r.name for r in spec.rows}
    found: dict[tuple[str, str], Result] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        slug, file_scale = _split_stem(path.name[: -len(".json")], by_slug)
        if (scale is not None and file_scale != scale) or not read_here(file_scale, scratch):
            continue
        if slug not in by_slug:
            warnings.warn(f"{path}: no row {slug!r} in {spec.id}; skipped", CorruptResult, stacklevel=3)
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
    """HEAD of the checkout the toolkit runs from, `-dirty` when tracked or untracked files differ; installed
    from a git URL, the commit pip recorded; otherwise `unknown (repro <version>, installed)` or `unknown`."""
    state = git_state()
    if state["commit"]:
        return state["commit"] + ("-dirty" if state["dirty"] else "")
    return f"unknown (repro {__version__}, installed)" if state.get("installed") else "unknown"


def installed_commit() -> str:
    """The commit pip recorded for `pip install git+URL@REV` (direct_url.json), or ""."""
    from importlib import metadata

    try:
        text = metadata.distribution("repro").read_text("direct_url.json") or "{}"
        return str(json.loads(text).get("vcs_info", {}).get("commit_id", ""))
    except (metadata.PackageNotFoundError, ValueError, AttributeError):
        return ""


def git_state() -> dict[str, Any]:
    """Commit, whether the code is dirty, and which files differ (untracked ones included; results/ is what
    runs write, not code, and is left out). An installed package is no checkout (git would answer for
    whatever repository surrounds site-packages): its commit is the one pip recorded, if any."""
    if not in_checkout():
        return {"commit": installed_commit(), "dirty": False, "changed": [], "installed": __version__}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_DIR, capture_output=True, text=True, timeout=10)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", ".", ":!results"],
            cwd=REPO_DIR,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": "", "dirty": False, "changed": []}
    commit = head.stdout.strip() if head.returncode == 0 else ""
    changed = [line[3:] for line in status.stdout.splitlines()] if commit else []
    return {"commit": commit, "dirty": bool(changed), "changed": changed[:200]}


_ENVIRONMENT: dict[str, Any] | None = None
VERSIONED_PACKAGES = (
    "torch",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "nltk",
    "pydantic",
    "transformers",
    "timm",
    "torchvision",
    "pillow",
    "h5py",
)


def environment() -> dict[str, Any]:
    """What can change a number: package versions, CPU kernels and threads, GPU, git state, command line.
    Computed once per process (collect_env runs subprocesses)."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        from importlib import metadata

        import torch
        from torch.utils import collect_env

        versions = {}
        for name in VERSIONED_PACKAGES:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        state = git_state()
        try:
            env_info = _without_folders(collect_env.get_pretty_env_info())
        except Exception as exc:  # noqa: BLE001 - collect_env shells out; its failure must not stop a run
            env_info = f"unavailable: {exc}"
        _ENVIRONMENT = {
            "packages": versions,
            "hardware": hardware(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
            "git_commit": git_commit(),
            "git": state,
            "collect_env": env_info,
        }
    return {**_ENVIRONMENT, "threads": _threads(), "command": list(sys.argv)}


def run_commit() -> str:
    """The commit a run's outputs name: the one `environment()` took as the run started (a commit made while it
    trains is not the code it runs), or the checkout's now where no environment was taken yet."""
    return _ENVIRONMENT["git_commit"] if _ENVIRONMENT is not None else git_commit()


def adopt_environment(taken: dict[str, Any]) -> None:
    """A worker process takes its parent's `environment()` (the state as the run started) instead of its own."""
    global _ENVIRONMENT
    _ENVIRONMENT = {k: v for k, v in taken.items() if k not in ("threads", "command")}


def _without_folders(text: str) -> str:
    """collect_env's report with each absolute path cut to its file name (on a GPU machine it lists the cuDNN
    libraries it found, `/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0`): a record names no folder of the machine
    that wrote it, and the versions are in the names."""
    return re.sub(r"(?<![\w.~-])/(?:[^\s/]+/)+(?=[^\s/]+)", "", text)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_model(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            info["cuda"] = torch.version.cuda
    except ImportError:
        pass
    return info


def cpu_model() -> str:
    """This machine's processor, as /proc/cpuinfo names it (a record's `hardware.cpu`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
