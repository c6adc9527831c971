"""Timing records: a table's claims on a time column measured as interleaved ratios in one process.

`repro run ID --scale S --timing` measures, for every claim whose column has metric `time` ("row trains
faster than over"), both rows' optimisation steps at the timing sizes in one process (the family's
`Hooks.timed_step`), warmed up, then alternated in a balanced order (repro.nn.paired_timing), and writes one
record per claim:

    <results>/<paper>/<table-id>/timing/<row>--<over>--<column>[.<scale>].json

with the per-pair ratios t_row / t_over. The claim is judged from those ratios (repro.report.claims), never
from the rows' per-seed times, which were measured at different times under different loads. A record beside
the row records rather than a `compute` row: it belongs to a claim (two rows and a column), not to a row of
the table, and it must not add a line to the table; the row records and their seeds stay as they were.

The scale's `timing` settings: `pairs` (K, default 10), `pair_steps` (steps timed per model in a pair,
default 1), `pair_warmup` (steps of each model before the first pair, default 1), `equivalence` (δ: the
relative difference within which the two are called equivalent, default 0.05).
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.names import inside
from repro.specs import Claim, Spec, row_slug

PAIRS = 10  # K: ratios per claim unless the scale's `timing.pairs` says otherwise
EQUIVALENCE = 0.05  # δ: |ratio - 1| within 5% (|log ratio| < log 1.05) is "equivalent" unless `timing.equivalence`


def timed_claims(spec: Spec) -> list[Claim]:
    """The spec's claims on a time column."""
    return [c for c in spec.claims if spec.column(c.column).metric == "time"]


def timing_path(spec: Spec, claim: Claim, scale: str, root: Path | None = None) -> Path:
    from repro.paths import results_dir

    root = root or results_dir(scale)
    suffix = "" if scale == "paper" else f".{scale}"
    name = "--".join(row_slug(n) for n in (claim.row, claim.over, claim.column))
    return inside(root, spec.paper, spec.id, "timing", f"{name}{suffix}.json")


def read_timing(spec: Spec, claim: Claim, scale: str, root: Path | None = None) -> dict[str, Any] | None:
    """A claim's timing record at `scale` (None: none, or unreadable: warned), read where the scale's records
    are read (`repro.paths.results_read_dir`) unless `root` says otherwise."""
    from repro.paths import results_read_dir

    path = timing_path(spec, claim, scale, root or results_read_dir(scale))
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        ratios = record["ratios"]
        if not isinstance(ratios, list) or not ratios or not all(_positive(r) for r in ratios):
            raise ValueError("ratios must be a non-empty list of positive numbers")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        from repro.results import CorruptResult

        warnings.warn(f"{path}: unreadable timing record skipped ({exc})", CorruptResult, stacklevel=2)
        return None
    return record


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and x < float("inf")


def timing_settings(settings: dict[str, Any]) -> dict[str, Any]:
    timing = settings.get("timing") or {}
    out = {
        "pairs": int(timing.get("pairs", PAIRS)),
        "steps": int(timing.get("pair_steps", 1)),
        "warmup": int(timing.get("pair_warmup", 1)),
        "equivalence": float(timing.get("equivalence", EQUIVALENCE)),
    }
    if out["pairs"] < 2 or out["steps"] < 1 or out["warmup"] < 0 or not 0 < out["equivalence"] < 1:
        raise ReproError(
            f"timing settings need pairs >= 2, pair_steps >= 1, pair_warmup >= 0 and 0 < equivalence < 1; got {out}"
        )
    return out


def measure_claim(
    spec: Spec, claim: Claim, scale: str, settings: dict[str, Any], device: str | None = None
) -> dict[str, Any]:
    """One time claim's record: both rows' steps built by their family at the timing sizes, interleaved."""
    import torch

    from repro import families
    from repro.families.base import RunContext
    from repro.nn.paired_timing import interleaved_ratios
    from repro.results import git_commit, hardware

    column = spec.column(claim.column)
    how = timing_settings(settings)
    steps = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in (claim.row, claim.over):
            row = spec.row(name)
            hooks = families.for_row(row) if row.model is not None else None
            if hooks is None or hooks.timed_step is None:
                raise ReproError(f"{spec.id}: row {name!r} has no timed step (its family times no {column.name!r})")
            ctx = RunContext(spec, row, row.config, scale, settings, 0, Path(scratch), progress=False, device=device)
            steps[name] = hooks.timed_step(ctx, column)
        a, b = steps[claim.row], steps[claim.over]
        measured = interleaved_ratios(
            a, b, pairs=how["pairs"], steps=how["steps"], warmup=how["warmup"], device=a.device
        )
    return {
        "spec": spec.id,
        "paper": spec.paper,
        "scale": scale,
        "row": claim.row,
        "over": claim.over,
        "column": claim.column,
        "claim": claim.text,
        "method": "interleaved ratio",
        **measured,
        "pairs": how["pairs"],
        "pair_steps": how["steps"],
        "pair_warmup": how["warmup"],
        "equivalence": how["equivalence"],
        "design_hash": spec.design_hash(scale),  # the design its claim is judged under (repro.design)
        "info": {claim.row: a.info, claim.over: b.info},
        "device": str(a.device),
        "threads": torch.get_num_threads(),
        "git_commit": git_commit(),
        "hardware": hardware(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def run_timing(spec: Spec, scale: str, settings: dict[str, Any], device: str | None = None, echo=print) -> list[Path]:
    """Measure and write every time claim's record of `spec` at `scale`; the paths written."""
    from repro.utils import write_json_atomic

    claims = timed_claims(spec)
    if not claims:
        raise ReproError(f"{spec.id} has no claims on a time column: nothing to time")
    paths = []
    for claim in claims:
        record = measure_claim(spec, claim, scale, settings, device)
        path = timing_path(spec, claim, scale)
        write_json_atomic(path, record)
        paths.append(path)
        ratios = record["ratios"]
        echo(f"{claim.text}: {len(ratios)} interleaved ratios, median {sorted(ratios)[len(ratios) // 2]:.3f} -> {path}")
    return paths
