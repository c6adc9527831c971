"""The plan of a run, resolved once: from a spec, a scale and the options to the (row, seed) units.

`repro run ID` plans here. `make_plan` resolves each unit once into an immutable record (`Unit`): the
family hooks that run it, what decides its numbers (`resolved_config`, hashed into its record), its recipe
with the scale's overrides, its settings, the data it reads and whether that is on disk, its stored
result, its work and record paths, and what it asks a cluster for. The layers above read these records:
running the plan is `repro.launch`'s (`launch.local.execute` on this machine, `launch.slurm.submit` on a
cluster), showing it `repro.report.plan`'s; none of them looks a family, a configuration, a recipe or a
stored result up again. Rows with a `compute` mapping (model complexity, dataset statistics) run without
training. Everything about a paper goes through its family (repro.families): this module names none.

Scale settings come from the spec's `scales.<scale>` mapping:
  generator: parameters of the synthetic data generator (fixed before results are seen)
  sizes:     model sizes that override the paper's (d_model, layers, heads, ...)
  recipe:    overrides of the training recipe (epochs, batch_size, lr, ...)
  seeds:     the seeds to run; results report mean and standard deviation across them
  ensemble:  true: a row's seeds train together in one process (repro.train.ensemble), each recorded
             as its own unit; for families with `run_ensemble`, at the generated scales (on Slurm: one job)

A run with `key=value` overrides, `--limit` or a spec file of its own is a variant
(`repro.variants`): its overrides are applied once, when the spec is loaded (`repro.variants.load`),
and its records and checkpoints are kept apart from those of the spec as written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro import families
from repro.errors import ReproError
from repro.families.base import DataNeed, Hooks, Resources, RowRun, RunContext, default_resources
from repro.names import inside
from repro.results import SeedResult, config_hash, read_seed_results, seed_path
from repro.specs import Row, Spec, scale_settings, select_rows
from repro.variants import Variant

if TYPE_CHECKING:
    from repro.train.recipe import Recipe

ComputeFn = Callable[[RunContext], RowRun]


@dataclass(frozen=True)
class Unit:
    """One (row, seed) of a plan, resolved once by `make_plan`; what every launcher and report reads."""

    spec: Spec  # as the run sees it: a variant's overrides applied (repro.variants.resolve)
    scale: str
    row: Row
    seed: int
    kind: str  # "train" or "compute"
    hooks: Hooks | None  # the family that runs it (None while not implemented)
    task: ComputeFn | None  # a compute row's task (None: a training row, or a task not implemented)
    config: dict[str, Any]  # what decides its numbers (`resolved_config`), as its record keeps it
    config_hash: str  # `config_hash(hashed_config(config))`, as its record keeps it
    recipe: Recipe | None  # the spec's recipe with the scale's overrides (None: the rows train with no recipe)
    settings: dict[str, Any]  # the scale's settings, overrides applied, with the run's ensemble and device
    needs: tuple[DataNeed, ...]  # paper scale: what it reads, in the order a run asks for it
    missing: tuple[str, ...]  # paper scale: the commands of what it reads that is not on disk
    stored: SeedResult | None  # its record, when one is stored
    workdir: Path  # its checkpoints and logs (`unit_dir`)
    record: Path  # where its record goes (`repro.results.seed_path`)
    results_root: Path | None  # the root of the run's records (None: its scale's, repro.paths.results_dir)
    resources: Resources  # what one job of it asks a cluster for (its family's; `default_resources` without)
    variant: Variant = field(default_factory=Variant)  # what the run changes from the spec as written
    limit: int | None = None  # --limit N: the first N questions of each split
    design_hash: str = ""  # the hash of the spec's design its claims are judged under at this scale ("": none)

    @property
    def ready(self) -> bool:
        """Its family, or its compute task, is implemented."""
        return self.task is not None if self.kind == "compute" else self.hooks is not None

    def __getstate__(self) -> dict[str, Any]:
        """What a job is sent (a Slurm job pickles its units): the data needs without their on-disk checks, which
        are closures that do not pickle (psac's, ace-rpe's) and which a job, reading its data, does not use."""
        return {**self.__dict__, "needs": tuple(need._replace(ready=None) for need in self.needs)}

    def with_seed(self, seed: int) -> Unit:
        """The same row's unit of another seed (one an earlier run submitted): its own paths, no stored record."""
        return replace(
            self,
            seed=seed,
            stored=None,
            workdir=self.workdir.parent / f"seed{seed}",
            record=seed_path(self.spec, self.row, self.scale, seed, self.results_root),
        )

    def finished_now(self) -> str | None:
        """When the unit's record, as it is on disk now, says it finished (None: no record yet): how a launcher
        follows units that run elsewhere (Slurm jobs) after the plan was made."""
        record = read_seed_results(self.spec, self.row, self.scale, self.results_root).get(self.seed)
        return None if record is None else record.finished

    def evaluating(self, weights: dict[str, str], root: Path) -> Unit:
        """The unit as `repro run --weights` runs it: seed 0, evaluated from the checkpoints `weights` names (their
        record joins its configuration and hash), its record under `root` (results/weights/<source>/)."""
        config = {**self.config, "weights": weights}
        return replace(
            self,
            seed=0,
            config=config,
            config_hash=config_hash(hashed_config(config)),
            stored=None,
            workdir=self.workdir.parent / "seed0",
            record=seed_path(self.spec, self.row, self.scale, 0, root),
            results_root=root,
        )

    def context(self, *, resume: bool = False, progress: bool = True, data: Any = None) -> RunContext:
        """What the unit's process is given: the same in every process (pickled to workers and Slurm jobs)."""
        return RunContext(
            spec=self.spec,
            row=self.row,
            config=self.row.config,
            scale=self.scale,
            settings=self.settings,
            seed=self.seed,
            workdir=self.workdir,
            resume=resume,
            progress=progress,
            limit=self.limit,
            results_root=self.results_root,
            data=data,
            device=self.settings.get("device"),
            hooks=self.hooks,
            task=self.task,
            base_recipe=self.recipe,
        )


