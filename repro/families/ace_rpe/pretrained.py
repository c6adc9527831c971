"""Pre-trainings shared across tables: one checkpoint per pre-training configuration and seed.

Tables 1, 2, 5 and 6-9 fine-tune the same rows from the same pre-training (at the generated scales the same
generated pairs, sizes and recipe); each (configuration, seed) is pre-trained once and every other unit that asks
for it reads the stored weights. A pre-training is named by the hash of what determines it (`key`):

  model     the row's config, less the fields that only choose data or a stage (`task`, `pretrain`, `init`:
            the data's own hash stands for what `pretrain` chooses)
  sizes     the model's sizes, the vocabulary's size and special tokens included
  recipe    the pre-training recipe's settings, its seed included (not its file's path: two checkouts share)
  data      sha256 of the vocabulary, of the pre-training json files and of every image they name, and the
            caption length (`max_tokens`)

and kept under `<data>/pretrained/<key>/` by `repro.weights_store` (`model.pt`, `provenance.json`: what the
key hashes and which unit trained it; written whole, under a file lock). A unit's record says which it was
(`training.pretrain`: `hash`, `reused`, `trained_by`).

Only the generated scales share: at paper scale a pre-training reads the user's 4M images (too many to hash) under
torchrun, and runs in its unit as before. A recipe cut short on purpose (`max_steps`: the regression fingerprints)
neither reads nor writes the store. Delete a folder to pre-train that configuration again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repro.weights_store import HASH, PROVENANCE, WEIGHTS, WeightsStore, data_hash, digest

__all__ = ["HASH", "PROVENANCE", "STORE", "WEIGHTS", "data_hash", "folder", "key", "read", "shared", "stored"]

STORE = "pretrained"
NOT_HASHED = ("task", "pretrain", "init")  # config fields that choose data or a stage, not the network
_STORE = WeightsStore(STORE, "pre-training")
folder, stored, shared, read = _STORE.folder, _STORE.stored, _STORE.shared, _STORE.read


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
        "recipe": recipe.settings(),
        "data": data,
    }
    return digest(material), material
