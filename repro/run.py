"""The plan of a run: from a spec, a scale and the options to the (row, seed) units and what they need.

`repro run ID` plans here: which rows run, with which seeds and settings, what data they read, what
they cost at paper scale, and what decides a unit's numbers (`resolved_config`, hashed into its
record). Running the plan is `repro.launch`'s: `launch.local.execute` (this machine) and
`launch.slurm.submit` (a cluster), both over the units of `launch.units`. Rows with a `compute`
mapping (model complexity, dataset statistics) run without training. Everything about a paper goes
through its family (repro.families): this module names none.

Scale settings come from the spec's `scales.<scale>` mapping:
  generator: parameters of the synthetic data generator (fixed before results are seen)
  sizes:     model sizes that override the paper's (d_model, layers, heads, ...)
  recipe:    overrides of the training recipe (epochs, batch_size, lr, ...)
  seeds:     the seeds to run; results report mean and standard deviation across them
  ensemble:  true: a row's seeds train together in one process (repro.train.ensemble), each recorded
             as its own unit; for families with `run_ensemble`, at the generated scales (on Slurm: one job)

A run with `key=value` overrides, `--limit` or a spec file of its own is a variant
(`repro.variants`): its settings and rows are changed and checked before anything runs, and its
records and checkpoints are kept apart from those of the spec as written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import families
from repro.errors import ReproError
from repro.families.base import RowRun, RunContext
from repro.specs import Row, Spec
from repro.variants import Variant


@dataclass
class Step:
    row: Row
    kind: str  # "train" or "compute"
    seeds: list[int]
    detail: str
    gpu_hours: float | None = None
    ready: bool = True  # False while the row's family or compute task is not implemented
    stages: list[tuple[str, str, float | None]] = field(default_factory=list)  # (name, what, GPU-hours)


@dataclass
class Plan:
    spec: Spec
    scale: str
    rows: list[Row]
    steps: list[Step] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the scale's settings, overrides applied
    variant: Variant = field(default_factory=Variant)

    @property
    def results_root(self) -> Path | None:
        return self.variant.results_root()


def scale_settings(spec: Spec, scale: str) -> dict[str, Any]:
    if scale == "paper":
        return {}
    if scale not in spec.scales:
        runnable = ", ".join(sorted(spec.scales)) or "none"
        raise ReproError(
            f"{spec.id} has no settings for scale {scale!r} (scales it defines: {runnable}); "
            f"add `scales: {{{scale}: ...}}` to {spec.path}"
        )
    return spec.scales[scale]


def select_rows(spec: Spec, names: list[str] | None) -> list[Row]:
    if not names:
        rows = list(spec.runnable_rows)
    else:
        rows = [spec.row(n.strip()) for n in names if n.strip()]
        for row in rows:
            if row.cited:
                raise ReproError(f"row {row.name!r} of {spec.id} is cited from {row.cited}: it is shown, never run")
    if not rows:
        raise ReproError(f"{spec.id} has no runnable rows")
    return rows


def data_commands(spec: Spec) -> list[str]:
    """The commands that fetch and prepare a spec's datasets at paper scale (each one a catalog name)."""
    from repro.datasets.prepare import TARGETS

    lines = []
    for name in spec.datasets:
        prepare = f" then `repro prepare {name}`" if name in TARGETS else ""
        lines.append(f"{name}: `repro download {name}`{prepare}")
    return lines


