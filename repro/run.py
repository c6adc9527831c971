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
from repro.families.base import DataNeed, RowRun, RunContext
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
    # paper scale: the download and prepare commands of what the row reads that is not on disk ([]: all there)
    missing: list[str] = field(default_factory=list)
    unsupported: str | None = None  # paper scale: why the row does not run there (its family's refusal)
    limited: bool = False  # --limit N: gpu_hours counts only the first N questions of each split (the family's share)


@dataclass
class Plan:
    spec: Spec
    scale: str
    rows: list[Row]
    steps: list[Step] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    needs: list[DataNeed] = field(default_factory=list)  # paper scale: every row's, in order, each once
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
        twice = sorted({r.name for r in rows if sum(o.name == r.name for o in rows) > 1})
        if twice:  # one unit planned twice would be trained twice at once in one folder
            raise ReproError(f"--rows names {', '.join(map(repr, twice))} more than once: {', '.join(names)}")
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


CLAIM_SEEDS = 3  # seeds per row a claim is judged on when the spec names none at paper scale


def claim_seeds(spec: Spec) -> int:
    """How many seeds per row judging the spec's claims needs: its paper-scale `seeds`, else CLAIM_SEEDS."""
    seeds = (spec.scales.get("paper") or {}).get("seeds")
    return len(seeds) if seeds else CLAIM_SEEDS


def need_commands(need: DataNeed) -> list[str]:
    """`repro download DATASET`, then `repro prepare PREPARE` where the need has one."""
    return [f"repro download {need.dataset}"] + ([f"repro prepare {need.prepare}"] if need.prepare else [])


def size_text(dataset: str) -> str:
    """The catalog's size of a download: `42.0 GB`, `at least 1.2 GB` where some files give none, or `size unknown`."""
    from repro.data.catalog import load_catalog

    entry = load_catalog().get(dataset)
    if entry is None:
        return "not in the catalog"
    sizes = [f.expected_bytes for f in entry.files]
    known = sum(s for s in sizes if s is not None)
    if not sizes or not known:
        return "size unknown"
    text = f"{known / 1e9:.1f} GB" if known >= 1e8 else f"{known / 1e6:.1f} MB"
    return text if all(s is not None for s in sizes) else f"at least {text}"


def downloaded(dataset: str) -> bool:
    """Every file the catalog lists for `dataset` is in its folder of the data folder (none missing or partial)."""
    from repro.data.catalog import load_catalog
    from repro.data.download import dataset_status
    from repro.paths import data_dir

    entry = load_catalog().get(dataset)
    if entry is None or not entry.files:
        return False
    return all(s.state in ("verified", "present") for s in dataset_status(entry, data_dir()))


def prepared(target: str) -> bool:
    """`repro prepare TARGET` has written its output: a prepared dataset's manifest, or a feature store's meta."""
    from repro.datasets.prepare import feature_store_dir, prepared_dir

    name = target.split()[0]
    if (prepared_dir(name) / "manifest.json").is_file():
        return True
    stores = feature_store_dir(name)
    return stores.is_dir() and any((store / "meta.json").is_file() for store in stores.glob("*.store"))


def need_missing(need: DataNeed) -> list[str]:
    """The commands of `need` whose output is not on disk ([]: ready)."""
    if need.ready is not None:
        return [] if need.ready() else need_commands(need)
    missing = [] if downloaded(need.dataset) else [f"repro download {need.dataset}"]
    if need.prepare and not prepared(need.prepare):
        missing.append(f"repro prepare {need.prepare}")
    return missing


def _paper_needs(step: Step, spec: Spec, hooks, plan: Plan, seen: dict[tuple, list[str]]) -> None:
    """A paper-scale step's data: its needs added to the plan's (each once, in order), its `missing` commands
    (`seen`: those of the needs looked at so far), or why its family does not run it at paper scale."""
    try:
        row_needs = hooks.paper_data(spec, step.row)
    except ReproError as exc:
        step.unsupported = str(exc)
        return
    for need in row_needs:
        key = (need.dataset, need.prepare, step.row.name if need.ready is not None else None)
        if not any(n[:2] == need[:2] for n in plan.needs):
            plan.needs.append(need)
        if key not in seen:
            seen[key] = need_missing(need)
        step.missing += [c for c in seen[key] if c not in step.missing]


