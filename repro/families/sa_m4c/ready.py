"""A generated split held as ready tensors: every item of a `data.TextVQADataset` computed once, kept stacked.

An item of the reader (`TextVQADataset.__getitem__`) tokenises its question, looks up its features, builds the PHOC
and word vector of each OCR token and labels the spatial graph of its boxes: about 1.7 ms a question on one core,
a third of a training step's time at the synthetic sizes, paid again in every epoch and by every (row, seed) unit.
`ready_items(dataset, cache_dir)` computes every item once through that same code and keeps the split as stacked
tensors (the OCR tokens' PHOC and word vectors as indices into one table of the split's words); the file goes to
`cache_dir`, named by the hash of everything an item depends on (the questions, the input files' sizes and dates,
the vocabularies, the model sizes that shape an item, the graph thresholds), written whole and renamed into place,
read back with `weights_only=True`. The spatial graph is kept; M4C-Random's graph (a function of the run's seed and
the image) is drawn in memory per dataset, by the reader's own rule. `ReadyItems[i]` is the reader's item `i`,
value for value (tests/families/sa_m4c/test_ready.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

VERSION = 1  # bump when an item's contents change
ANSWER_KEYS = ("targets", "prev_inds", "step_mask")
ITEM_SIZES = ("max_question_tokens", "max_objects", "max_ocr_tokens", "decode_steps", "fasttext_dim", "phoc_dim")


class ReadyItems:
    """The items of one split as stacked tensors; `[i]` gives the reader's item i."""

    def __init__(self, tensors: dict[str, torch.Tensor], phoc: torch.Tensor, fasttext: torch.Tensor):
        self.t, self.phoc, self.fasttext = tensors, phoc, fasttext
        self.answered = bool(tensors["answered"].all())

    def __len__(self) -> int:
        return len(self.t["question_id"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        t = self.t
        words = t["ocr_words"][index]
        item = {k: t[k][index] for k in ITEM_KEYS}
        item["ocr_fasttext"], item["ocr_phoc"] = self.fasttext[words], self.phoc[words]
        if bool(t["answered"][index]):
            item.update({k: t[k][index] for k in ANSWER_KEYS})
        return item

    def with_relations(self, relations: torch.Tensor) -> ReadyItems:
        """The same items over another spatial graph ([N, n, n] labels: M4C-Random's)."""
        return ReadyItems({**self.t, "relations": relations}, self.phoc, self.fasttext)


ITEM_KEYS = (
    "question_ids",
    "question_mask",
    "obj_features",
    "obj_boxes",
    "obj_mask",
    "ocr_features",
    "ocr_boxes",
    "ocr_mask",
    "relations",
    "question_id",
)


def cache_key(dataset, inputs: dict[str, Path]) -> str:
    """The hash of what the items of `dataset` depend on: its questions, the input files (path, size, date), the
    answer and word-piece vocabularies, the sizes that shape an item and the graph's thresholds."""
    files = {}
    for name, path in sorted(inputs.items()):
        path = Path(path)
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:  # a feature store is a folder of files
            stat = f.stat()
            files[f"{name}/{f.relative_to(path)}"] = [str(f.resolve()), stat.st_size, stat.st_mtime_ns]
    questions = hashlib.sha256(json.dumps(dataset.questions, sort_keys=True).encode()).hexdigest()
    vocab = sorted(dataset.tokenizer.get_vocab().items())
    blob = {
        "version": VERSION,
        "questions": questions,
        "files": files,
        "answer_vocab": dataset.answer_vocab,
        "word_pieces": hashlib.sha256(json.dumps(vocab).encode()).hexdigest(),
        "sizes": {k: dataset.s[k] for k in ITEM_SIZES},
        "graph": [dataset.overlap_iou, dataset.distance_threshold],
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def build(dataset) -> dict[str, Any]:
    """Every item of `dataset` through the reader's own code, stacked, with the spatial graph."""
    items = [dataset.compute_item(k, graph="spatial") for k in range(len(dataset))]
    words: dict[str, int] = {"": 0}  # row 0: the zeros of a padded OCR slot
    ocr_words = torch.zeros(len(items), dataset.s["max_ocr_tokens"], dtype=torch.long)
    for k in range(len(items)):
        for i, token in enumerate(dataset.ocr_tokens(k)):
            ocr_words[k, i] = words.setdefault(token, len(words))
    vocabulary = list(words)
    phoc = torch.zeros(len(vocabulary), dataset.s["phoc_dim"])
    fasttext = torch.zeros(len(vocabulary), dataset.s["fasttext_dim"])
    for k, item in enumerate(items):  # each word's rows as the reader made them
        n = int(item["ocr_mask"].sum())
        phoc[ocr_words[k, :n]] = item["ocr_phoc"][:n]
        fasttext[ocr_words[k, :n]] = item["ocr_fasttext"][:n]
    answered = torch.tensor(["targets" in item for item in items], dtype=torch.bool)
    tensors = {key: torch.stack([item[key] for item in items]) for key in ITEM_KEYS}
    for key in ANSWER_KEYS:
        shape = next((item[key] for item in items if key in item), None)
        if shape is not None:
            tensors[key] = torch.stack([item[key] if key in item else torch.zeros_like(shape) for item in items])
    tensors.update(ocr_words=ocr_words, answered=answered)
    return {"tensors": tensors, "phoc": phoc, "fasttext": fasttext}


def ready_items(dataset, cache_dir: Path | None, inputs: dict[str, Path]) -> ReadyItems:
    """The split's ready items: read from `cache_dir` when its file for this data is there, else built and (with a
    `cache_dir`) written there; M4C-Random's graph drawn for the dataset's seed."""
    path = None if cache_dir is None else Path(cache_dir) / f"{cache_key(dataset, inputs)}.pt"
    held = None
    if path is not None and path.is_file():
        try:
            held = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # a cut or foreign file: built again and replaced
            held = None
    if held is None:
        held = build(dataset)
        if path is not None:
            _save_atomic(held, path)
    items = ReadyItems(held["tensors"], held["phoc"], held["fasttext"])
    if dataset.graph == "random":
        items = items.with_relations(torch.stack([dataset.relations_of(k) for k in range(len(dataset))]))
    return items


def _save_atomic(data: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(data, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
