"""Training recipes: `<paper>/<name>` is `repro/families/<family>/recipes/<name>.yaml`, checked with `file:line`.

A recipe is everything about *how* a row is trained that the paper fixes: optimiser, learning-rate
schedule, epochs, batch size (global, whatever the GPU count and `accumulate`), gradient clipping, precision, loss,
seed and the splits trained on. Example: `mcan-pa/vqa2`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from repro.errors import ReproError
from repro.train import optimizers, schedule
from repro.train.losses import LOSSES
from repro.utils import did_you_mean, read_yaml

PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16")


class KeysOf(Mapping):
    """name -> the keys a recipe may give an entry of a table (`schedule.SCHEDULES`, `optimizers.OPTIMIZERS`),
    read at each use, so an entry added to the table counts at once."""

    def __init__(self, table: Mapping[str, Any]):
        self._table = table

    def __getitem__(self, name: str) -> frozenset[str]:
        return self._table[name].keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


# what a recipe's `optimizer:` and `schedule:` may give, by name (repro.variants checks overrides with them);
# the tables themselves, with what each entry does, are optimizers.OPTIMIZERS and schedule.SCHEDULES
OPTIMIZERS: Mapping[str, frozenset[str]] = KeysOf(optimizers.OPTIMIZERS)
SCHEDULES: Mapping[str, frozenset[str]] = KeysOf(schedule.SCHEDULES)


class _At(ValueError):
    """A problem inside a section (`schedule.base_lr`): the key path below the field, for the line number."""

    def __init__(self, path: tuple, message: str):
        super().__init__(message)
        self.path = path


def _in_range(section: str, name: str, value: Any) -> None:
    """A schedule's or optimiser's number is finite and not negative (rates, epochs, betas, decays: none is); a
    list of them (a schedule's `decay_epochs`) rises strictly, each milestone once (`[1, 1]` would decay twice)."""
    numbers = value if isinstance(value, (list, tuple)) else [value]
    for number in numbers:
        if not math.isfinite(number) or number < 0:
            raise _At((name,), f"{section}.{name} must be a finite number, 0 or more, got {number!r}")
        if name.endswith(("_epochs", "_iterations", "_steps")) and not isinstance(number, int):
            raise _At((name,), f"{section}.{name} counts epochs, iterations or steps: a whole number, got {number!r}")
    if section == "schedule" and isinstance(value, (list, tuple)) and list(value) != sorted(set(value)):
        raise _At((name,), f"{section}.{name} must rise, each value once, got {list(value)!r}")


class RecipeFields(BaseModel):
    """What a recipe file may give, validated with pydantic as the model configs are (`extra="forbid"`, strict
    types). Each message starts with the field's name, so the YAML loader can point at its line."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    optimizer: dict[str, Any]
    schedule: dict[str, Any]
    epochs: StrictInt
    batch_size: StrictInt
    loss: StrictStr
    eval_batch_size: StrictInt | None = None
    grad_clip: Annotated[float, Field(strict=True)] | None = None
    precision: StrictStr = "auto"
    seed: StrictInt = 0
    train_splits: tuple[StrictStr, ...] = ()
    num_workers: StrictInt = 0
    max_steps: StrictInt | None = None
    accumulate: StrictInt = 1
    lr_batch: StrictInt | None = None
    description: str = ""

    @field_validator("optimizer", "schedule", mode="before")
    @classmethod
    def _section(cls, section: Any, info: ValidationInfo) -> Any:
        key = info.field_name
        kinds = OPTIMIZERS if key == "optimizer" else SCHEDULES
        if not isinstance(section, dict) or "name" not in section:
            raise _At((), f"{key} must be a mapping with a 'name' ({', '.join(kinds)})")
        if section["name"] not in kinds:
            raise _At(("name",), f"unknown {key} {section['name']!r}; one of {', '.join(kinds)}")
        allowed = kinds[section["name"]] | {"name"}
        for name, value in section.items():
            if name not in allowed:
                raise _At((name,), f"unknown {section['name']} {key} key {name!r}{did_you_mean(name, allowed)}")
            if name != "name" and not _numeric(value):
                raise _At((name,), f"{key}.{name} must be a number or a list of numbers, got {value!r}")
            if name != "name":
                _in_range(key, name, value)
        return section

    @field_validator("schedule")
    @classmethod
    def _base_lr(cls, schedule: dict[str, Any]) -> dict[str, Any]:
        base_lr = schedule.get("base_lr")
        if not isinstance(base_lr, (int, float)) or isinstance(base_lr, bool) or base_lr <= 0:
            raise ValueError(f"schedule: base_lr must be a positive number, got {base_lr!r}")
        return schedule

    @field_validator("epochs", "batch_size", "accumulate")
    @classmethod
    def _at_least_one(cls, value: int, info: ValidationInfo) -> int:
        if value < 1:
            raise ValueError(f"{info.field_name}: must be at least 1, got {value}")
        return value

    @field_validator("eval_batch_size")
    @classmethod
    def _eval_batch_size(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"eval_batch_size: must be at least 1, got {value}")
        return value

    @field_validator("max_steps", "lr_batch")
    @classmethod
    def _positive_or_null(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"{info.field_name}: must be a positive integer or null, got {value!r}")
        return value

    @field_validator("num_workers")
    @classmethod
    def _num_workers(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"num_workers: must be 0 or more, got {value}")
        return value

    @field_validator("grad_clip")
    @classmethod
    def _grad_clip(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError(f"grad_clip: must be positive or null, got {value}")
        return value

    @field_validator("precision")
    @classmethod
    def _precision(cls, value: str) -> str:
        if value not in PRECISIONS:
            raise ValueError(f"precision: must be one of {', '.join(PRECISIONS)}, got {value!r}")
        return value

    @field_validator("loss")
    @classmethod
    def _loss(cls, value: str) -> str:
        if value not in LOSSES:  # read at each use: a loss added to the table counts at once
            raise ValueError(f"loss: must be one of {', '.join(LOSSES)}, got {value!r}")
        return value

    @field_validator("train_splits")
    @classmethod
    def _no_test_split(cls, splits: tuple[str, ...]) -> tuple[str, ...]:
        if any("test" in s for s in splits):
            raise ValueError(f"train_splits {list(splits)} names a test split; nothing is trained or chosen on test")
        return splits

    @field_validator("description", mode="before")
    @classmethod
    def _description(cls, value: Any) -> str:
        return "" if value is None else str(value).strip()


# what a type error says, by field (range errors say their own)
_EXPECTED = {
    "epochs": "an integer",
    "batch_size": "an integer",
    "eval_batch_size": "an integer",
    "num_workers": "an integer",
    "seed": "an integer",
    "max_steps": "a positive integer or null",
    "accumulate": "an integer",
    "lr_batch": "a positive integer or null",
    "grad_clip": "a number or null",
    "loss": "a loss name",
    "precision": "one of " + ", ".join(PRECISIONS),
    "train_splits": "a list of split names",
}


def _problem(exc: ValidationError) -> tuple[tuple, str]:
    """The first problem pydantic found, as (key path, one line): unknown keys first, then missing ones."""
    errors = sorted(exc.errors(), key=lambda e: {"extra_forbidden": 0, "missing": 1}.get(e["type"], 2))
    error = errors[0]
    key = error["loc"][0] if error["loc"] else None
    if error["type"] == "extra_forbidden":
        return (key,), f"unknown recipe key {key!r}{did_you_mean(key, RecipeFields.model_fields)}"
    if error["type"] == "missing":
        return (), f"recipe is missing {key!r}"
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _At):
        return (key, *cause.path), str(cause)
    if isinstance(cause, ValueError):
        return (key,), str(cause)
    return tuple(error["loc"]), f"{key} must be {_EXPECTED.get(key, 'valid')}, got {error['input']!r}"


@dataclass(frozen=True)
class Recipe:
    """A validated recipe (every field through `RecipeFields`, when it is made and when it is replaced)."""

    name: str
    optimizer: dict[str, Any]  # {name: adam, betas: [..], eps: .., weight_decay: ..}
    schedule: dict[str, Any]  # {name: mcan, base_lr: .., ...}; see repro.train.schedule
    epochs: int
    batch_size: int  # global batch: split over the GPUs of a torchrun job
    loss: str
    eval_batch_size: int | None = None
    grad_clip: float | None = None  # max L2 norm of all gradients; None = no clipping
    # what the paper's official code trains with, stated by each recipe file (all five papers: fp32); tf32 (TF32
    # matmuls on an Ampere or newer GPU), bf16 and fp16 (autocast) trade exactness for speed and are chosen
    # explicitly (`recipe.precision=bf16`). `auto` is the recipe's own value (a file that says auto, or none: fp32)
    precision: str = "auto"
    seed: int = 0
    train_splits: tuple[str, ...] = ()
    num_workers: int = 0
    max_steps: int | None = None  # stop after this many optimisation steps (short runs: regression fingerprints)
    # forward passes per optimisation step, their gradients added up: the global batch kept on fewer GPUs (each
    # pass takes batch_size / (processes x accumulate) samples); the same step as one pass, to float rounding
    accumulate: int = 1
    # the linear scaling rule (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): the global batch the schedule's
    # rates are stated for; a run at another batch_size multiplies every rate the schedule gives by batch_size /
    # lr_batch (`lr_factor`). None: the rates as stated, whatever the batch. Epoch-counted schedules keep their
    # epochs; an iteration-counted one (m4c) keeps its iterations, which a larger batch reaches later in training
    lr_batch: int | None = None
    description: str = ""
    path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("name", "path")}
        try:
            checked = RecipeFields.model_validate(values)
        except ValidationError as exc:
            raise ReproError(_problem(exc)[1]) from None
        for name, value in checked:  # as validated: grad_clip a float, train_splits a tuple
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> "Recipe":
        """A copy with some fields changed (e.g. a smoke scale's epochs and batch size), validated again;
        `precision="auto"` keeps the recipe's own precision."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ReproError(f"recipe {self.name}: unknown field(s) {', '.join(unknown)}")
        if changes.get("precision") == "auto":
            changes = {k: v for k, v in changes.items() if k != "precision"}
        return dataclasses.replace(self, **changes)

    @property
    def lr_factor(self) -> float:
        """What every rate of the schedule is multiplied by: batch_size / lr_batch (1 without `lr_batch`)."""
        return 1.0 if self.lr_batch is None else self.batch_size / self.lr_batch

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["path"] = str(self.path) if self.path else None
        data["train_splits"] = list(self.train_splits)
        if self.lr_batch is None:  # added later: a recipe without it keeps the form (and config hash) it had
            del data["lr_batch"]
        return data

    def settings(self) -> dict[str, Any]:
        """`to_json` less the file's path: what the recipe trains with, whichever checkout or copy it was read from
        (the stores' keys: `repro.shared_training`, ace-rpe's shared pre-trainings)."""
        return {k: v for k, v in self.to_json().items() if k != "path"}


def load_recipe(name: str, root: Path | None = None) -> Recipe:
    """Load a recipe from a path to a YAML file, or by name from `root/<name>.yaml`. Recipes by their
    family's name (`mcan-pa/vqa2`) are found by `repro.families.load_recipe`, which knows the folders."""
    path = Path(name) if name.endswith((".yaml", ".yml")) or root is None else root / f"{name}.yaml"
    if not path.is_file():
        known = sorted(str(p.relative_to(root).with_suffix("")) for p in root.glob("**/*.yaml")) if root else []
        raise ReproError(f"no recipe {name!r} (looked for {path}); known recipes: {', '.join(known) or 'none'}")
    return parse_recipe(path, path.stem if name.endswith((".yaml", ".yml")) else name)


def parse_recipe(path: Path, name: str) -> Recipe:
    data, loc = read_yaml(path, "recipe")
    if not isinstance(data, dict):
        raise loc.error((), "a recipe must be a mapping")
    try:
        fields = RecipeFields.model_validate(data)
    except ValidationError as exc:
        where, message = _problem(exc)
        raise loc.error(where, message) from None
    return Recipe(name=name, path=path, **dict(fields))


def _numeric(value: Any) -> bool:
    if isinstance(value, list):
        return all(_numeric(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)
