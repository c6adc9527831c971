"""Regression fingerprints: the loss of the first training steps, a check that holds on any CPU.

CPU training is not bit-identical across processors (other vector kernels, other summation order),
and a full synthetic run amplifies the difference: MCAN's Y/N accuracy at the synthetic scale moved
from 60.71 to 63.84 between two x86 machines, and the same row's seeds spread over 60.7-71.4. The
first steps of training do not amplify it yet: over 40 steps of Table V's synthetic rows, the loss
trajectories under ATEN_CPU_CAPABILITY=default, avx2 and avx512 and with 1 or 2 threads differed by at
most 3.1e-6 relative on one machine and by up to 1.02e-3 on another (MCAN+PA*, where near-ties amplify),
while a real change (PMA switched off, MCAN for MCAN+PA) moves them by 1e-2 on average and by more than
1e-1 at some step. A fingerprint is that trajectory, stored per row in
`results/<paper>/<table>/fingerprints/<scale>.json`; `repro check --rerun` trains each row again for
the same steps and compares, at the spec's `scales.<scale>.fingerprint.tolerance` (relative, largest
step).

Spec settings (`scales.<scale>.fingerprint`): steps (default 40), rows (default: every runnable
training row), tolerance (default 1e-3), stage (default: none): for a family that trains in stages, the
sub-folder of the unit's work folder whose `train.jsonl` is the trajectory (ace-rpe: `pretrain`), trained
by the scale's `<stage>_recipe` (then its `recipe` and its other `<name>_recipe`s stop after one step) or by its
`recipe` (psac's four tasks share it), and `generator` / `task_generator` (default: none): sizes of the scale's
generated data that the fingerprint run sets otherwise, so that the probe scores a smaller evaluation split (scoring
a whole large split can cost more than the steps). The generators draw their training items before their evaluation
items, so the training items stay the full run's; the losses do too where the vocabularies, which are built over
every split, stay the same: a size too small to use every word and answer changes them. The committed fingerprints
that set sizes keep losses stored from runs on the full split, so their check shows it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.names import inside
from repro.paths import results_dir, results_read_dir
from repro.specs import Row, Spec
from repro.utils import write_json_atomic

DEFAULT_STEPS = 40
DEFAULT_TOLERANCE = 1e-3


@dataclass
class FingerprintCheck:
    spec: str
    row: str
    scale: str
    steps: int
    worst: float  # largest relative difference over the steps
    worst_step: int
    tolerance: float
    probe: str = "not stored"  # the probe split's scores: "ok", "differs" or "not stored" (an older fingerprint)

    @property
    def ok(self) -> bool:
        return self.worst <= self.tolerance and self.probe != "differs"


def settings(spec: Spec, scale: str) -> dict[str, Any] | None:
    """The spec's fingerprint settings at a scale, or None when it declares none."""
    raw = spec.scales.get(scale, {}).get("fingerprint")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ReproError(f"{spec.path}: scales.{scale}.fingerprint must be a mapping (steps, rows, tolerance)")
    steps = raw.get("steps", DEFAULT_STEPS)
    tolerance = raw.get("tolerance", DEFAULT_TOLERANCE)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ReproError(f"{spec.path}: scales.{scale}.fingerprint.steps must be a positive integer, got {steps!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise ReproError(f"{spec.path}: scales.{scale}.fingerprint.tolerance must be a non-negative number")
    stage = raw.get("stage", "")
    if not isinstance(stage, str) or "/" in stage or stage.startswith("."):
        raise ReproError(f"{spec.path}: scales.{scale}.fingerprint.stage must be a folder name, got {stage!r}")
    rows = [spec.row(name) for name in raw.get("rows", [])] or [r for r in spec.runnable_rows if r.model is not None]
    data = {key: _sizes(spec, scale, key, raw[key]) for key in GENERATORS if key in raw}
    return {"steps": steps, "tolerance": float(tolerance), "rows": rows, "stage": stage, "data": data}


GENERATORS = ("generator", "task_generator")  # the scale's generated-data settings a fingerprint may make smaller


def _sizes(spec: Spec, scale: str, key: str, raw: Any) -> dict[str, int]:
    """A fingerprint's `generator` or `task_generator`: sizes (positive integers) of keys the scale's own has."""
    where = f"{spec.path}: scales.{scale}.fingerprint.{key}"
    own = spec.scales.get(scale, {}).get(key)
    if not isinstance(raw, dict) or not isinstance(own, dict):
        raise ReproError(f"{where} must be a mapping of sizes from scales.{scale}.{key}")
    for name, value in raw.items():
        if name not in own:
            raise ReproError(f"{where}.{name}: scales.{scale}.{key} has no {name!r}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ReproError(f"{where}.{name} must be a positive integer, got {value!r}")
    return dict(raw)


def path_for(spec: Spec, scale: str, root: Path | None = None) -> Path:
    """The stored fingerprint of a spec at a scale (no `root`: where `repro check` reads that scale's records)."""
    return inside(root or results_read_dir(scale), spec.paper, spec.id, "fingerprints", f"{scale}.json")


def probe_digest(metrics: dict[str, float], split: str) -> str:
    """sha256 of the scores a unit gives its evaluation split (rounded to 1e-4), with the split's name."""
    rounded = {k: round(float(v), 4) for k, v in sorted(metrics.items())}
    return hashlib.sha256(json.dumps({"split": split, "scores": rounded}, sort_keys=True).encode()).hexdigest()[:16]


# Scores after the fingerprint steps move a little across processors (a near-tie answer flips: one question of a
# small split, 0.46 points of MCAN+PA*'s Other and 0.4 of a recall@10 between ATEN_CPU_CAPABILITY=default and
# avx2), while a change of the scoring rule moves them by points: a probe score differs when it is off by more
# than this many points (percent-like scores) or this fraction of the stored value (scores below 1: MSE, ANLS).
PROBE_POINTS = 1.0
PROBE_FRACTION = 0.05


def probe_verdict(kept: Any, probe: dict[str, Any]) -> str:
    """ "ok", "differs" (the split or a score moved past the probe tolerance) or "not stored" (an older fingerprint)."""
    if not isinstance(kept, dict) or not isinstance(kept.get("scores"), dict):
        return "not stored"
    if kept.get("split") != probe["split"] or set(kept["scores"]) != set(probe["scores"]):
        return "differs"
    for key, stored in kept["scores"].items():
        allowed = PROBE_POINTS if abs(float(stored)) >= 1.0 else PROBE_FRACTION * max(abs(float(stored)), 1e-3)
        if not abs(float(probe["scores"][key]) - float(stored)) <= allowed:
            return "differs"
    return "ok"


def fingerprint_run(
    spec: Spec, row: Row, scale: str, steps: int, seed: int = 0, stage: str = "", data: dict | None = None
) -> tuple[list[float], dict[str, Any]]:
    """The training loss of each of the first `steps` steps of a row (of its `stage`), trained single-threaded
    from scratch, and the probe: the scores of the unit's evaluation split after those steps (`data`:
    the fingerprint's `generator` / `task_generator` sizes, set over the scale's)."""
    import torch

    from repro.families import for_row
    from repro.families.base import RunContext
    from repro.specs import scale_settings
    from repro.train.distributed import use_device

    family = for_row(row)
    if family is None:
        raise ReproError(f"{spec.id} row {row.name!r}: its family is not implemented; no fingerprint")
    base = scale_settings(spec, scale)
    # the recipe whose losses are compared stops after `steps`: `<stage>_recipe` where the scale has one (then
    # the stages after it stop after one step: `recipe` and every other `<name>_recipe`, ace-rpe's task_recipe), else
    # `recipe`
    own = f"{stage}_recipe" if stage and f"{stage}_recipe" in base else None
    run_settings = {**base, "recipe": {**base.get("recipe", {}), "max_steps": 1 if own else steps}}
    if own:
        later = [key for key in base if key.endswith("_recipe") and key != own]
        run_settings.update({key: {**base[key], "max_steps": 1} for key in later})
        run_settings[own] = {**base[own], "max_steps": steps}
    for key, sizes in (data or {}).items():
        run_settings[key] = {**base[key], **sizes}
    prepared = family.prepare_data(spec, scale, run_settings)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # the stored trajectories are a CPU's in one thread: on a GPU machine too, or every check would fail
        with tempfile.TemporaryDirectory(prefix="repro-fingerprint-") as tmp, use_device("cpu"):
            ctx = RunContext(
                spec=spec,
                row=row,
                config=row.config,
                scale=scale,
                settings=run_settings,
                seed=seed,
                workdir=Path(tmp),
                progress=False,
                results_root=Path(tmp) / "results",  # files a unit writes (test predictions) stay out of results/
                data=prepared,
            )
            outcome = family.run_row(ctx)
            lines = (Path(tmp) / stage / "train.jsonl").read_text(encoding="utf-8").splitlines()
    finally:
        torch.set_num_threads(threads)
    losses = [float(json.loads(line)["loss"]) for line in lines]
    if len(losses) < steps:
        raise ReproError(f"{spec.id} row {row.name!r}: training stopped after {len(losses)} of {steps} steps")
    metrics, split = dict(getattr(outcome, "metrics", {}) or {}), str(getattr(outcome, "split", ""))
    probe = {"split": split, "scores": {k: round(float(v), 4) for k, v in sorted(metrics.items())}}
    return losses[:steps], {**probe, "digest": probe_digest(metrics, split)}


def write(spec: Spec, scale: str, root: Path | None = None, on_row=None) -> Path:
    """Compute and store the fingerprints of a spec at a scale (`repro check ID --rerun --rebaseline`)."""
    config = _require(spec, scale)
    stored = {}
    for row in config["rows"]:
        losses, probe = fingerprint_run(spec, row, scale, config["steps"], stage=config["stage"], data=config["data"])
        stored[row.name] = {"steps": config["steps"], "seed": 0, "loss": losses, "probe": probe}
        if on_row:
            on_row(row.name)
    out = path_for(spec, scale, root or results_dir(scale))
    write_json_atomic(out, {"spec": spec.id, "scale": scale, "rows": stored})
    return out


def check(spec: Spec, scale: str, root: Path | None = None, on_row=None) -> list[FingerprintCheck]:
    """Train each fingerprinted row again for its steps and compare with the stored trajectory."""
    config = _require(spec, scale)
    path = path_for(spec, scale, root)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))["rows"]
    except FileNotFoundError:
        raise ReproError(
            f"{path}: no stored fingerprint; make one with `repro check {spec.id} --rerun --rebaseline --scale {scale}`"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReproError(f"{path}: unreadable fingerprint ({exc})") from None
    out = []
    for row in config["rows"]:
        if row.name not in stored:
            raise ReproError(f"{path}: no fingerprint for row {row.name!r}")
        expected = [float(x) for x in stored[row.name]["loss"]]
        seed = int(stored[row.name].get("seed", 0))
        got, probe = fingerprint_run(spec, row, scale, len(expected), seed, config["stage"], config["data"])
        diffs = [abs(g - e) / max(abs(e), 1e-12) for g, e in zip(got, expected)]
        worst = max(range(len(diffs)), key=diffs.__getitem__)
        kept = stored[row.name].get("probe")
        verdict = probe_verdict(kept, probe)
        out.append(
            FingerprintCheck(
                spec.id, row.name, scale, len(expected), diffs[worst], worst + 1, config["tolerance"], verdict
            )
        )
        if on_row:
            on_row(out[-1])
    return out


def _require(spec: Spec, scale: str) -> dict[str, Any]:
    config = settings(spec, scale)
    if config is None:
        raise ReproError(f"{spec.id} declares no fingerprint at scale {scale!r} (scales.{scale}.fingerprint)")
    return config