@dataclass(frozen=True)
class Step:
    """One row of a plan: its units (one per seed) and what the plan shows of it."""

    row: Row
    kind: str  # "train" or "compute"
    units: tuple[Unit, ...]
    detail: str
    hooks: Hooks | None = None
    family: str | None = None  # the paper id of the family that builds its model (None: no model)
    gpu_hours: float | None = None
    ready: bool = True  # False while the row's family or compute task is not implemented
    stages: tuple[tuple[str, str, float | None], ...] = ()  # (name, what, GPU-hours)
    # paper scale: the download and prepare commands of what the row reads that is not on disk (): all there)
    missing: tuple[str, ...] = ()
    unsupported: str | None = None  # paper scale: why the row does not run there (its family's refusal)
    limited: bool = False  # --limit N: gpu_hours counts only the first N questions of each split (the family's share)
    stored: Mapping[int, SeedResult] = field(default_factory=dict)  # every stored seed of the row, run or not

    @property
    def seeds(self) -> list[int]:
        return [unit.seed for unit in self.units]


@dataclass(frozen=True)
class Plan:
    spec: Spec  # as the run sees it: a variant's overrides applied
    scale: str
    rows: tuple[Row, ...]
    steps: tuple[Step, ...] = ()
    data: tuple[str, ...] = ()
    needs: tuple[DataNeed, ...] = ()  # paper scale: every row's, in order, each once
    settings: dict[str, Any] = field(default_factory=dict)  # the scale's settings, overrides applied
    variant: Variant = field(default_factory=Variant)
    workdir: Path = Path("runs")  # the root of the units' checkpoints and logs (absolute)
    recipe: Recipe | None = None  # the spec's recipe with the scale's overrides (None: no recipe, or no training)
    written_recipe: Recipe | None = None  # the spec's recipe as its file says

    @property
    def results_root(self) -> Path | None:
        return self.variant.results_root()

    @property
    def units(self) -> tuple[Unit, ...]:
        """Every (row, seed) of the plan, row by row."""
        return tuple(unit for step in self.steps for unit in step.units)


