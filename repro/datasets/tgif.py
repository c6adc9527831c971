"""TGIF-QA question files (Jang et al. 2017): readers, tokenisation and per-task statistics.

The official files (`YunseokJANG/tgif-qa`, `dataset/`) are tab-separated with a header row despite
their `.csv` name, one file per split (`Train`, `Test`, `Total`) and task:

  action, transition  gif_name question a1 a2 a3 a4 a5 answer vid_id key   (answer = index 0-4)
  count               gif_name question answer vid_id key                  (answer = integer count)
  frameqa             gif_name question answer type vid_id key description (type 0-3)

`key` indexes the video features; `vid_id` is a per-question id such as `ACTION1`. The synthetic
generators of this toolkit write the same layout, so one reader serves real and generated data.
The folder is `$REPRO_TGIF_DIR` if set, else `<data_dir>/tgif-qa`.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.paths import data_dir

TASKS = ("action", "transition", "count", "frameqa")
SPLITS = ("Train", "Test", "Total")
MULTIPLE_CHOICE = ("action", "transition")
NUM_CANDIDATES = 5
COLUMNS = {
    "action": ("gif_name", "question", "a1", "a2", "a3", "a4", "a5", "answer", "vid_id", "key"),
    "transition": ("gif_name", "question", "a1", "a2", "a3", "a4", "a5", "answer", "vid_id", "key"),
    "count": ("gif_name", "question", "answer", "vid_id", "key"),
    "frameqa": ("gif_name", "question", "answer", "type", "vid_id", "key", "description"),
}
# What may count as "a GIF" in Table 1; each is tried against the printed numbers (repro.families.psac).
GIF_DEFINITIONS = ("gif_name", "key", "vid_id", "question")


def tgif_dir() -> Path:
    """`$REPRO_TGIF_DIR`, else `<data_dir>/tgif-qa` (where `repro download tgif-qa` puts the files)."""
    env = os.environ.get("REPRO_TGIF_DIR")
    return Path(env) if env else data_dir() / "tgif-qa"


def file_name(split: str, task: str) -> str:
    """The official file name of a split and task, e.g. `Train_action_question.csv`."""
    split = split.capitalize()
    if split not in SPLITS:
        raise ReproError(f"unknown TGIF-QA split {split!r}; one of {', '.join(SPLITS)}")
    if task not in TASKS:
        raise ReproError(f"unknown TGIF-QA task {task!r}; one of {', '.join(TASKS)}")
    return f"{split}_{task}_question.csv"


@dataclass(frozen=True)
class Question:
    """One row of a question file; `answer` is the candidate index (action, transition), the count, or a word."""

    task: str
    gif_name: str
    question: str
    answer: str
    vid_id: str
    key: int
    candidates: tuple[str, ...] = ()
    type: int | None = None

    @property
    def label(self) -> int:
        """The index of the correct candidate (multiple choice) or the count."""
        return int(self.answer)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The raw rows of one question file, as strings, after checking its header."""
    if not path.is_file():
        raise ReproError(f"no TGIF-QA question file {path}")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = tuple(reader.fieldnames or ())
            rows = list(reader)
    except UnicodeDecodeError as exc:
        raise ReproError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except csv.Error as exc:
        raise ReproError(f"{path}:{reader.line_num}: not a readable TGIF-QA question file ({exc})") from None
    task = _task_of(path)
    if task is not None and header != COLUMNS[task]:
        raise ReproError(f"{path}: header {list(header)} is not the official {task} layout {list(COLUMNS[task])}")
    return rows


def read_questions(path: Path, task: str | None = None) -> list[Question]:
    """The questions of one file (its task from the file name unless given)."""
    task = task or _task_of(path)
    if task is None:
        raise ReproError(f"{path}: cannot tell the task from the file name; pass task=")
    out = []
    for i, row in enumerate(read_rows(path)):
        try:
            out.append(
                Question(
                    task=task,
                    gif_name=row["gif_name"],
                    question=row["question"],
                    answer=row["answer"],
                    vid_id=row["vid_id"],
                    key=int(row["key"]),
                    candidates=tuple(row[f"a{j}"] for j in range(1, NUM_CANDIDATES + 1))
                    if task in MULTIPLE_CHOICE
                    else (),
                    type=int(row["type"]) if task == "frameqa" else None,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ReproError(f"{path}: row {i + 2} is malformed ({exc})") from None
    return out


def _task_of(path: Path) -> str | None:
    m = re.fullmatch(r"(Train|Test|Total)_(action|transition|count|frameqa)_question\.csv", Path(path).name)
    return m.group(2) if m else None


# --- text ----------------------------------------------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lower case, punctuation removed, split on blanks (psac Sec. 4.3)."""
    return _PUNCT.sub(" ", text.lower()).split()


def build_vocab(texts: Iterable[str], specials: tuple[str, ...] = ("<pad>", "<unk>")) -> dict[str, int]:
    """Word (or, with `chars`, character) vocabulary in first-seen order after the special tokens."""
    vocab = {s: i for i, s in enumerate(specials)}
    for text in texts:
        for token in tokenize(text):
            vocab.setdefault(token, len(vocab))
    return vocab


def build_char_vocab(words: Iterable[str], specials: tuple[str, ...] = ("<pad>", "<unk>")) -> dict[str, int]:
    vocab = {s: i for i, s in enumerate(specials)}
    for word in words:
        for ch in word:
            vocab.setdefault(ch, len(vocab))
    return vocab


# --- statistics (psac Table 1) -------------------------------------------------------------------


def statistics(root: Path | None = None) -> dict[str, Any]:
    """QA pairs and distinct GIFs (under each of GIF_DEFINITIONS) per task and split, from the files present.

    Returns {"root", "cells": {task: {split: {"file", "present", "qa_pairs", "distinct": {definition: n}}}}};
    a missing file's cell has present False and no counts. Split names are lower case (train, test, total).
    """
    root = Path(root) if root is not None else tgif_dir()
    cells: dict[str, dict[str, Any]] = {}
    for task in TASKS:
        cells[task] = {}
        for split in SPLITS:
            path = root / file_name(split, task)
            cell: dict[str, Any] = {"file": path.name, "present": path.is_file()}
            if cell["present"]:
                rows = read_rows(path)
                cell["qa_pairs"] = len(rows)
                cell["distinct"] = {d: len({_gif_value(r, d) for r in rows}) for d in GIF_DEFINITIONS}
                cell["distinct"]["question (lower case)"] = len({r["question"].lower() for r in rows})
            cells[task][split.lower()] = cell
    return {"root": str(root), "cells": cells}


def _gif_value(row: dict[str, str], definition: str) -> str:
    return row[definition]
