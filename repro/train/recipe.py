"""Training recipes: `<paper>/<name>` is `repro/families/<family>/recipes/<name>.yaml`, checked with `file:line`.

A recipe is everything about *how* a row is trained that the paper fixes: optimiser, learning-rate
schedule, epochs, batch size (global, whatever the GPU count), gradient clipping, precision, loss,
seed and the splits trained on. Example: `mcan-pa/vqa2`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.train import optimizers, schedule
from repro.train.losses import LOSSES
from repro.utils import Located, read_yaml, unknown_keys

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

_KEYS = {
    "description",
    "optimizer",
    "schedule",
    "epochs",
    "batch_size",
    "eval_batch_size",
    "grad_clip",
    "max_steps",
    "precision",
    "loss",
    "seed",
    "train_splits",
    "num_workers",
}
_REQUIRED = ("optimizer", "schedule", "epochs", "batch_size", "loss")


@dataclass(frozen=True)
class Recipe:
    name: str
    optimizer: dict[str, Any]  # {name: adam, betas: [..], eps: .., weight_decay: ..}
    schedule: dict[str, Any]  # {name: mcan, base_lr: .., ...}; see repro.train.schedule
    epochs: int
    batch_size: int  # global batch: split over the GPUs of a torchrun job
    loss: str
    eval_batch_size: int | None = None
    grad_clip: float | None = None  # max L2 norm of all gradients; None = no clipping
    # auto: fp32, what the official code of all five papers trains with; tf32 (TF32 matmuls on an Ampere or newer
    # GPU), bf16 and fp16 (autocast) trade exactness for speed and are chosen explicitly (`recipe.precision=bf16`)
    precision: str = "auto"
    seed: int = 0
    train_splits: tuple[str, ...] = ()
    num_workers: int = 0
    max_steps: int | None = None  # stop after this many optimisation steps (short runs: regression fingerprints)
    description: str = ""
    path: Path | None = field(default=None, compare=False)

    def replace(self, **changes: Any) -> "Recipe":
        """A copy with some fields changed (e.g. a smoke scale's epochs and batch size), validated again."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ReproError(f"recipe {self.name}: unknown field(s) {', '.join(unknown)}")
        new = dataclasses.replace(self, **changes)
        _check_values(new)
        return new

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["path"] = str(self.path) if self.path else None
        data["train_splits"] = list(self.train_splits)
        return data


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
    unknown_keys(loc, (), data, _KEYS, "recipe")
    for key in _REQUIRED:
        if key not in data:
            raise loc.error((), f"recipe is missing {key!r}")
    _section(loc, data, "optimizer", OPTIMIZERS)
    _section(loc, data, "schedule", SCHEDULES)
    for key in ("epochs", "batch_size", "eval_batch_size", "num_workers", "seed"):
        if key in data and data[key] is not None and (isinstance(data[key], bool) or not isinstance(data[key], int)):
            raise loc.error((key,), f"{key} must be an integer, got {data[key]!r}")
    if data.get("grad_clip") is not None and (
        isinstance(data["grad_clip"], bool) or not isinstance(data["grad_clip"], (int, float))
    ):
        raise loc.error(("grad_clip",), f"grad_clip must be a number or null, got {data['grad_clip']!r}")
    splits = data.get("train_splits", [])
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise loc.error(("train_splits",), "train_splits must be a list of split names")
    if any("test" in s for s in splits):
        raise loc.error(
            ("train_splits",), f"train_splits {splits} names a test split; nothing is trained or chosen on test"
        )
    recipe = Recipe(
        name=name,
        optimizer=data["optimizer"],
        schedule=data["schedule"],
        epochs=data["epochs"],
        batch_size=data["batch_size"],
        loss=data["loss"],
        eval_batch_size=data.get("eval_batch_size"),
        grad_clip=None if data.get("grad_clip") is None else float(data["grad_clip"]),
        precision=data.get("precision", "auto"),
        seed=data.get("seed", 0),
        train_splits=tuple(splits),
        num_workers=data.get("num_workers", 0),
        max_steps=data.get("max_steps"),
        description=str(data.get("description", "")).strip(),
        path=path,
    )
    try:
        _check_values(recipe)
    except ReproError as exc:
        key = str(exc).split(":", 1)[0]
        raise loc.error((key,) if key in data else (), str(exc)) from None
    return recipe


def _section(loc: Located, data: dict, key: str, kinds: Mapping[str, frozenset[str]]) -> None:
    section = data[key]
    if not isinstance(section, dict) or "name" not in section:
        raise loc.error((key,), f"{key} must be a mapping with a 'name' ({', '.join(kinds)})")
    if section["name"] not in kinds:
        raise loc.error((key, "name"), f"unknown {key} {section['name']!r}; one of {', '.join(kinds)}")
    unknown_keys(loc, (key,), section, kinds[section["name"]] | {"name"}, f"{section['name']} {key}")
    for name, value in section.items():
        if name != "name" and not _numeric(value):
            raise loc.error((key, name), f"{key}.{name} must be a number or a list of numbers, got {value!r}")


def _numeric(value: Any) -> bool:
    if isinstance(value, list):
        return all(_numeric(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_values(r: Recipe) -> None:
    """Range checks; messages start with the field name so the YAML loader can point at its line."""
    if r.epochs < 1:
        raise ReproError(f"epochs: must be at least 1, got {r.epochs}")
    if r.batch_size < 1:
        raise ReproError(f"batch_size: must be at least 1, got {r.batch_size}")
    if r.eval_batch_size is not None and r.eval_batch_size < 1:
        raise ReproError(f"eval_batch_size: must be at least 1, got {r.eval_batch_size}")
    if r.precision not in PRECISIONS:
        raise ReproError(f"precision: must be one of {', '.join(PRECISIONS)}, got {r.precision!r}")
    if r.loss not in LOSSES:
        raise ReproError(f"loss: must be one of {', '.join(LOSSES)}, got {r.loss!r}")
    if r.grad_clip is not None and r.grad_clip <= 0:
        raise ReproError(f"grad_clip: must be positive or null, got {r.grad_clip}")
    if r.max_steps is not None and (
        isinstance(r.max_steps, bool) or not isinstance(r.max_steps, int) or r.max_steps < 1
    ):
        raise ReproError(f"max_steps: must be a positive integer or null, got {r.max_steps!r}")
    if r.num_workers < 0:
        raise ReproError(f"num_workers: must be 0 or more, got {r.num_workers}")
    if r.schedule.get("base_lr", 0) <= 0:
        raise ReproError(f"schedule: base_lr must be positive, got {r.schedule.get('base_lr')}")