def unit_dir(workdir: Path, spec: Spec, scale: str, row: Row, seed: int, variant: Variant | None = None) -> Path:
    """A unit's checkpoints and logs; a variant's are kept apart from the spec's own."""
    if variant is not None and not variant.empty:
        workdir = inside(workdir, "variants", variant.name)
    return inside(workdir, spec.id, scale, row.slug, f"seed{seed}")


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


def _paper_needs(
    spec: Spec, row: Row, hooks: Hooks, seen: dict[tuple, list[str]]
) -> tuple[tuple[DataNeed, ...], tuple[str, ...], str | None]:
    """A paper-scale row's data: what it reads, the commands of what of it is not on disk (`seen`: those of the
    needs looked at so far), and None; or, where its family does not run it at paper scale, why."""
    try:
        row_needs = hooks.paper_data(spec, row)
    except ReproError as exc:
        return (), (), str(exc)
    missing: list[str] = []
    for need in row_needs:
        key = (need.dataset, need.prepare, row.name if need.ready is not None else None)
        if key not in seen:
            seen[key] = need_missing(need)
        missing += [c for c in seen[key] if c not in missing]
    return tuple(row_needs), tuple(missing), None


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
    *,
    workdir: Path | None = None,
    ensemble: bool | None = None,
    device: str | None = None,
) -> Plan:
    """The run's (row, seed) units, each resolved once (the module's docstring says into what). `spec` is as
    `repro.variants.load` gives it, the variant's overrides applied; `workdir` is the root of the checkpoints
    and logs (default `$REPRO_DATA_DIR/runs`). `ensemble` and `device` say how and where the units run, not what
    they compute: they join the settings, never a unit's configuration."""
    from repro.paths import data_dir

    variant = variant or Variant()
    if variant.overrides != spec.overrides:  # a programming error: the overrides are applied when the spec is loaded
        raise ValueError(f"plan the spec with the variant's overrides applied (repro.variants.resolve): {variant.name}")
    settings = dict(scale_settings(spec, scale))
    rows = select_rows(spec, row_names)
    from repro.variants import check_spec_settings

    hooks_of = {row.name: families.for_row(row) for row in rows}  # once per row: every unit of the row carries it
    check_spec_settings(spec, scale, settings, rows, hooks_of)  # as an override is checked, with the spec's file:line
    if variant.limit is not None:
        _check_limit(scale, variant.limit)
    if ensemble is not None:  # how seeds are scheduled, not what they compute
        settings["ensemble"] = ensemble
    if device not in (None, "auto"):  # where units run, not what they compute
        settings["device"] = device
    seeds = seeds if seeds is not None else list(settings.get("seeds", [0]))
    precision = override_precision(settings)  # the GPU-hours at it where an estimate comes from FLOPs
    workdir = Path(workdir or data_dir() / "runs").absolute()
    trains = any(r.model is not None for r in rows)
    written = families.load_recipe(spec.recipe) if spec.recipe and trains else None
    recipe = written.replace(**settings.get("recipe", {})) if written is not None else None
    root = variant.results_root()
    seen: dict[tuple, list[str]] = {}
    needs: list[DataNeed] = []
    steps = []
    left_out: list[str] = []  # rows their family runs at paper scale only, not named: left out, said in `data`
    for row in rows:
        hooks = hooks_of[row.name]
        if variant.limit is not None and (row.compute is not None or hooks is None or not hooks.supports_limit):
            raise ReproError(f"{spec.id} row {row.name!r}: --limit is not supported by the code that runs it")
        elsewhere = hooks.not_at_scale(row.config, scale) if hooks is not None and row.compute is None else None
        if elsewhere:  # a row its family runs at paper scale only: refused when named, else left out
            if row_names:
                raise ReproError(f"{spec.id} row {row.name!r} does not run at scale {scale}: {elsewhere}")
            left_out.append(f"{row.name}: not run at scale {scale}: {elsewhere}")
            continue
        facts: dict[str, Any] = {}
        task, row_needs, missing = None, (), ()
        if row.compute is not None:
            task = compute_task(row, spec.paper, hooks)
            kind, detail, unit_seeds, ready = "compute", row.compute["task"], [0], task is not None
        else:
            kind, unit_seeds, ready = "train", list(seeds), hooks is not None
            detail = f"{spec.recipe or '(no recipe)'}: {row.config.model_dump_json(exclude_defaults=True)}"
            if hooks is not None and scale == "paper":
                facts["gpu_hours"] = hooks.gpu_hours(row.config, precision=precision)
                # a family whose unit trains in several stages (pre-training, then fine-tuning) lists them
                stages = tuple(hooks.stages(row.config, spec, precision=precision))
                if stages:
                    facts["stages"] = stages
                    facts["gpu_hours"] = None if any(h is None for *_, h in stages) else sum(h for *_, h in stages)
                elif variant.limit is not None and hooks.limited_hours is not None and facts["gpu_hours"] is not None:
                    hours = hooks.limited_hours(row.config, variant.limit, precision=precision)
                    facts["gpu_hours"], facts["limited"] = hours, True
                row_needs, missing, facts["unsupported"] = _paper_needs(spec, row, hooks, seen)
                for need in row_needs:  # each once, in order
                    if not any(n[:2] == need[:2] for n in needs):
                        needs.append(need)
        row_recipe = recipe if row.model is not None else None
        config = resolved_config(spec, row, scale, settings, variant, recipe=row_recipe)
        resources = hooks.unit_resources(row.config, scale) if hooks is not None else default_resources(scale, None)
        stored = read_seed_results(spec, row, scale, root)
        common = dict(
            spec=spec,
            scale=scale,
            row=row,
            kind=kind,
            hooks=hooks,
            task=task,
            config=config,
            config_hash=config_hash(hashed_config(config)),
            recipe=row_recipe,
            settings=settings,
            needs=row_needs,
            missing=missing,
            results_root=root,
            resources=resources,
            variant=variant,
            limit=variant.limit,
            design_hash=spec.design_hash(scale),
        )
        units = tuple(
            Unit(
                seed=seed,
                stored=stored.get(seed),
                workdir=unit_dir(workdir, spec, scale, row, seed, variant),
                record=seed_path(spec, row, scale, seed, root),
                **common,
            )
            for seed in unit_seeds
        )
        family = families.by_arch(row.config.arch).paper if row.config is not None else None
        steps.append(
            Step(row, kind, units, detail, hooks, family, ready=ready, missing=missing, stored=stored, **facts)
        )
    data: list[str] = []
    if trains:
        if scale == "paper":
            data = data_commands(spec)
        else:
            generator = ", ".join(f"{k}={v}" for k, v in (settings.get("generator") or {}).items())
            data = [f"generated {scale} data for {', '.join(spec.datasets)} ({generator or 'defaults'})"]
    data += left_out
    if scale == "paper" and trains:
        family = families.implementation(families.by_paper(spec.paper))
        if needs:
            data = _data_lines(needs, seen)
        if family is not None:
            data += family.data_notes(spec)
    return Plan(
        spec=spec,
        scale=scale,
        rows=tuple(rows),
        steps=tuple(steps),
        data=tuple(data),
        needs=tuple(needs),
        settings=settings,
        variant=variant,
        workdir=workdir,
        recipe=recipe,
        written_recipe=written,
    )


