"""PSAC's data interface: TGIF-QA question files + per-video frame features -> model batches.

A data folder holds the official question files (`Train_<task>_question.csv`, `Test_...`); the
frame features, indexed by the files' `key`, are `features.npy` in the same folder, a float array
(videos, frames, d_v) (the generated scales), or a frame store made by `repro prepare tgif-qa`
from the released HDF5 file (repro.datasets.tgif_features).
Vocabularies are built the way the official code builds them: words and characters of every
question and candidate of the task's files (train and test, its `Total` file), FrameQA answers over
the same files. Multiple-choice questions become 5 sequences, the question's words followed by one
candidate's (official code), truncated to M words.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from repro.data.store import FeatureStore
from repro.datasets.tgif import MULTIPLE_CHOICE, Question, build_char_vocab, file_name, read_questions, tokenize
from repro.datasets.tgif_features import sample_frames
from repro.errors import ReproError

PAD, UNK = 0, 1
GLOVE_FILE = "glove.6B.{dim}d.txt"  # the official code's frozen word vectors, GloVe 6B (`repro download glove-6b`)


@dataclass
class Vocab:
    words: dict[str, int]
    chars: dict[str, int]
    answers: dict[str, int]  # FrameQA only


def texts_of(questions: list[Question]) -> list[str]:
    return [t for q in questions for t in (q.question, *q.candidates)]


def build_vocab(task: str, questions: list[Question]) -> Vocab:
    words = {"<pad>": PAD, "<unk>": UNK}
    for text in texts_of(questions):
        for w in tokenize(text):
            words.setdefault(w, len(words))
    chars = build_char_vocab(w for w in words if not w.startswith("<"))
    answers: dict[str, int] = {}
    if task == "frameqa":
        for q in questions:
            answers.setdefault(q.answer, len(answers))
    return Vocab(words, chars, answers)


def glove_file(dim: int) -> Path | None:
    """`glove.6B.<dim>d.txt` in the `glove-6b` data folder (or below it, where the archive unpacked it), or None."""
    from repro.paths import data_dir

    folder, name = data_dir() / "glove-6b", GLOVE_FILE.format(dim=dim)
    if (folder / name).is_file():
        return folder / name
    return next(iter(sorted(folder.rglob(name))), None) if folder.is_dir() else None


def glove_table(words: dict[str, int], dim: int) -> torch.Tensor:
    """The frozen word table of a vocabulary at paper scale, [V, dim] rows of GloVe 6B (the official code's
    `from_pretrained(..., freeze=True)`); <pad>, <unk> and words GloVe lacks get zero rows."""
    from repro.datasets.vqa_text import load_glove

    path = glove_file(dim)
    if path is None:
        raise ReproError(
            f"no {GLOVE_FILE.format(dim=dim)} (GloVe 6B) for psac's word table; run `repro download glove-6b`"
        )
    found, got = load_glove(path, [w for w in words if not w.startswith("<")])
    if got != dim:
        raise ReproError(f"{path}: {got}-d vectors, psac's word_dim is {dim}")
    table = torch.zeros(len(words), dim)
    for word, i in words.items():
        if word in found:
            table[i] = torch.from_numpy(found[word])
    return table


def encode_text(tokens: list[str], vocab: Vocab, max_words: int, max_chars: int) -> tuple[np.ndarray, np.ndarray]:
    w = np.zeros(max_words, dtype=np.int64)
    c = np.zeros((max_words, max_chars), dtype=np.int64)
    for i, tok in enumerate(tokens[:max_words]):
        w[i] = vocab.words.get(tok, UNK)
        for j, ch in enumerate(tok[:max_chars]):
            c[i, j] = vocab.chars.get(ch, UNK)
    return w, c


class VideoFeatures:
    """The frames of a video by key: from a (videos, frames, d) array or a frame store."""

    def __init__(self, source: np.ndarray | FeatureStore):
        self.source = source

    @classmethod
    def open(cls, root: Path, store: Path | None = None) -> VideoFeatures:
        if store is not None:
            return cls(FeatureStore.open(store))
        path = Path(root) / "features.npy"
        if not path.is_file():
            raise ReproError(f"{root}: no features.npy (frame features indexed by key)")
        return cls(np.load(path, mmap_mode="r"))

    def __contains__(self, key: int) -> bool:
        if isinstance(self.source, FeatureStore):
            return key in self.source
        return 0 <= key < len(self.source)

    def __getitem__(self, key: int) -> np.ndarray:
        if isinstance(self.source, FeatureStore):
            item = self.source.get(key)
            return item["features"][: item["count"]].astype(np.float32)
        return np.asarray(self.source[key], dtype=np.float32)


class TgifTask(Dataset):
    """One task's split: items {video, words, chars, target, question_id}."""

    def __init__(
        self,
        root: Path,
        task: str,
        split: str,
        vocab: Vocab,
        *,
        max_words: int,
        max_chars: int,
        frames: int,
        features: VideoFeatures | None = None,
        limit: int | None = None,
    ):
        self.task, self.split = task, split
        self.questions = read_questions(Path(root) / file_name(split, task))[:limit]  # --limit: the first N
        self.features = features if features is not None else VideoFeatures.open(root)
        self.frames = frames
        n = len(self.questions)
        c = 5 if task in MULTIPLE_CHOICE else 1
        self.words = np.zeros((n, c, max_words), dtype=np.int64)
        self.chars = np.zeros((n, c, max_words, max_chars), dtype=np.int64)
        self.keys = np.array([q.key for q in self.questions], dtype=np.int64)
        absent = [int(k) for k in self.keys if int(k) not in self.features]
        if absent:
            raise ReproError(f"{root}: {file_name(split, task)}: key {absent[0]} has no frame features")
        for i, q in enumerate(self.questions):
            base = tokenize(q.question)
            seqs = [base + tokenize(cand) for cand in q.candidates] if c > 1 else [base]
            for j, toks in enumerate(seqs):
                self.words[i, j], self.chars[i, j] = encode_text(toks, vocab, max_words, max_chars)
        if task == "frameqa":
            self.targets = torch.tensor([vocab.answers.get(q.answer, -100) for q in self.questions])
        elif task == "count":
            self.targets = torch.tensor([float(q.answer) for q in self.questions])
        else:
            self.targets = torch.tensor([q.label for q in self.questions])

    def __len__(self) -> int:
        return len(self.questions)

    def video(self, key: int) -> torch.Tensor:
        v = sample_frames(self.features[key], self.frames)  # N equally spaced frames (Sec. 4.3)
        if len(v) < self.frames:  # shorter clips: zero padding on the left (code)
            v = np.concatenate([np.zeros((self.frames - len(v), v.shape[1]), np.float32), v])
        return torch.from_numpy(v)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "video": self.video(int(self.keys[i])),
            "words": torch.from_numpy(self.words[i]),
            "chars": torch.from_numpy(self.chars[i]),
            "target": self.targets[i],
            "question_id": torch.tensor(i),
        }


def load_task(
    root: Path,
    task: str,
    sizes: dict,
    splits: tuple[str, ...] = ("Train", "Test"),
    store: Path | None = None,
    limit: int | None = None,
):
    """(vocab, {split: TgifTask}) for a task, the vocabulary over all its splits' files; the frames from
    `store` (a prepared frame store) or `root/features.npy`; with `limit` (`repro run --limit N`) each split
    keeps its first N questions (the vocabulary, and so the model, stays that of the whole files)."""
    questions = [q for s in splits for q in read_questions(Path(root) / file_name(s, task))]
    vocab = build_vocab(task, questions)
    features = VideoFeatures.open(root, store)
    data = {
        s: TgifTask(
            root,
            task,
            s,
            vocab,
            max_words=sizes["max_words"],
            max_chars=sizes["max_chars"],
            frames=sizes["frames"],
            features=features,
            limit=limit,
        )
        for s in splits
    }
    return vocab, data