def make_plan(
    spec: Spec,
    scale: str,
    row_names: list[str] | None = None,
    seeds: list[int] | None = None,
    variant: Variant | None = None,
) -> Plan:
    variant = variant or Variant()
    settings = scale_settings(spec, scale)
    rows = select_rows(spec, row_names)
    if variant.overrides:
        from repro.variants import apply

        settings, rows = apply(spec, scale, settings, rows, variant.overrides)
    if variant.limit is not None:
        _check_limit(spec, scale, rows, variant.limit)
    seeds = seeds if seeds is not None else list(settings.get("seeds", [0]))
    plan = Plan(spec=spec, scale=scale, rows=rows, settings=settings, variant=variant)
    if any(r.model for r in rows):
        if scale == "paper":
            plan.data = data_commands(spec)
        else:
            generator = ", ".join(f"{k}={v}" for k, v in (settings.get("generator") or {}).items())
            plan.data = [f"generated {scale} data for {', '.join(spec.datasets)} ({generator or 'defaults'})"]
    for row in rows:
        if row.compute is not None:
            ready = compute_task(row, spec.paper) is not None
            plan.steps.append(Step(row, "compute", [0], row.compute["task"], ready=ready))
            continue
        hooks = families.for_row(row)
        gpu = hooks.gpu_hours(row.config) if hooks is not None and scale == "paper" else None
        detail = f"{spec.recipe or '(no recipe)'}: {row.config.model_dump_json(exclude_defaults=True)}"
        step = Step(row, "train", list(seeds), detail, gpu, ready=hooks is not None)
        if hooks is not None and scale == "paper":
            # a family whose unit trains in several stages (pre-training, then fine-tuning) lists them
            step.stages = hooks.stages(row.config, spec)
            if step.stages:
                step.gpu_hours = None if any(h is None for *_, h in step.stages) else sum(h for *_, h in step.stages)
        plan.steps.append(step)
    if scale == "paper" and any(r.model for r in rows):
        hooks = families.implementation(families.by_paper(spec.paper))
        if hooks is not None:
            plan.data += hooks.data_notes(spec)
    return plan


def _check_limit(spec: Spec, scale: str, rows: list[Row], limit: int) -> None:
    """--limit N: a quick, partial look at real data; only families that read `RunContext.limit` take it."""
    if limit < 1:
        raise ReproError(f"--limit must be at least 1, not {limit}")
    if scale != "paper":
        raise ReproError(f"--limit is for paper-scale data; at scale {scale} the data is generated (try --scale smoke)")
    for row in rows:
        hooks = families.for_row(row)
        if row.compute is not None or hooks is None or not hooks.supports_limit:
            raise ReproError(f"{spec.id} row {row.name!r}: --limit is not supported by the code that runs it")


# --- what runs a row ------------------------------------------------------------------------------

ComputeFn = Callable[[RunContext], RowRun]


def compute_task(row: Row, paper: str) -> ComputeFn | None:
    """Rows with `compute:` run a task without training: `complexity` (any family's model, generic), or one
    the spec's family lists in its `compute_tasks` (e.g. dataset statistics); None while not implemented."""
    task = row.compute.get("task") if row.compute else None
    if task == "complexity":
        if row.config is None or families.for_row(row) is None:
            return None
        from repro.complexity import run_complexity

        return run_complexity
    hooks = families.implementation(families.by_paper(paper))
    return hooks.compute_tasks.get(task) if hooks is not None else None


def resolved_config(
    spec: Spec, row: Row, scale: str, settings: dict[str, Any], variant: Variant | None = None
) -> dict[str, Any]:
    """Everything that decides what a unit computes, except its seed: hashed into `config_hash`."""
    recipe = None
    if spec.recipe and row.model is not None:
        resolved = families.load_recipe(spec.recipe).replace(**settings.get("recipe", {})).to_json()
        recipe = {k: v for k, v in resolved.items() if k not in ("path", "description", "seed")}
    return {
        "spec": spec.id,
        "row": row.name,
        "scale": scale,
        "model": row.config.model_dump(mode="json") if row.config is not None else None,
        "compute": row.compute,
        "recipe": recipe,
        "settings": {
            k: v for k, v in settings.items() if k not in ("seeds", "jobs", "ensemble", "tolerance", "fingerprint")
        },
        **({"variant": variant.to_json()} if variant is not None and not variant.empty else {}),
    }


def format_hours(hours: float | None) -> str:
    if hours is None or math.isnan(hours):
        return "?"
    return f"{hours:.1f}"