def override_precision(settings: dict[str, Any]) -> str | None:
    """The precision a scale's settings or a `recipe.precision=` override set, else None (each recipe's own)."""
    precision = (settings.get("recipe") or {}).get("precision")
    return None if precision in (None, "auto") else precision


def _check_limit(scale: str, limit: int) -> None:
    """--limit N: a quick, partial look at real data; only families that read `RunContext.limit` take it (each
    row's family is asked as the row is planned)."""
    if limit < 1:
        raise ReproError(f"--limit must be at least 1, not {limit}")
    if scale != "paper":
        raise ReproError(f"--limit is for paper-scale data; at scale {scale} the data is generated (try --scale smoke)")


# --- what runs a row ------------------------------------------------------------------------------


def compute_task(row: Row, paper: str, hooks: Hooks | None) -> ComputeFn | None:
    """Rows with `compute:` run a task without training: `complexity` (any family's model, generic; `hooks`: the
    family of the row's model), or one the spec's family lists in its `compute_tasks` (e.g. dataset statistics);
    None while not implemented."""
    task = row.compute.get("task") if row.compute else None
    if task == "complexity":
        if row.config is None or hooks is None:
            return None
        from repro.complexity import run_complexity

        return run_complexity
    family = families.implementation(families.by_paper(paper))
    return family.compute_tasks.get(task) if family is not None else None


