"""GQA (balanced split): the released question files, their statistics, and their preparation.

Official layout (`repro download gqa` unpacks questions1.2.zip under `<data_dir>/gqa/`): one JSON
object per file, `questionId (str) -> {imageId, question, answer, fullAnswer, isBalanced, groups,
entailed, equivalent, types {structural, semantic, detailed}, annotations, semantic, semanticStr}`;
the test and submission files have no answer fields. Question ids are strings (leading zeros are
part of the id) and stay strings here.

Statistics (Table III of DSGANet): per split the distinct `imageId`s, the questions, and the question
vocabulary: distinct words of the question texts under MCAN's tokenisation (`vqa_text.tokenize`: lower
case, punctuation removed, '-' and '/' split); "all" takes the union of images and words and the sum of
questions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from repro.datasets.vqa import find_file
from repro.datasets.vqa_text import tokenize
from repro.errors import ReproError
from repro.paths import data_dir

# split -> the balanced question file of questions1.2.zip
BALANCED_FILES = {
    "train": "train_balanced_questions.json",
    "val": "val_balanced_questions.json",
    "test-dev": "testdev_balanced_questions.json",
    "test": "test_balanced_questions.json",
}
SUBMISSION_FILE = "submission_all_questions.json"  # every id the EvalAI server requires


def gqa_dir() -> Path:
    return data_dir() / "gqa"


def read_questions(path: Path) -> dict[str, dict[str, Any]]:
    """A GQA question file: {questionId: record}, each record with at least imageId and question."""
    from repro.metrics.io import open_regular

    try:
        with open_regular(path) as fh:  # a FIFO or a device is refused, the size capped
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ReproError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReproError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(data, dict):
        raise ReproError(f"{path}: expected a GQA question file {{questionId: {{imageId, question, ...}}}}")
    for qid, record in data.items():
        if not isinstance(record, dict) or not isinstance(record.get("question"), str) or "imageId" not in record:
            raise ReproError(f"{path}: question {qid!r} needs 'imageId' and a 'question' string")
    return data


def statistics(root: Path | None = None) -> dict[str, Any]:
    """Images, questions and question vocabulary per balanced split present under `root` (and "all")."""
    root = Path(root) if root is not None else gqa_dir()
    splits: dict[str, dict[str, Any]] = {}
    images: set[str] = set()
    words: set[str] = set()
    total = 0
    for split, name in BALANCED_FILES.items():
        path = find_file(root, name) if root.is_dir() else None
        if path is None:
            splits[split] = {"present": False, "file": name}
            continue
        questions = read_questions(path)
        split_images = {str(q["imageId"]) for q in questions.values()}
        split_words = {w for q in questions.values() for w in tokenize(q["question"])}
        splits[split] = {
            "present": True,
            "file": str(path),
            "images": len(split_images),
            "questions": len(questions),
            "vocab": len(split_words),
        }
        images |= split_images
        words |= split_words
        total += len(questions)
    complete = all(s["present"] for s in splits.values())
    splits["all"] = {"present": complete, "file": "every balanced split"}
    if complete:
        splits["all"].update(images=len(images), questions=total, vocab=len(words))
    return {"root": str(root), "splits": splits}


# --- preparation: questions and vocabularies -------------------------------------------------------

PREPARED_SPLITS = {**BALANCED_FILES, "submission": SUBMISSION_FILE}
N_OFFSET = 10**10  # image number of GQA's "n<digits>" test images: N_OFFSET + digits (Visual Genome ids are below)


def image_number(image_id: str) -> int:
    """The integer a feature store keys an image by: a Visual Genome id as it is, `n<digits>` as N_OFFSET + digits."""
    text = str(image_id)
    if text.isdigit():
        return int(text)
    if text[:1] == "n" and text[1:].isdigit():
        return N_OFFSET + int(text[1:])
    raise ReproError(f"GQA image id {text!r} is neither a Visual Genome number nor n<digits>")


def answer_type(record: dict[str, Any]) -> str:
    """binary / open as the official evaluation splits them (open: structural type "query")."""
    from repro.metrics.gqa import answer_type as of_structural

    return of_structural(str((record.get("types") or {}).get("structural", "")))


def prepare_gqa(source_dir: Path, out_dir: Path, *, force: bool = False, max_tokens: int | None = None) -> Path:
    """Prepare the balanced split's question files under `source_dir` into `out_dir`, in the layout of
    `repro.datasets.vqa` (`<split>.questions.npz`, `token_vocab.json`, `answer_vocab.json`, `manifest.json`):
    question_key (GQA's string id), question_id (its integer), image_id (`image_number`), tokens, answer,
    answer_type (binary/open), question_type (structural type) and, for splits with answers, the target (the
    one answer, score 1). Answers: every answer of train and val, most frequent first (ties alphabetical)."""
    from collections import Counter

    from repro.data.manifest import build_manifest, file_digest, is_current, read_manifest
    from repro.data.store import staged_dir
    from repro.datasets.vqa import Question, build_token_vocab, question_arrays
    from repro.datasets.vqa_text import MAX_TOKENS
    from repro.utils import write_json_atomic

    max_tokens = max_tokens or MAX_TOKENS
    source_dir = Path(source_dir)
    found = {s: p for s, name in PREPARED_SPLITS.items() if (p := find_file(source_dir, name)) is not None}
    if "train" not in found:
        raise ReproError(f"{source_dir}: no {BALANCED_FILES['train']} (run repro download gqa first)")
    manifest = build_manifest(
        "gqa-questions",
        [file_digest(p) for _, p in sorted(found.items())],
        {"splits": sorted(found), "max_tokens": max_tokens},
    )
    out_dir = Path(out_dir)
    if not force and is_current(read_manifest(out_dir / "manifest.json"), manifest):
        return out_dir
    records = {split: read_questions(path) for split, path in found.items()}
    splits: dict[str, list[Question]] = {}
    for split, items in records.items():
        questions = []
        for key, r in items.items():
            if not str(key).isdigit():
                raise ReproError(f"{found[split]}: question id {key!r} is not a number")
            q = Question(int(key), image_number(r["imageId"]), r["question"])
            if "answer" in r:
                q.answer = str(r["answer"])
                q.answers = [q.answer]
            q.answer_type, q.question_type = answer_type(r), str((r.get("types") or {}).get("structural", ""))
            questions.append(q)
        splits[split] = questions
    counts = Counter(q.answer for s in ("train", "val") for q in splits.get(s, []) if q.answers)
    answers = sorted(counts, key=lambda a: (-counts[a], a))
    answer_index = {a: i for i, a in enumerate(answers)}
    token_vocab = build_token_vocab(splits)
    with staged_dir(out_dir) as tmp:
        write_json_atomic(tmp / "token_vocab.json", token_vocab)
        write_json_atomic(tmp / "answer_vocab.json", answers)
        stats: dict[str, Any] = {"tokens": len(token_vocab), "answers": len(answers)}
        for split, questions in splits.items():
            arrays = question_arrays(questions, token_vocab, answer_index, max_tokens, vqa_scores=False)
            arrays["question_key"] = np.array(list(records[split]), dtype=str)
            np.savez(tmp / f"{split}.questions.npz", **arrays)
            stats[split] = {"questions": len(questions), "images": len({q.image_id for q in questions})}
        manifest["stats"] = stats
        write_json_atomic(tmp / "manifest.json", manifest)
    return out_dir


# --- preparation: the released object and spatial features ----------------------------------------

OBJECTS_INFO, SPATIAL_INFO = "gqa_objects_info.json", "gqa_spatial_info.json"
GRID = 7  # the spatial features are 7 x 7 cells of 2048 channels


def _h5(folder: Path, name: str, cache: dict):
    import h5py

    if name not in cache:
        path = find_file(folder, name)
        if path is None:
            raise ReproError(f"{folder}: no {name} (named in the info file)")
        try:
            cache[name] = h5py.File(path, "r")
        except OSError as exc:
            raise ReproError(f"{path}: not a readable HDF5 file ({exc})") from None
    return cache[name]


def _info(folder: Path, name: str) -> dict[str, dict[str, Any]]:
    path = find_file(folder, name)
    if path is None:
        raise ReproError(f"{folder}: no {name} (run repro download gqa-features first)")
    with open(path, encoding="utf-8") as fh:
        try:
            info = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ReproError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(info, dict):
        raise ReproError(f"{path}: expected {{imageId: {{file, idx, ...}}}}")
    return info


def store_from_gqa(folder: Path, kind: str, out: Path, dim: int = 2048, meta: dict | None = None) -> Path:
    """A feature store of GQA's `objects` (gqa_objects_*.h5: `features` (n, 100, 2048), `bboxes` (n, 100, 4),
    first `objectsNum` rows valid) or `spatial` features (gqa_spatial_*.h5: `features` (n, 2048, 7, 7), stored as
    49 cells, row-major, each with its cell's box in the image; the image size comes from the objects info)."""
    from repro.data.store import FeatureStoreWriter
    from repro.datasets.depth import grid_regions

    folder = Path(folder)
    objects = _info(folder, OBJECTS_INFO)
    info = objects if kind == "objects" else _info(folder, SPATIAL_INFO)
    files: dict = {}
    max_boxes = 100 if kind == "objects" else GRID * GRID
    try:
        with FeatureStoreWriter(out, len(info), max_boxes=max_boxes, dim=dim, meta=meta) as writer:
            for image_id, entry in info.items():
                size = objects.get(image_id)
                if size is None or "width" not in size or "height" not in size:
                    raise ReproError(f"{folder}: no width/height of image {image_id} in {OBJECTS_INFO}")
                h5 = _h5(folder, f"gqa_{kind}_{int(entry['file'])}.h5", files)
                idx = int(entry["idx"])
                width, height = int(size["width"]), int(size["height"])
                if kind == "objects":
                    n = int(entry["objectsNum"])
                    features, boxes = h5["features"][idx][:n], h5["bboxes"][idx][:n]
                else:
                    features = np.asarray(h5["features"][idx]).reshape(dim, GRID * GRID).T
                    boxes = grid_regions((height, width), GRID, GRID).astype(np.float32)
                writer.add(image_number(image_id), features, boxes, width, height)
    finally:
        for h5 in files.values():
            h5.close()
    return out
