"""What the generic layers ask of a family, and the shared part of running one.

A family's `family.py` ends with `HOOKS = Hooks(...)`: the typed interface below, its required members
first, the optional ones with their defaults. The family table (`repro.families`) reads it; nothing else
imports a `family.py`. `RunContext` carries what one (row, seed) unit needs, with the shared services
(its recipe, its prediction files, the data prepared once per run); `train_units` trains a row's seeds,
one alone or several together, and scores each: a family writes only how to read its splits, build its
model and score it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, NamedTuple

from repro.errors import ReproError
from repro.names import inside
from repro.specs import Row, Spec
from repro.utils import same_type


class GeneratorSettings:
    """Base of a family's synthetic generator config (a frozen dataclass): read from the spec's
    `scales.<scale>.generator` mapping, unknown keys refused; `key()` names the generated data's folder. Every
    setting is of its default's kind and in range (`_in_range`): a seed in 0..MAX_SEED, a count whose default is
    positive at least 1, no integer above MAX_COUNT, every number finite, none negative."""

    @classmethod
    def from_mapping(cls, data: dict | None):
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ReproError(
                f"unknown synthetic generator setting(s) {', '.join(map(str, unknown))}; "
                f"known: {', '.join(sorted(known))}"
            )
        defaults = {f.name: f.default for f in fields(cls)}
        for name, value in data.items():
            try:
                if value is None and defaults[name] is not None:
                    raise ReproError("needs a value (null leaves it unset)")
                same_type(_example(cls, name, defaults[name]), value)
                _in_range(name, value, defaults[name])
            except ReproError as exc:
                raise ReproError(f"synthetic generator setting {name}: {exc}") from None
        config = cls(**data)
        config.check()
        return config

    def check(self) -> None:
        """Range checks across fields; a family's generator overrides it where it has some."""

    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def _example(cls: type, name: str, default: Any) -> Any:
    """A value of the kind setting `name` takes: its default, or for a default of None (`position_noise: float |
    None`) a value of its declared type."""
    if default is not None:
        return default
    import typing

    kinds = [k for k in typing.get_args(typing.get_type_hints(cls).get(name)) if k is not type(None)]
    return kinds[0]() if len(kinds) == 1 and kinds[0] in (int, float, str, bool) else None


MAX_COUNT = 10**8  # more images, videos or items than a generator could make on any machine
SHARES = ("probability", "_error", "_share", "_change")  # settings that are probabilities or shares, in 0..1


def _in_range(name: str, value: Any, default: Any) -> None:
    from repro.specs import MAX_SEED

    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        if not math.isfinite(item) or item < 0:
            raise ReproError(f"must be a finite number, 0 or more, got {item!r}")
        if name == "seed" and item > MAX_SEED:
            raise ReproError(f"a seed is an integer in 0..{MAX_SEED}")
        if name != "seed" and item > MAX_COUNT:
            raise ReproError(f"at most {MAX_COUNT:,}")
        if name.endswith(SHARES) and item > 1:
            raise ReproError(f"is a probability or share, 0..1, got {item!r}")
    if isinstance(default, int) and not isinstance(default, bool) and default >= 1 and value == 0:
        raise ReproError("must be at least 1 (a count of 0 generates nothing)")


@dataclass(frozen=True)
class Resources:
    """What one (row, seed) unit asks a cluster for: one job of `repro run --launcher slurm`, on one node."""

    gpus: int = 1  # more than one: the unit runs under torchrun, one process per GPU
    cpus: int = 8  # per job (data loading and the main process)
    mem_gb: int = 64
    hours: float = 24.0  # expected wall time of the whole unit; jobs longer than a partition allows requeue

    def describe(self) -> str:
        return f"{self.gpus} GPU(s), {self.cpus} CPUs, {self.mem_gb} GB, ~{self.hours:g} h"


