"""A generated training split held as ready tensors: every item collated once, each batch one index into them.

A split whose items are built per batch (`__getitem__` reads a feature store, converts float16, builds the
answer scores, the OCR tokens' vectors, the spatial graph) costs that work every epoch, and once per seed when a
row's seeds train together. `ready_tensors(split)` does it once: the items collated by torch's `default_collate`
(the trainer's collation when a family gives none) into one tensor per key, `[N, ...]`; `batch(indices)` is
`{key: tensor[indices]}`, equal in values, dtypes and shapes to `default_collate([split[i] for i in indices])`,
so training sees the same batches as from the split itself. Indices of any shape work: the `[seeds, batch]`
indices of a row's seeds give their stacked batches in one gather (`repro.train.ensemble`).

Only for splits whose items are deterministic (the same item every time it is read: no augmentation, no random
masking) and are mappings of tensors and numbers; anything else, or a split over `MAX_BYTES`, is left as it is.
The generated scales use it (`repro.families.base.training_split`); paper-scale data stays streamed.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import Dataset, default_collate

MAX_BYTES = 2 * 1024**3  # a split larger than this stays streamed
_CHUNK = 512  # items collated at once while building


class ReadyTensors(Dataset):
    """A split's items collated once (`ready_tensors`): `batch(indices)` is the batch of those items."""

    def __init__(self, tensors: dict[str, torch.Tensor], source: Dataset):
        self.tensors, self.source = tensors, source
        self._len = len(next(iter(tensors.values())))

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {k: v[index] for k, v in self.tensors.items()}

    def batch(self, indices: torch.Tensor | list[int]) -> dict[str, torch.Tensor]:
        """The batch of the items at `indices` (any shape: the batch's leading dimensions are the indices')."""
        with torch.profiler.record_function("ReadyTensors.batch"):  # a profile's data time (benchmarks/)
            index = torch.as_tensor(indices, dtype=torch.long)
            return {k: v[index] for k, v in self.tensors.items()}

    def __getattr__(self, name: str) -> Any:  # the source split's attributes (num_answers, answer_vocab, ...)
        if name in ("tensors", "source"):
            raise AttributeError(name)
        return getattr(self.source, name)


def _collatable(item: Any) -> bool:
    return isinstance(item, Mapping) and all(
        isinstance(v, torch.Tensor) or (isinstance(v, numbers.Number) and not isinstance(v, complex))
        for v in item.values()
    )


def ready_tensors(split: Dataset, max_bytes: int = MAX_BYTES) -> Dataset:
    """`split` as `ReadyTensors` when its items are mappings of tensors and numbers (collated the trainer's way)
    and the whole fits in `max_bytes`; otherwise `split` itself."""
    if isinstance(split, ReadyTensors) or len(split) == 0:
        return split
    first = split[0]
    if not _collatable(first):
        return split
    per_item = sum(v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 8 for v in first.values())
    if per_item * len(split) > max_bytes:
        return split
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in first}
    for start in range(0, len(split), _CHUNK):
        try:
            chunk = default_collate([split[i] for i in range(start, min(start + _CHUNK, len(split)))])
        except (RuntimeError, TypeError):  # items of different shapes or kinds: left to the per-batch path
            return split
        if set(chunk) != set(parts):
            return split  # items with different keys: left to the per-batch path
        for k, v in chunk.items():
            parts[k].append(v)
    try:
        tensors = {k: torch.cat(v) for k, v in parts.items()}
    except RuntimeError:  # items of different shapes (a collate_fn would pad them): left as they are
        return split
    return ReadyTensors(tensors, split)
