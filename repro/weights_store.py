"""Trained weights kept by what determines them, so that a training asked for twice runs once.

A store is a folder under the data folder (`<data>/<name>/`) with one entry per key: 16 hex digits of the sha256 of
the canonical json of what determines the training (`digest`; the caller says what that is: ace-rpe's pre-trainings,
`repro.families.ace_rpe.pretrained`; the trainings of rows that differ only in how they are evaluated,
`repro.shared_training`). An entry holds `model.pt` (the state dict; read with `weights_only=True`) and
`provenance.json` (what the key hashes, and which unit trained it: spec, row, seed, scale, commit, its seconds and
how many trained together). The entry is written whole under another name and renamed into place, so a crash leaves
no half-written entry; a file lock (`<key>.lock`) makes two units that need the same key at once wait for the first
to store it. Delete an entry's folder to train it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from repro.errors import ReproError
from repro.names import inside
from repro.paths import data_dir
from repro.utils import atomic_open, work_dir, write_json_atomic

WEIGHTS = "model.pt"
PROVENANCE = "provenance.json"
HASH = re.compile(r"[0-9a-f]{16}")  # what `digest` names an entry by

Trained = tuple[dict[str, torch.Tensor], dict[str, Any]]  # (state dict, the record's account of the training)


def digest(material: dict[str, Any]) -> str:
    """16 hex digits of the sha256 of `material`'s canonical json: an entry's key."""
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def data_hash(files: Iterable[Path], extra: dict[str, Any] | None = None) -> str:
    """sha256 over the given files (name and bytes, in the order given) and `extra`."""
    sha = hashlib.sha256()
    for path in files:
        sha.update(Path(path).name.encode() + b"\0")
        sha.update(Path(path).read_bytes())
    sha.update(json.dumps(extra or {}, sort_keys=True).encode())
    return sha.hexdigest()


def tensors_hash(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over named tensors (name, dtype, shape and bytes, in name order): a split held as ready tensors."""
    sha = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        sha.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        sha.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return sha.hexdigest()


class WeightsStore:
    """The entries under `<data>/<name>/`; `what` names one in messages ("pre-training", "training")."""

    def __init__(self, name: str, what: str):
        self.name, self.what = name, what

    def folder(self, key: str) -> Path:
        """`<data>/<name>/<key>`: `key` as `digest` gives it, joined as every name is (`repro.names`)."""
        if not isinstance(key, str) or not HASH.fullmatch(key):
            raise ReproError(f"{key!r} is not the name of a stored {self.what} (16 hex digits)")
        return inside(data_dir(), self.name, key, what=self.what)

    def stored(self, key: str) -> bool:
        return (self.folder(key) / PROVENANCE).is_file() and (self.folder(key) / WEIGHTS).is_file()

    def shared(
        self,
        keys: list[str],
        materials: list[dict[str, Any]],
        units: list[dict[str, Any]],
        train: Callable[[list[int]], list[Trained]],
    ) -> list[Trained]:
        """Per key its weights and the record's account of the training: read from the store, or trained by
        `train(missing)` (the indices not stored yet, trained together where there are several) and stored; under
        the keys' file locks, taken in a fixed order. `units[i]`: who asks (spec, row, seed, scale). The account
        adds `hash`, `reused` and `trained_by` to what `train` returned."""
        from filelock import FileLock

        from repro.results import run_commit

        if len(set(keys)) < len(keys):
            raise ReproError(f"one {self.what} asked for twice at once: {keys}")
        (data_dir() / self.name).mkdir(parents=True, exist_ok=True)
        with ExitStack() as held:
            for key in sorted(keys):
                held.enter_context(FileLock(str(self.folder(key)) + ".lock"))
            out: list[Any] = [self.read(key) if self.stored(key) else None for key in keys]
            missing = [i for i, got in enumerate(out) if got is None]
            if missing:
                started, commit = time.time(), run_commit()
                trained = train(missing)
                seconds = round(time.time() - started, 1)
                for i, (weights, training) in zip(missing, trained):
                    by = {**units[i], "commit": commit, "seconds": seconds, "together": len(missing)}
                    entry = {"hash": keys[i], "key": materials[i], "training": training, "trained_by": by}
                    self._write(keys[i], entry, weights)
                    out[i] = (weights, {**training, "hash": keys[i], "reused": False, "trained_by": by})
        return out

    def _write(self, key: str, provenance: dict[str, Any], weights: dict[str, torch.Tensor]) -> None:
        """Write one entry whole in a hidden staging folder (`.<key>.<host>.<pid>.<random>`: one a killed process
        left is swept), each file synced, then rename the folder into place."""
        where = self.folder(key)
        staging = work_dir(where.parent, f".{key}.")
        with atomic_open(staging / WEIGHTS, "wb") as handle:
            torch.save({k: v.detach().cpu() for k, v in weights.items()}, handle)
        write_json_atomic(staging / PROVENANCE, provenance)
        shutil.rmtree(where, ignore_errors=True)  # an entry left incomplete by hand
        os.replace(staging, where)

    def read(self, key: str) -> Trained:
        """A stored entry: its state dict and the record's account of the training (reused: true)."""
        from repro.train.checkpoint import unusable_values

        where = self.folder(key)
        try:
            provenance = json.loads((where / PROVENANCE).read_text(encoding="utf-8"))
            weights = torch.load(where / WEIGHTS, map_location="cpu", weights_only=True)  # runs nothing it reads
            training, trained_by = provenance["training"], provenance["trained_by"]
            if provenance.get("hash") != key or not isinstance(training, dict) or not isinstance(trained_by, dict):
                raise ValueError(f"{PROVENANCE} is not this entry's")
            if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
                raise ValueError(f"{WEIGHTS} is not a state dict")
        except (OSError, ValueError, RuntimeError, KeyError, TypeError, pickle.UnpicklingError) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ReproError(
                f"{where}: a stored {self.what} that cannot be read ({first}); delete the folder"
            ) from None
        for name, tensor in weights.items():
            problem = unusable_values(name, tensor)
            if problem:
                raise ReproError(f"{where}: {problem}; delete the folder to train it again")
        return weights, {**training, "hash": key, "reused": True, "trained_by": trained_by}