def default_resources(scale: str, gpu_hours: float | None) -> Resources:
    """One GPU at paper scale for the family's GPU-hours with a quarter to spare (a day when unknown); two
    CPUs and a few GB for an hour at the generated scales."""
    if scale != "paper":
        return Resources(gpus=0, cpus=2, mem_gb=4, hours=1.0)
    return Resources(hours=24.0 if gpu_hours is None else max(1.0, math.ceil(1.25 * gpu_hours)))


def share_of_hours(hours: float | None, share: float) -> float | None:
    """A `limited_hours` estimate: the whole run's GPU-hours times the share of its training questions a run on
    the first N trains on (at most all of them); the epochs stay the same. None stays None."""
    return None if hours is None else hours * min(1.0, share)


@dataclass(frozen=True)
class RunContext:
    """Everything one (row, seed) unit needs; built by `repro.run`, the same in every process."""

    spec: Spec
    row: Row
    config: Any  # the row's typed model config
    scale: str  # "paper", "synthetic" or "smoke"
    settings: dict[str, Any]  # the spec's scales.<scale> mapping (generator, sizes, recipe, seeds)
    seed: int
    workdir: Path
    resume: bool = False
    progress: bool = True
    limit: int | None = None  # --limit N: use the first N questions of each split (families with supports_limit)
    results_root: Path | None = None  # where this run's files go; None: its scale's (repro.paths.results_dir)
    data: Any = None  # what the family's `prepare_data` returned: called once per run, before any unit
    device: str | None = None  # `--device`: auto (None), cpu, cuda or cuda:N; the trainer moves models and batches
    # `repro run --weights`: no training; the row's model is built from this checkpoint (a repro.weights.WeightsSource,
    # its sha256 read) through the family's key map, then evaluated as a trained one would be
    weights: Any = None
    # what the plan resolved for the unit (repro.run.Unit): its family's hooks (pickled by name, `Hooks.__reduce__`),
    # a compute row's task, and the spec's recipe with the scale's overrides; None in a context built by hand
    hooks: Hooks | None = None
    task: Callable[[RunContext], RowRun] | None = None
    base_recipe: Any = None
    # one of the unit's parts (`Hooks.parts`: psac's tasks at paper scale) trained by a cluster job of its own, which
    # stores what it scored for the unit's own job to read; None: the whole unit
    part: str | None = None

    @property
    def generated(self) -> bool:
        """True at the scales whose data the toolkit generates (everything but paper)."""
        return self.scale != "paper"

    def recipe(self, name: str | None = None, overrides: Mapping[str, Any] | None = None, **fixed: Any):
        """The recipe this unit trains with: `name` (default the spec's), the scale's `recipe:` overrides (or
        `overrides`), the unit's seed, then `fixed` (what the family's protocol sets whatever the spec says). A
        `recipe.precision=` override reaches every recipe, those a family names (ace-rpe's) too, and so does
        `recipe.max_steps=` where the named recipe's `overrides` set none (a one-step smoke of every stage)."""
        from repro.families import load_recipe

        if self.base_recipe is not None and overrides is None and name in (None, self.spec.recipe):
            return self.base_recipe.replace(seed=self.seed, **fixed)  # the plan's: loaded and overridden once
        settings = self.settings.get("recipe", {})
        precision = {k: v for k, v in settings.items() if k == "precision"}
        max_steps = {k: v for k, v in settings.items() if k == "max_steps"}
        base = settings if overrides is None else {**max_steps, **overrides, **precision}
        return load_recipe(name or self.spec.recipe).replace(**{**base, "seed": self.seed, **fixed})

    def predictions_file(self, split: str) -> Path:
        """Where this unit's answers on a test split go, for the server: `<results>/<paper>/<id>/predictions/
        <row>[.<scale>].seed<N>.<split>[.partial].json`; the scale is named except at paper scale, and a run
        cut short by --limit is `.partial`, never mistaken for a full submission."""
        from repro.paths import results_dir

        scale = "" if self.scale == "paper" else f".{self.scale}"
        partial = ".partial" if self.limit else ""
        name = f"{self.row.slug}{scale}.seed{self.seed}.{split}{partial}.json"
        return inside(self.results_root or results_dir(self.scale), self.spec.paper, self.spec.id, "predictions", name)

    def workdir_of(self, row: Row) -> Path:
        """The work folder of another row's unit with this seed (`repro.run.unit_dir`'s layout)."""
        return inside(self.workdir.parent.parent, row.slug, self.workdir.name)

    def limited(self, split):
        """The first `limit` questions of a split (`repro run --limit N`: a partial run), or all of them."""
        from torch.utils.data import Subset

        return split if self.limit is None or self.limit >= len(split) else Subset(split, range(self.limit))


