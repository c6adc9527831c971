"""Pre-trainings shared across tables: one checkpoint per pre-training configuration and seed.

Tables 1, 2, 5 and 6-9 fine-tune the same rows from the same pre-training (at the generated scales the same
generated pairs, sizes and recipe); each (configuration, seed) is pre-trained once and every other unit that asks
for it reads the stored weights. A pre-training is named by the hash of what determines it (`key`):

  model     the row's config, less the fields that only choose data or a stage (`task`, `pretrain`, `init`:
            the data's own hash stands for what `pretrain` chooses)
  sizes     the model's sizes, the vocabulary's size and special tokens included
  recipe    the pre-training recipe, its seed included
  data      sha256 of the vocabulary, of the pre-training json files and of every image they name, and the
            caption length (`max_tokens`)

and kept under `<data>/pretrained/<key>/`: `model.pt` (the state dict; read with `weights_only=True`) and
`provenance.json` (what the key hashes, and which unit trained it: spec, row, seed, scale, commit, when, its steps
and final loss). The folder is written whole under another name and renamed into place, so a crash leaves no
half-written entry; a file lock (`<key>.lock`) makes two units that need the same pre-training at once wait for
the first to store it. A unit's record says which it was (`training.pretrain`: `hash`, `reused`, `trained_by`).

Only the generated scales share: at paper scale a pre-training reads the user's 4M images (too many to hash) under
torchrun, and runs in its unit as before. A recipe cut short on purpose (`max_steps`: the regression fingerprints)
neither reads nor writes the store. Delete a folder to pre-train that configuration again.
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

STORE = "pretrained"
WEIGHTS = "model.pt"
PROVENANCE = "provenance.json"
NOT_HASHED = ("task", "pretrain", "init")  # config fields that choose data or a stage, not the network
HASH = re.compile(r"[0-9a-f]{16}")  # what `key` names a pre-training by


def data_hash(files: Iterable[Path], extra: dict[str, Any] | None = None) -> str:
    """sha256 over the given files (name and bytes, in the order given) and `extra`."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(Path(path).name.encode() + b"\0")
        digest.update(Path(path).read_bytes())
    digest.update(json.dumps(extra or {}, sort_keys=True).encode())
    return digest.hexdigest()


def pretraining_files(vocab: Path, json_files: Iterable[tuple[Path, Path]]) -> list[Path]:
    """The files a generated pre-training reads: the vocabulary, each json file and every image it names (relative
    to its image root), in a fixed order."""
    files = [Path(vocab) / "vocab.txt"]
    for path, root in json_files:
        files.append(Path(path))
        entries = json.loads(Path(path).read_text())
        files += [Path(root) / name for name in sorted({e["image"] for e in entries})]
    return files


def key(config: Any, sizes: dict[str, Any], recipe: Any, data: str) -> tuple[str, dict[str, Any]]:
    """(hash, what it hashes) of one pre-training: 16 hex digits of the canonical json of the config (less
    NOT_HASHED), the sizes, the recipe with its seed and the data's hash."""
    model = config.model_dump(mode="json") if hasattr(config, "model_dump") else dict(config)
    material = {
        "model": {k: v for k, v in sorted(model.items()) if k not in NOT_HASHED},
        "sizes": dict(sorted(sizes.items())),
        "recipe": recipe.to_json(),
        "data": data,
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16], material


def folder(name: str) -> Path:
    """`<data>/pretrained/<name>`: `name` a hash as `key` gives it, joined as every name is (`repro.names`)."""
    if not isinstance(name, str) or not HASH.fullmatch(name):
        raise ReproError(f"{name!r} is not the name of a stored pre-training (16 hex digits)")
    return inside(data_dir(), STORE, name, what="pre-training")


def stored(name: str) -> bool:
    return (folder(name) / PROVENANCE).is_file() and (folder(name) / WEIGHTS).is_file()


def shared(
    names: list[str],
    materials: list[dict[str, Any]],
    units: list[dict[str, Any]],
    train: Callable[[list[int]], list[tuple[dict[str, torch.Tensor], dict[str, Any]]]],
) -> list[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
    """Per pre-training `names[i]` its weights and the record's `training.pretrain`: read from the store, or
    trained by `train(missing)` (the indices not stored yet, trained together where there are several ->
    [(state dict, {"steps", "final_loss", ...})]) and stored; under the keys' file locks, taken in a fixed order.
    `units[i]`: who asks (spec, row, seed, scale)."""
    from filelock import FileLock

    from repro.results import git_commit

    if len(set(names)) < len(names):
        raise ReproError(f"one pre-training asked for twice at once: {names}")
    (data_dir() / STORE).mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        for name in sorted(names):
            held.enter_context(FileLock(str(folder(name)) + ".lock"))
        out: list[Any] = [read(name) if stored(name) else None for name in names]
        missing = [i for i, got in enumerate(out) if got is None]
        if missing:
            started = time.time()
            trained = train(missing)
            seconds = round(time.time() - started, 1)
            for i, (weights, training) in zip(missing, trained):
                by = {**units[i], "commit": git_commit(), "seconds": seconds, "together": len(missing)}
                entry = {"hash": names[i], "key": materials[i], "training": training, "trained_by": by}
                _store(names[i], entry, weights)
                out[i] = (weights, {**training, "hash": names[i], "reused": False, "trained_by": by})
    return out


def _store(name: str, provenance: dict[str, Any], weights: dict[str, torch.Tensor]) -> None:
    """Write one entry whole in a hidden staging folder (`.<name>.<host>.<pid>.<random>`: one a killed process
    left is swept), each file synced, then rename the folder into place."""
    where = folder(name)
    staging = work_dir(where.parent, f".{name}.")
    with atomic_open(staging / WEIGHTS, "wb") as handle:
        torch.save({k: v.detach().cpu() for k, v in weights.items()}, handle)
    write_json_atomic(staging / PROVENANCE, provenance)
    shutil.rmtree(where, ignore_errors=True)  # an entry left incomplete by hand
    os.replace(staging, where)


def read(name: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A stored pre-training: its state dict and the record's `training.pretrain` (reused: true)."""
    from repro.train.checkpoint import unusable_values

    where = folder(name)
    try:
        provenance = json.loads((where / PROVENANCE).read_text(encoding="utf-8"))
        weights = torch.load(where / WEIGHTS, map_location="cpu", weights_only=True)  # runs nothing it reads
        training, trained_by = provenance["training"], provenance["trained_by"]
        if provenance.get("hash") != name or not isinstance(training, dict) or not isinstance(trained_by, dict):
            raise ValueError(f"{PROVENANCE} is not this entry's")
        if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
            raise ValueError(f"{WEIGHTS} is not a state dict")
    except (OSError, ValueError, RuntimeError, KeyError, TypeError, pickle.UnpicklingError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ReproError(f"{where}: a stored pre-training that cannot be read ({first}); delete the folder") from None
    for key_name, tensor in weights.items():
        problem = unusable_values(key_name, tensor)
        if problem:
            raise ReproError(f"{where}: {problem}; delete the folder to pre-train again")
    return weights, {**training, "hash": name, "reused": True, "trained_by": trained_by}
