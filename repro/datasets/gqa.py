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
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ReproError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except OSError as exc:
        raise ReproError(f"{path}: cannot read ({exc.strerror})") from None
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