def with_data(ctx: RunContext) -> RunContext:
    """The context with its family's prepared data: as the launcher gave it, or prepared now (a compute row needs
    none; a context built by hand, as `repro attention` and a fingerprint build theirs, finds its family by its row)."""
    if ctx.data is not None or ctx.row.compute is not None:
        return ctx
    hooks = ctx.hooks
    if hooks is None:
        from repro.families import for_row

        hooks = for_row(ctx.row)
    if hooks is None:
        return ctx
    return replace(ctx, data=hooks.prepare_data(with_rows(ctx.spec, [ctx.row]), ctx.scale, ctx.settings))


def with_rows(spec: Spec, rows) -> Spec:
    """The spec as a family's `prepare_data` sees it: only the rows this run trains (`--rows`), so paper-scale data
    is prepared for those rows alone; columns, settings and claims as they are."""
    return replace(spec, rows=tuple(rows))


def training_split(ctx: RunContext, split):
    """The split a unit trains on: at the generated scales held as ready tensors (`repro.train.ready`: every item
    collated once, the same batches; one gather for a row's seeds trained together), at paper scale streamed."""
    from repro.train.ready import ready_tensors

    return ready_tensors(split) if ctx.generated else split


def fit_together(models: list, ctxs: list[RunContext], train_set, recipes: list, loss_step) -> list:
    """Built models of a row's seeds trained together on `train_set` (`repro.train.ensemble`): their TrainStates."""
    from repro.train.ensemble import fit_ensemble

    return fit_ensemble(
        models,
        train_set,
        recipes,
        [c.workdir for c in ctxs],
        loss_step=loss_step,
        resume=ctxs[0].resume,
        progress=ctxs[0].progress,
        device=ctxs[0].device,
    )


def train_units(
    ctxs: list[RunContext],
    splits: Callable[[RunContext], Any],
    build: Callable[[RunContext, Any], Any],
    score: Callable[[RunContext, Any, Any, Any, Any], RowRun],
    *,
    recipe: Callable[[RunContext], Any] = RunContext.recipe,
    loss_step=None,
) -> list[RowRun]:
    """A row's seeds trained and scored: `splits(ctx)` reads the data once (an object with `.train`), each
    seed's model is `build(ctx, data)` after seeding with its seed, trained by `recipe(ctx)` (one seed alone
    by `repro.train.fit`, several together by `repro.train.ensemble`), and scored by
    `score(ctx, model, state, data, recipe)` as a lone run would be. Devices (`ctx.device`), precision and DDP
    are the trainer's (`repro.train.trainer.fit`): the one place that moves models and batches; scoring finds
    the model where it trained (`repro.train.predict` follows the model's device). Where the family names its
    `evaluation_fields`, rows that differ only there share one training per seed at the generated scales
    (`repro.shared_training`): the first trains and stores it, the others read it and only score."""
    from repro import shared_training
    from repro.train import fit
    from repro.train.trainer import seed_everything

    data = splits(ctxs[0])
    recipes = [recipe(c) for c in ctxs]
    train = training_split(ctxs[0], ctxs[0].limited(data.train))
    models = []
    for ctx in ctxs:
        seed_everything(ctx.seed)  # its lone run's initial weights
        models.append(build(ctx, data))

    def fit_some(indices: list[int]) -> list:
        if len(indices) == 1:
            i = indices[0]
            c = ctxs[i]
            options = {"resume": c.resume, "progress": c.progress, "device": c.device}
            return [fit(models[i], train, recipes[i], c.workdir, loss_step=loss_step, **options)]
        chosen = [ctxs[i] for i in indices]
        return fit_together([models[i] for i in indices], chosen, train, [recipes[i] for i in indices], loss_step)

    if shared_training.applies(ctxs[0], recipes[0], train):  # rows that differ only in evaluation share a training
        states = shared_training.train_or_read(ctxs, models, train, recipes, fit_some)
    else:
        states = fit_some(list(range(len(ctxs))))
    return [score(c, m, s, data, r) for c, m, s, r in zip(ctxs, models, states, recipes)]


