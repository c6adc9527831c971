"""Trainings shared between rows that differ only in how they are evaluated: one per (what determines it, seed).

At the generated scales, rows whose configs differ only in fields that change how a trained network is evaluated
(a family's `Hooks.evaluation_fields`; sa-m4c: the decoding's beam, and the OCR system, detector and ST-VQA switch,
whose data the key's data hash stands for; mcan-pa: none, so only rows of one config share, such as the MCAN row of
its four positive controls) train the same network on the same data by the same recipe and seed.
The first unit to ask trains it and stores it (`repro.weights_store`, under `<data>/trained/`); the others
read it and only evaluate. What a key hashes:

  family  the package that builds the network
  model   the row's config less the evaluation fields
  init    the network's initial weights (its sizes, vocabulary and initialisation in one)
  data    the training split's ready tensors
  recipe  the resolved recipe, its seed included (less the file it was read from)
  seeds   the seeds of a unit trained together (`--ensemble`), or none for a seed alone: batched kernels round
          otherwise, so a key names the computation whose result it holds, bit for bit on one machine
  code    the source of that package, repro/train and repro/nn: any change to them trains again

`repro run` starts the units that would read a stored training after those that train (`launch.units.shared_last`).
A recipe cut short on purpose (`max_steps`: the regression fingerprints) and the paper scale neither read nor write
the store. The record's `training` says which it was: `hash`, `reused` and `trained_by` (spec, row, seed, scale,
commit) beside the steps and final loss of the training.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from repro.train.ready import ReadyTensors
from repro.weights_store import WeightsStore, digest, tensors_hash

STORE = WeightsStore("trained", "training")
CODE = (Path(__file__).parent / "train", Path(__file__).parent / "nn")  # repro/train, repro/nn


class SharedState:
    """A training as the record tells it, for a score function's `state.summary()`."""

    def __init__(self, account: dict[str, Any]):
        self.account = account

    def summary(self) -> dict[str, Any]:
        return dict(self.account)


def evaluation_fields(hooks: Any) -> frozenset[str] | None:
    """The family's `Hooks.evaluation_fields` (None: its rows never share a training)."""
    return getattr(hooks, "evaluation_fields", None) if hooks is not None else None


def applies(ctx: Any, recipe: Any, train_set: Any) -> bool:
    """Whether a unit's training goes through the store: a family that names its evaluation fields, a generated
    scale (the split held as ready tensors) and a recipe run to its schedule."""
    fields = evaluation_fields(ctx.hooks)
    return fields is not None and ctx.generated and isinstance(train_set, ReadyTensors) and not recipe.max_steps


@functools.cache
def code_hash(package: Path) -> str:
    """sha256 over the Python source of `package` and of CODE (name relative to its root, and bytes)."""
    sha = hashlib.sha256()
    for root in (package, *CODE):
        for path in sorted(root.rglob("*.py")):
            sha.update(f"{root.name}/{path.relative_to(root)}\0".encode())
            sha.update(path.read_bytes())
    return sha.hexdigest()


def trained_fields(config: Any, fields: frozenset[str]) -> dict[str, Any]:
    """A row's config as its training sees it: the fields less `fields` (a family's evaluation fields)."""
    mapping = config.model_dump(mode="json") if hasattr(config, "model_dump") else dict(config or {})
    return {k: v for k, v in sorted(mapping.items()) if k not in fields}


def key(ctx: Any, model: nn.Module, recipe: Any, data: str, together: list[int] | None) -> tuple[str, dict[str, Any]]:
    """(hash, what it hashes) of one seed's training; `data`: the training split's `tensors_hash`; `together`: the
    seeds of its unit when they train together."""
    package = Path(sys.modules[type(model).__module__].__file__).parent
    material = {
        "family": package.name,
        "model": trained_fields(ctx.config, ctx.hooks.evaluation_fields),
        "init": tensors_hash(model.state_dict()),
        "data": data,
        "recipe": recipe.settings(),
        "seeds": together,
        "code": code_hash(package),
    }
    return digest(material), material


def train_or_read(
    ctxs: list[Any],
    models: list[nn.Module],
    train_set: ReadyTensors,
    recipes: list[Any],
    fit_some: Callable[[list[int]], list[Any]],
) -> list[SharedState]:
    """Each unit's network trained by `fit_some(indices)` (those not stored yet, together where there are several:
    their TrainStates) and stored, or read from the store into its model (moved to the unit's device); per unit the
    record's account of its training."""
    from repro.train.distributed import current, device_for

    data = tensors_hash(train_set.tensors)
    together = [c.seed for c in ctxs] if len(ctxs) > 1 else None
    keyed = [key(c, m, r, data, together) for c, m, r in zip(ctxs, models, recipes)]
    units = [{"spec": c.spec.id, "row": c.row.name, "seed": c.seed, "scale": c.scale} for c in ctxs]

    def train(missing: list[int]):
        states = fit_some(missing)
        return [(models[i].state_dict(), s.summary()) for i, s in zip(missing, states)]

    got = STORE.shared([k for k, _ in keyed], [m for _, m in keyed], units, train)
    out = []
    for ctx, model, (weights, account) in zip(ctxs, models, got):
        if account["reused"]:
            model.load_state_dict(weights)
            model.to(device_for(current(), ctx.device))
        out.append(SharedState(account))
    return out
