"""What `repro run`, `repro model` and `repro submit` ask of a family: the protocol of its `family.py`.

A family's `family.py` is a module with these functions (no base class to inherit), and `ARCHS`,
the `arch:` values it can build and run so far:

  build_model(config, sizes=None) -> nn.Module
      the model a typed config names, at the paper's sizes unless `sizes` overrides some
  prepare_data(spec, scale, settings) -> None
      once before any unit runs: generate (smoke, synthetic) or check (paper) the data
  loss_step(...) -> (model, batch) -> Tensor
      the training loss of one batch (passed to `repro.train.fit`)
  predict_step(model, batch) -> Tensor
      the outputs that are decoded into answers (passed to `repro.train.predict`)
  run_row(ctx: RunContext) -> RowRun
      train and evaluate one (row, seed): data -> fit -> predict -> metrics -> test-set files
  describe(config[, spec]) -> list[ModelInfo]
      what a row trains, without data: one entry per model (a multi-task row trains several)
  gpu_hours(config) -> float | None
      paper-scale GPU-hours of one training run, for --dry-run
  submission_target(spec) -> str | None
      the `repro submit` target for the test-set predictions the family writes

Optionally:
  COMPUTE_TASKS: dict[str, (ctx) -> RowRun]
      the `compute: {task: ...}` rows it runs without training (dataset statistics) and what runs each
  generator_settings(settings) -> type
      the generator config (a `GeneratorSettings` subclass) a scale's `generator:` mapping is read
      with: `generator.<key>=...` overrides on the command line are checked against it
  SUPPORTS_LIMIT = True
      `run_row` honours `ctx.limit` (`repro run --limit N`: the first N questions of each split at
      paper scale, a partial run) and writes its files under `ctx.results_root`
  attention(ctx: RunContext, question_id) -> AttentionMaps
      for `repro attention`: load the unit's trained model from `ctx.workdir` (its `last.pt`), run one
      question and return how much each box of its image is attended to, per map, layer and head
  stages(config, spec) -> list[(name, what, gpu_hours)]
      a unit that trains in several stages (pre-training, then fine-tuning per data set): listed by
      `repro run --dry-run` at paper scale
  data_notes(spec) -> list[str]
      what the paper scale reads beyond the catalog downloads (e.g. the user's images)
  resources(config, scale) -> Resources
      what one (row, seed) unit asks a cluster for (`repro run --launcher slurm`); without it,
      `default_resources(scale, gpu_hours(config))`: one GPU at paper scale, CPUs at the others
  run_ensemble(ctxs: list[RunContext]) -> list[RowRun]
      a row's seeds trained together in one process (`repro run --ensemble`, `ensemble: true`; the
      generated scales), one RowRun per seed as `run_row` would give it (`train_together` does the training)
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.specs import Row, Spec


class GeneratorSettings:
    """Base of a family's synthetic generator config (a frozen dataclass): read from the spec's
    `scales.<scale>.generator` mapping, unknown keys refused; `key()` names the generated data's folder."""

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
        config = cls(**data)
        config.check()
        return config

    def check(self) -> None:
        """Range checks across fields; a family's generator overrides it where it has some."""

    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


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
    limit: int | None = None  # --limit N: use the first N questions of each split (families with SUPPORTS_LIMIT)
    results_root: Path | None = None  # where this run's files go; None: the results folder (a variant has its own)

    @property
    def generated(self) -> bool:
        """True at the scales whose data the toolkit generates (everything but paper)."""
        return self.scale != "paper"

    def limited(self, split):
        """The first `limit` questions of a split (`repro run --limit N`: a partial run), or all of them."""
        from torch.utils.data import Subset

        return split if self.limit is None or self.limit >= len(split) else Subset(split, range(self.limit))


def train_together(ctxs: list[RunContext], build, train_set, recipes: list, loss_step) -> tuple[list, list]:
    """The models of a row's seeds, each built by `build(ctx)` after seeding with its seed (its lone run's initial
    weights), trained together on `train_set` by their recipes (`repro.train.ensemble`); (models, TrainStates)."""
    from repro.train.ensemble import fit_ensemble
    from repro.train.trainer import seed_everything

    models = []
    for ctx in ctxs:
        seed_everything(ctx.seed)
        models.append(build(ctx))
    states = fit_ensemble(
        models,
        train_set,
        recipes,
        [c.workdir for c in ctxs],
        loss_step=loss_step,
        resume=ctxs[0].resume,
        progress=ctxs[0].progress,
    )
    return models, states


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