def no_stages(config: Any, spec: Spec, precision: str | None = None) -> list[tuple[str, str, float | None]]:
    return []


def no_notes(spec: Spec) -> list[str]:
    return []


class DataNeed(NamedTuple):
    """One thing a paper-scale row reads: the catalog entry `repro download DATASET` fetches, then (where the
    row reads it prepared) `repro prepare PREPARE`; `ready` says whether it is on disk (None: every catalog
    file of DATASET is there and, after a prepare step, its output where `repro.run.prepared` knows it).
    `splits`: the training splits it holds, by the names the recipes' `train_splits` use (VG's QA is `vg`), so
    that a plan lists a step for every split a row trains on (tests/test_plan_splits.py)."""

    dataset: str
    prepare: str | None = None
    ready: Callable[[], bool] | None = None
    splits: tuple[str, ...] = ()


def no_paper_data(spec: Spec, row: Row) -> list[DataNeed]:
    return []


def runs_everywhere(config: Any, scale: str) -> str | None:
    return None


def evaluates_any(config: Any) -> str | None:
    return None


def no_prerequisites(spec: Spec, row: Row) -> tuple[str, ...]:
    return ()


def no_parts(spec: Spec, row: Row, scale: str) -> dict[str, Resources]:
    return {}


@dataclass(frozen=True)
class Hooks:
    """A family's interface to the generic layers (`repro run`, `repro model`, `repro attention`, Slurm):
    `family.py` ends with `HOOKS = Hooks(...)`. Required members first; the optional ones default to what a
    family without them means."""

    archs: tuple[str, ...]  # the `arch:` values it can build and run so far
    build_model: Callable[..., Any]  # (config, sizes=None, ...) -> nn.Module: the paper's sizes unless overridden
    describe: Callable[[Any, Spec | None], list[ModelInfo]]  # (config, spec): one ModelInfo per model of a row
    # (config, precision=None) -> paper-scale GPU-hours of one training run (None: unknown) at the precision the run
    # trains in (None: its recipe's own); an estimate from FLOPs goes through `repro.train.cost`
    gpu_hours: Callable[..., float | None]
    prepare_data: Callable[[Spec, str, dict[str, Any]], Any]  # once per run: generate (smoke, synthetic) or
    # find (paper) the data; what it returns is every unit's `ctx.data`; the spec holds only the rows the run trains
    run_row: Callable[[RunContext], RowRun]  # train and evaluate one (row, seed)

    # a row's seeds trained together in one process (`--ensemble`, generated scales); None: one at a time
    run_ensemble: Callable[[list[RunContext]], list[RowRun]] | None = None
    # units at a time `repro run` runs at the synthetic scale when neither `-j` nor the scale's `jobs` says: 2 (two
    # processes, the cores shared between them) or 1 (one process with every thread), whichever
    # `python -m benchmarks.bench_synthetic --parallel-only` measured faster for the family (docs/benchmarks.md)
    synthetic_jobs: int = 1
    # config fields that change how a trained network is evaluated, not how it trains (or that choose data the
    # training key's data hash stands for): at the generated scales, rows of `train_units` that differ only there
    # share one training per seed (`repro.shared_training`); None: every row trains its own
    evaluation_fields: frozenset[str] | None = None
    # `compute: {task: ...}` rows it runs without training (dataset statistics), by task name
    compute_tasks: Mapping[str, Callable[[RunContext], RowRun]] = field(default_factory=dict)
    # `run_row` honours `ctx.limit` (`repro run --limit N`: the first N questions of each split at paper scale)
    supports_limit: bool = False
    # (config, N) -> paper-scale GPU-hours of a run on the first N questions of each split (`--limit N`); None: the
    # plan says its estimate is for the whole splits
    limited_hours: Callable[..., float | None] | None = None  # (config, N, precision=None)
    # the generator config class a scale's `generator:` mapping is read with (checks `generator.<key>=`)
    generator_settings: Callable[[dict[str, Any]], type] | None = None
    # (ctx, question_id) -> AttentionMaps for `repro attention`; None: the family draws none
    attention: Callable[[RunContext, int], AttentionMaps] | None = None
    # (config, spec, precision=None) -> [(name, what, GPU-hours)]: a unit that trains in stages, listed by the
    # paper-scale plan
    stages: Callable[..., list[tuple[str, str, float | None]]] = no_stages
    # (config, spec) -> (recipe name, build, example_batch(n)): the stage whose training holds the most per GPU, for
    # the plan's memory estimate of a family whose specs name no recipe of their own (its stages train with
    # theirs); None: the spec's recipe with `build_model` and `example_batch`
    memory_stage: Callable[[Any, Spec], tuple[str, Callable[[], Any], Callable[[int], dict[str, Any]]]] | None = None
    # spec -> what the paper scale reads beyond the catalog downloads (e.g. the user's images)
    data_notes: Callable[[Spec], list[str]] = no_notes
    # (spec, row) -> what a paper-scale row reads, in the order a run asks for it (the plan's download and
    # prepare steps, and its `ready` / `missing`); a ReproError: the row does not run at paper scale, and why
    paper_data: Callable[[Spec, Row], list[DataNeed]] = no_paper_data
    # (config, scale) -> why such a row does not run at a generated scale (the plan leaves it out), or None
    not_at_scale: Callable[[Any, str], str | None] = runs_everywhere
    # (config, scale) -> what one unit asks a cluster for; None: `default_resources`
    resources: Callable[[Any, str], Resources] | None = None
    # (spec, row) -> the rows whose unit of the same seed this row's unit reads from (their stored outputs): on a
    # cluster its job waits for theirs to succeed (Slurm `afterok`) instead of redoing their work
    after: Callable[[Spec, Row], tuple[str, ...]] = no_prerequisites
    # (spec, row, scale) -> {part: resources}: on a cluster a unit trains in parts, one job each (`RunContext.part`:
    # psac's tasks at paper scale, 300 epochs of Transition and 100 of the others), which store what they scored;
    # the unit's own job waits for them (afterok) and makes the record from what they stored. {}: one job
    parts: Callable[[Spec, Row, str], dict[str, Resources]] = no_parts
    # (batch_size, sizes) -> a batch of the data interface's format, for FLOPs and benchmarks
    example_batch: Callable[..., dict[str, Any]] | None = None
    # the official checkpoint layouts it reads (`repro weights convert --layout`), and the conversion:
    # (path, layout, option) -> (this project's model with the weights placed, the key report of repro.weights)
    weight_layouts: tuple[str, ...] = ()
    # `run_row` honours `ctx.weights` (`repro run --weights released|FILE`: evaluate a checkpoint, no training)
    supports_weights: bool = False
    # config -> why `--weights` cannot evaluate such a row, or None: the plan refuses what the run refuses
    weights_refusal: Callable[[Any], str | None] = evaluates_any
    # (config, spec) -> GPU-hours of evaluating one row from given weights (the `--weights` plan); None: unknown
    evaluation_hours: Callable[[Any, Spec], float | None] | None = None
    convert_weights: Callable[[Path, str, str | None], tuple[Any, Any]] | None = None
    # (ctx, column) -> the row's optimisation step at the timing sizes, a repro.nn.paired_timing.TimedStep, for
    # a time column's claims (`repro run ID --timing`: two rows' steps interleaved, repro.timing); None: not timed
    timed_step: Callable[[RunContext, Any], Any] | None = None

    def __reduce__(self):
        # pickled by name, the family's own HOOKS found again through the family table in the process that loads it
        # (a unit's context crosses into worker processes and Slurm jobs; its callables need not pickle)
        return (hooks_of, (self.archs[0],))

    def unit_resources(self, config: Any, scale: str) -> Resources:
        if self.resources is not None:
            return self.resources(config, scale)
        return default_resources(scale, self.gpu_hours(config) if scale == "paper" else None)