def resolved_config(
    spec: Spec,
    row: Row,
    scale: str,
    settings: dict[str, Any],
    variant: Variant | None = None,
    recipe: Recipe | None = None,
) -> dict[str, Any]:
    """Everything that decides what a unit computes, except its seed: hashed into `config_hash`. `recipe`: the
    spec's recipe with the scale's overrides, when the caller has it (else it is loaded here)."""
    resolved = None
    if spec.recipe and row.model is not None:
        full = (recipe or families.load_recipe(spec.recipe).replace(**settings.get("recipe", {}))).to_json()
        resolved = {k: v for k, v in full.items() if k not in ("path", "description", "seed")}
    return {
        "spec": spec.id,
        "row": row.name,
        "scale": scale,
        "model": row.config.model_dump(mode="json") if row.config is not None else None,
        "compute": row.compute,
        "recipe": resolved,
        "settings": {
            k: v
            for k, v in settings.items()
            if k not in ("seeds", "jobs", "ensemble", "device", "tolerance", "fingerprint")
        },
        **({"variant": variant.to_json()} if variant is not None and not variant.empty else {}),
    }


def config_hashes_now(spec: Spec, scale: str) -> dict[str, str]:
    """{row name: the configuration hash `repro run` gives the row's units at `scale` now}, for the spec's trained
    and computed rows (as `make_plan` resolves them, without a variant): what a stored record made under settings
    the spec no longer has differs from (`repro check` notes it; `repro table` says so under the table)."""
    settings = dict(scale_settings(spec, scale))
    trains = any(r.model is not None for r in spec.rows)
    recipe = families.load_recipe(spec.recipe).replace(**settings.get("recipe", {})) if spec.recipe and trains else None
    return {
        row.name: config_hash(
            hashed_config(resolved_config(spec, row, scale, settings, recipe=recipe if row.model is not None else None))
        )
        for row in spec.rows
        if row.runnable
    }


def hashed_config(config: dict[str, Any]) -> dict[str, Any]:
    """What `config_hash` hashes of a `resolved_config`: all of it, except that a recipe's `precision: fp32` is
    hashed as `auto`, the value every recipe gave before the recipes stated their paper's precision (the committed
    units trained on CPUs, where `auto` was fp32), `accumulate: 1` (one pass a step, as every unit trained before
    the recipes had the key) and the claims' timing settings (`CLAIM_TIMING_KEYS`) are left out, so the units
    trained before keep their hash and new seeds pool with them."""
    recipe = config.get("recipe")
    if isinstance(recipe, dict) and recipe.get("precision") == "fp32":
        config = {**config, "recipe": {**recipe, "precision": "auto"}}
    recipe = config.get("recipe")
    if isinstance(recipe, dict) and recipe.get("accumulate") == 1:
        config = {**config, "recipe": {k: v for k, v in recipe.items() if k != "accumulate"}}
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