def _data_lines(needs: list[DataNeed], seen: dict[tuple, list[str]]) -> list[str]:
    """One numbered line per need, in order: its download with the catalog's size (the first time the
    dataset comes up), then its prepare command; `missing` where some row lacks it, else `ready`."""
    lines, listed = [], set()
    for need in needs:
        missing = any(seen[k] for k in seen if k[:2] == need[:2])
        parts = [] if need.dataset in listed else [f"`repro download {need.dataset}` ({size_text(need.dataset)})"]
        parts += [f"`repro prepare {need.prepare}`"] if need.prepare else []
        listed.add(need.dataset)
        lines.append(f"{len(lines) + 1}. {' then '.join(parts)}: {'missing' if missing else 'ready'}")
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
    from repro.variants import check_spec_settings

    check_spec_settings(spec, scale, settings, rows)  # as an override would be checked, with the spec's file:line
    if variant.overrides:
        from repro.variants import apply

        settings, rows = apply(spec, scale, settings, rows, variant.overrides)
    if variant.limit is not None:
        _check_limit(spec, scale, rows, variant.limit)
    seeds = seeds if seeds is not None else list(settings.get("seeds", [0]))
    plan = Plan(spec=spec, scale=scale, rows=rows, settings=settings, variant=variant)
    seen: dict[tuple, list[str]] = {}
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
        elsewhere = hooks.not_at_scale(row.config, scale) if hooks is not None else None
        if elsewhere:  # a row its family runs at paper scale only: refused when named, else left out
            if row_names:
                raise ReproError(f"{spec.id} row {row.name!r} does not run at scale {scale}: {elsewhere}")
            plan.data.append(f"{row.name}: not run at scale {scale}: {elsewhere}")
            continue
        gpu = hooks.gpu_hours(row.config) if hooks is not None and scale == "paper" else None
        detail = f"{spec.recipe or '(no recipe)'}: {row.config.model_dump_json(exclude_defaults=True)}"
        step = Step(row, "train", list(seeds), detail, gpu, ready=hooks is not None)
        if hooks is not None and scale == "paper":
            # a family whose unit trains in several stages (pre-training, then fine-tuning) lists them
            step.stages = hooks.stages(row.config, spec)
            if step.stages:
                step.gpu_hours = None if any(h is None for *_, h in step.stages) else sum(h for *_, h in step.stages)
            elif variant.limit is not None and hooks.limited_hours is not None and gpu is not None:
                step.gpu_hours, step.limited = hooks.limited_hours(row.config, variant.limit), True
            _paper_needs(step, spec, hooks, plan, seen)
        plan.steps.append(step)
    if scale == "paper" and any(r.model for r in rows):
        hooks = families.implementation(families.by_paper(spec.paper))
        if plan.needs:
            plan.data = _data_lines(plan.needs, seen)
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
            k: v
            for k, v in settings.items()
            if k not in ("seeds", "jobs", "ensemble", "device", "tolerance", "fingerprint")
        },
        **({"variant": variant.to_json()} if variant is not None and not variant.empty else {}),
    }


def hashed_config(config: dict[str, Any]) -> dict[str, Any]:
    """What `config_hash` hashes of a `resolved_config`: all of it, except that a recipe's `precision: fp32` is
    hashed as `auto`, the value every recipe gave before the recipes stated their paper's precision (the committed
    units trained on CPUs, where `auto` was fp32), and the claims' timing settings (`CLAIM_TIMING_KEYS`) are left
    out, so the units trained before keep their hash and new seeds pool with them."""
    recipe = config.get("recipe")
    if isinstance(recipe, dict) and recipe.get("precision") == "fp32":
        config = {**config, "recipe": {**recipe, "precision": "auto"}}
    timing = (config.get("settings") or {}).get("timing")
    if isinstance(timing, dict) and CLAIM_TIMING_KEYS & set(timing):  # the claims' timing run's, not the unit's
        kept = {k: v for k, v in timing.items() if k not in CLAIM_TIMING_KEYS}
        config = {**config, "settings": {**config["settings"], "timing": kept}}
    return config


# the scale's `timing` settings of `repro run --timing` (repro.timing): they decide no unit's numbers
CLAIM_TIMING_KEYS = frozenset({"pairs", "pair_steps", "pair_warmup", "equivalence"})


def format_hours(hours: float | None) -> str:
    if hours is None or math.isnan(hours):
        return "?"
    return f"{hours:.1f}"