@dataclass
class RowRun:
    """What one unit produced: the spec's columns, the split they were measured on, and extras per seed.
    Paths in it are absolute; the record stores them portably (`repro.results.portable_record`)."""

    metrics: dict[str, float]
    split: str
    training: dict[str, Any] | None = None  # steps, final loss, batch, GPUs
    extra: dict[str, Any] = field(default_factory=dict)  # per seed, kept as lists: per-type scores, val scores
    info: dict[str, Any] = field(default_factory=dict)  # the same for every seed (exact counts, device)
    predictions: list[str] = field(default_factory=list)  # test-set files written for the server


@dataclass
class AttentionMaps:
    """One question through a trained model: its image's boxes and the attention they receive (`repro attention`)."""

    question: str
    answer: str  # the model's answer
    gold: str | None  # the most common annotator answer, when known
    image_size: tuple[float, float]  # width, height in pixels
    boxes: Any  # numpy [N, 4]: x1, y1, x2, y2 in pixels
    box_labels: list[str]  # one per box
    over_boxes: dict[str, Any]  # map name -> numpy [layers, heads, N]: the attention each box receives
    raw: dict[str, Any] = field(default_factory=dict)  # every recorded map as it is (saved to the .npz)


@dataclass(frozen=True)
class ModelInfo:
    """One model of a row, at the paper's sizes (`repro model ID --row ROW`)."""

    name: str
    task: str
    trainable_params: int
    total_params: int
    flops_per_sample: int | None
    modules: list[tuple[str, int]]  # (top-level module, trainable parameters)

    @classmethod
    def measure(cls, model, name: str, task: str, batch: dict[str, Any]) -> "ModelInfo":
        """Parameters of `model` and its top-level modules, and FLOPs of one pass over `batch`."""
        from repro.nn.measure import count_flops, count_parameters

        return cls(
            name=name,
            task=task,
            trainable_params=count_parameters(model),
            total_params=count_parameters(model, trainable_only=False),
            flops_per_sample=count_flops(model, batch),
            modules=[(n, count_parameters(child)) for n, child in model.named_children()],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "trainable_params": self.trainable_params,
            "total_params": self.total_params,
            "flops_per_sample": self.flops_per_sample,
            "modules": [{"name": n, "trainable_params": p} for n, p in self.modules],
        }


def hooks_of(arch: str) -> Hooks:
    """The hooks of the family that builds `arch` (how `Hooks` unpickles)."""
    from repro import families

    return families.implementation(families.by_arch(arch))


def pilot_context(spec, row, seed: int, settings: dict[str, Any], workdir, data, config=None):
    """The RunContext a pilot trains one (row, seed) in: the synthetic scale, the given settings and data, no progress
    bars; `config` in place of the row's where given."""
    return RunContext(
        spec=spec,
        row=row,
        config=row.config if config is None else config,
        scale="synthetic",
        settings=settings,
        seed=seed,
        workdir=Path(workdir),
        progress=False,
        data=data,
    )
