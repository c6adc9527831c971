"""A tiny TGIF-QA data folder in the official layouts, for paper-scale runs of psac on a CPU.

`write_psac_paper_fixtures(root)` writes, under the data folder `root` (what `REPRO_DATA_DIR` names):

- `tgif-qa/{Train,Test,Total}_<task>_question.csv`: the question files of YunseokJANG/tgif-qa, tab-separated
  with a header row despite the name, in each task's official columns (repro.datasets.tgif.COLUMNS);
- `tgif-qa-features/TGIF_RESNET_pool5.hdf5` (and `TGIF_C3D_pool5.hdf5` with `c3d=True`): PSAC's released
  frame features, one dataset per video named `str(key)`, float (frames, 2048 or 4096), clips both
  longer and shorter than the model's frames;
- `glove-6b/glove.6B.300d.txt`: GloVe's text layout (a word, then 300 numbers, per line) for the words of the
  questions and candidates, except `NOT_IN_GLOVE` (a word the table must leave at zero), plus a few others.

Nothing here is a real question; the words and answers are made up so that every task has a few questions
per split. Keys are sparse (not 0..n-1), as the real files' are. A run reads the frames from the store that
`repro prepare tgif-qa` makes of the HDF5 file (with `REPRO_DATA_DIR` = `root`), as a user's run does.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

TASKS = ("action", "transition", "count", "frameqa")
COLUMNS = {
    "action": ("gif_name", "question", "a1", "a2", "a3", "a4", "a5", "answer", "vid_id", "key"),
    "transition": ("gif_name", "question", "a1", "a2", "a3", "a4", "a5", "answer", "vid_id", "key"),
    "count": ("gif_name", "question", "answer", "vid_id", "key"),
    "frameqa": ("gif_name", "question", "answer", "type", "vid_id", "key", "description"),
}
SUBJECTS = ("man", "woman", "cat", "dog", "girl", "boy")
ACTIONS = ("wave hand", "nod head", "jump", "blink eyes", "shake head", "clap hands", "turn around", "smile")
OBJECTS = ("cup", "hat", "guitar", "phone", "ball", "car")
COLOURS = ("red", "blue", "black", "white")
PLACES = ("stage", "kitchen", "street", "beach")
NOT_IN_GLOVE = "blink"
GLOVE_DIM = 300
DIMS = {"resnet": ("TGIF_RESNET_pool5.hdf5", 2048), "c3d": ("TGIF_C3D_pool5.hdf5", 4096)}


@dataclass
class PsacPaperFixtures:
    """What was written: the data folder, the question and feature folders, the video keys, and the number of
    questions of each (split, task) file."""

    root: Path
    questions: Path
    features: Path
    keys: list[int]
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    glove: dict[str, np.ndarray] = field(default_factory=dict)  # the vectors written, by word


def _rows(task: str, split: str, keys: list[int], n: int, rng: np.random.Generator) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        key = keys[(i * 3 + (0 if split == "Train" else 1)) % len(keys)]
        who = SUBJECTS[int(rng.integers(len(SUBJECTS)))]
        gif = f"tumblr_fixture{key:05d}_250"
        row = {"gif_name": gif, "vid_id": f"{task.upper()}{split}{i}", "key": str(key)}
        if task in ("action", "transition"):
            picks = [ACTIONS[j] for j in rng.choice(len(ACTIONS), size=5, replace=False)]
            answer = int(rng.integers(5))
            if task == "action":
                row["question"] = f"What does the {who} do {int(rng.integers(2, 6))} times ?"
            else:
                other = ACTIONS[int(rng.integers(len(ACTIONS)))]
                row["question"] = f"What does the {who} do {'after' if i % 2 else 'before'} {other} ?"
            row.update({f"a{j + 1}": p for j, p in enumerate(picks)}, answer=str(answer))
        elif task == "count":
            act = ACTIONS[int(rng.integers(len(ACTIONS)))]
            row.update(question=f"How many times does the {who} {act} ?", answer=str(int(rng.choice([0, 2, 3, 4, 7]))))
        else:
            kind = i % 4  # 0 object, 1 number, 2 colour, 3 location
            thing = OBJECTS[int(rng.integers(len(OBJECTS)))]
            answer, question = {
                0: (thing, f"what is the {who} holding ?"),
                1: (str(int(rng.integers(2, 5))), f"how many {thing}s are there ?"),
                2: (COLOURS[int(rng.integers(len(COLOURS)))], f"what is the color of the {thing} ?"),
                3: (PLACES[int(rng.integers(len(PLACES)))], f"where is the {who} standing ?"),
            }[kind]
            row.update(question=question, answer=answer, type=str(kind), description=f"a {who} with a {thing} .")
        rows.append(row)
    return rows


def _write_tsv(path: Path, task: str, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS[task], delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def write_psac_paper_fixtures(
    root: Path,
    *,
    videos: int = 8,
    train: int = 6,
    test: int = 4,
    c3d: bool = False,
    seed: int = 0,
) -> PsacPaperFixtures:
    """TGIF-QA's question files (`train` and `test` questions per task, `Total` = both) and PSAC's HDF5 frame
    features of `videos` videos under the data folder `root`, in the official layouts."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    questions, features = root / "tgif-qa", root / "tgif-qa-features"
    questions.mkdir(parents=True, exist_ok=True)
    features.mkdir(parents=True, exist_ok=True)
    keys = [26 + 13 * k for k in range(videos)]  # sparse, as the real files' keys
    info = PsacPaperFixtures(root, questions, features, keys)
    for task in TASKS:
        split_rows = {"Train": _rows(task, "Train", keys, train, rng), "Test": _rows(task, "Test", keys, test, rng)}
        split_rows["Total"] = split_rows["Train"] + split_rows["Test"]
        for split, rows in split_rows.items():
            _write_tsv(questions / f"{split}_{task}_question.csv", task, rows)
            info.counts[(split, task)] = len(rows)
    words = set()
    for path in sorted(questions.glob("Total_*_question.csv")):
        text = path.read_text(encoding="utf-8").split("\n", 1)[1]
        words |= set(re.findall(r"[a-z0-9]+", text.lower()))
    glove = root / "glove-6b"
    glove.mkdir(parents=True, exist_ok=True)
    with open(glove / f"glove.6B.{GLOVE_DIM}d.txt", "w", encoding="utf-8") as fh:
        for word in sorted(words - {NOT_IN_GLOVE}) + ["zebra", "umbrella"]:
            info.glove[word] = rng.normal(size=GLOVE_DIM).round(5).astype(np.float32)
            fh.write(word + " " + " ".join(f"{v:.5f}" for v in info.glove[word]) + "\n")
    lengths = [40, 3, 36, 12, 50, 1, 35, 20]  # longer than the 35 frames read (sampled), shorter (padded)
    for kind in ("resnet", "c3d") if c3d else ("resnet",):
        name, dim = DIMS[kind]
        with h5py.File(features / name, "w") as fh:
            for k, key in enumerate(keys):
                frames = rng.normal(size=(lengths[k % len(lengths)], dim)).astype(np.float32)
                fh.create_dataset(str(key), data=frames)
    return info
