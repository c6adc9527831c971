"""Preparation of the VQA family (VQA v2, VQA v1, COCO-QA, Visual Genome QA) as MCAN does it.

`prepare_vqa(dataset, source_dir, out_dir, glove)` writes `out_dir` (normally
`<data_dir>/prepared/<dataset>/`):

- `token_vocab.json`  {token: index}, PAD = 0, UNK = 1, then words in order of first appearance
  over the questions of every split present (MCAN builds its vocabulary from train, val, test and,
  when used, VG questions alike).
- `answer_vocab.json` [answer, ...], index = class. VQA v1/v2: normalised `multiple_choice_answer`
  of train + val annotations occurring more than 8 times, in order of first appearance. This is
  MCAN's rule (its code drops answers seen `<= 8` times), which gives the 3,129 answers of VQA v2;
  the MCAN+PA paper words it "at least eight times" - we follow the code and record
  `answer_min_count` (default 9) in the manifest. COCO-QA: every one-word answer of train and test
  (435 in the paper), sorted.
- `embeddings.npy`    float32 [V, D] GloVe vectors of the token vocabulary (only when a GloVe file is
  given). PAD, UNK and words without a GloVe vector get zero rows, as spaCy's `vector` gives for
  out-of-vocabulary words. Lookup is by the exact lower-case token.
- `<split>.questions.npz` question_id, image_id (int64), tokens int64 [Q, 14], answer_type,
  question_type, answer (the multiple-choice answer, raw), and for splits with answers
  `target_index` int32 [Q, K] / `target_score` float32 [Q, K] (K <= 10, padded with -1 / 0): the
  soft scores 0.3/0.6/0.9/1.0 for answers given by 1/2/3/>=4 annotators, answers outside the vocabulary
  dropped. COCO-QA targets are its single answer with score 1.
- `manifest.json`     what produced it (source files with digests, parameters, toolkit version) and
  per-split counts; a folder whose manifest matches the inputs is not rebuilt.

COCO-QA has no question ids; a question's id is its line number (from 0) within its split.

The rest of VQA's protocol has modules of its own: `vqa_dataset.py` (prepared questions with their features,
as tensors), `vqa_features.py` (which feature store holds a split's images), `vqa_scoring.py` (a model's
answers and their VQA accuracy against the annotations) and `vqa_server.py` (the test files the evaluation
servers score, their `repro submit` commands, server scoring of generated data).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.progress import Progress

from repro.data.manifest import build_manifest, file_digest, is_current, read_manifest
from repro.data.progress import Bar
from repro.data.store import staged_dir
from repro.datasets.vqa_text import MAX_TOKENS, PAD, UNK, encode, load_glove, normalize_answer, soft_score, tokenize
from repro.errors import ReproError
from repro.utils import write_json_atomic

DATASETS = ("vqa2", "vqa1", "coco-qa")

# split -> (questions file, annotations file or None), the names inside the official zips
VQA_FILES = {
    "vqa2": {
        "train": ("v2_OpenEnded_mscoco_train2014_questions.json", "v2_mscoco_train2014_annotations.json"),
        "val": ("v2_OpenEnded_mscoco_val2014_questions.json", "v2_mscoco_val2014_annotations.json"),
        "test": ("v2_OpenEnded_mscoco_test2015_questions.json", None),
        "test-dev": ("v2_OpenEnded_mscoco_test-dev2015_questions.json", None),
    },
    "vqa1": {
        "train": ("OpenEnded_mscoco_train2014_questions.json", "mscoco_train2014_annotations.json"),
        "val": ("OpenEnded_mscoco_val2014_questions.json", "mscoco_val2014_annotations.json"),
        "test": ("OpenEnded_mscoco_test2015_questions.json", None),
        "test-dev": ("OpenEnded_mscoco_test-dev2015_questions.json", None),
    },
}
VG_FILES = ("VG_questions.json", "VG_annotations.json")
COCOQA_TYPES = {0: "object", 1: "number", 2: "color", 3: "location"}
COCOQA_FILES = ("img_ids.txt", "questions.txt", "answers.txt", "types.txt")


@dataclass
class Question:
    question_id: int
    image_id: int
    question: str
    answers: list[str] | None = None  # the annotators' answers (10 for VQA), None on test splits
    answer: str = ""
    answer_type: str = ""
    question_type: str = ""


# --- reading the official files ---------------------------------------------------------------


def find_file(root: Path, name: str) -> Path | None:
    """`root/name`, else the first `name` below `root` (archives unpack into sub-folders)."""
    if (root / name).is_file():
        return root / name
    for path in sorted(root.rglob(name)):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            return path
    return None


def _load_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise ReproError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except OSError as exc:
        raise ReproError(f"{path}: cannot read ({exc.strerror})") from None


def read_vqa_split(questions_file: Path, annotations_file: Path | None) -> list[Question]:
    data = _load_json(questions_file)
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise ReproError(f"{questions_file}: expected a JSON object with a 'questions' list")
    out = []
    for i, q in enumerate(data["questions"]):
        try:
            out.append(Question(int(q["question_id"]), int(q["image_id"]), str(q["question"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReproError(f"{questions_file}: questions[{i}]: missing or bad {exc}") from None
    if annotations_file is None:
        return out
    anns = _load_json(annotations_file)
    if not isinstance(anns, dict) or not isinstance(anns.get("annotations"), list):
        raise ReproError(f"{annotations_file}: expected a JSON object with an 'annotations' list")
    by_id: dict[int, dict] = {}
    for i, a in enumerate(anns["annotations"]):
        if not isinstance(a, dict) or "question_id" not in a or not isinstance(a.get("answers"), list):
            raise ReproError(f"{annotations_file}: annotations[{i}]: needs question_id and an answers list")
        by_id[int(a["question_id"])] = a
    for q in out:
        a = by_id.get(q.question_id)
        if a is None:
            raise ReproError(f"{annotations_file}: no annotation for question {q.question_id} of {questions_file.name}")
        try:
            q.answers = [str(x["answer"]) for x in a["answers"]]
        except (KeyError, TypeError):
            raise ReproError(f"{annotations_file}: question {q.question_id}: answers need an 'answer' field") from None
        q.answer = str(a.get("multiple_choice_answer", ""))
        q.answer_type = str(a.get("answer_type", ""))
        q.question_type = str(a.get("question_type", ""))
    return out


def read_cocoqa_split(folder: Path) -> list[Question]:
    columns = {}
    for name in COCOQA_FILES:
        path = folder / name
        try:
            columns[name] = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            raise ReproError(f"{path}: missing (COCO-QA {folder.name}/ needs {', '.join(COCOQA_FILES)})") from None
        except UnicodeDecodeError as exc:
            line = path.read_bytes()[: exc.start].count(b"\n") + 1
            raise ReproError(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None
    lengths = {name: len(lines) for name, lines in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ReproError(f"{folder}: COCO-QA files are not line-aligned ({lengths})")
    out = []
    for i, (img, question, answer, qtype) in enumerate(zip(*(columns[n] for n in COCOQA_FILES))):
        try:
            image_id, type_code = int(img), int(qtype)
        except ValueError:
            raise ReproError(f"{folder}: line {i + 1}: image id {img!r} or type {qtype!r} is not a number") from None
        kind = COCOQA_TYPES.get(type_code)
        if kind is None:
            raise ReproError(f"{folder / 'types.txt'}:{i + 1}: type {type_code} is not 0-3")
        out.append(Question(i, image_id, question, [answer.strip()], answer.strip(), kind, kind))
    return out


def discover_splits(dataset: str, source_dir: Path, vg_dir: Path | None = None) -> dict[str, tuple[Path, Path | None]]:
    """The splits whose files are present: {split: (questions file or COCO-QA folder, annotations)}."""
    if dataset not in DATASETS:
        raise ReproError(f"unknown VQA dataset {dataset!r}; one of {', '.join(DATASETS)}")
    if not source_dir.is_dir():
        raise ReproError(f"{source_dir}: no such folder; run repro download {dataset} first")
    found: dict[str, tuple[Path, Path | None]] = {}
    if dataset == "coco-qa":
        for split in ("train", "test"):
            hit = next((p.parent for p in sorted(source_dir.rglob("questions.txt")) if p.parent.name == split), None)
            if hit is not None:
                found[split] = (hit, None)
    else:
        for split, (qname, aname) in VQA_FILES[dataset].items():
            qpath = find_file(source_dir, qname)
            if qpath is None:
                continue
            apath = find_file(source_dir, aname) if aname else None
            if aname and apath is None:
                raise ReproError(f"{source_dir}: found {qname} but not {aname}")
            found[split] = (qpath, apath)
        if vg_dir is not None:
            qpath, apath = find_file(vg_dir, VG_FILES[0]), find_file(vg_dir, VG_FILES[1])
            if qpath and apath:
                found["vg"] = (qpath, apath)
    if "train" not in found:
        wanted = "train/questions.txt" if dataset == "coco-qa" else VQA_FILES[dataset]["train"][0]
        raise ReproError(f"{source_dir}: no {wanted}; run repro download {dataset} (or pass --source)")
    return found


# --- vocabularies -----------------------------------------------------------------------------


def build_token_vocab(splits: dict[str, list[Question]]) -> dict[str, int]:
    vocab = {PAD: 0, UNK: 1}
    for questions in splits.values():
        for q in questions:
            for word in tokenize(q.question):
                if word not in vocab:
                    vocab[word] = len(vocab)
    return vocab


def build_answer_vocab(dataset: str, splits: dict[str, list[Question]], min_count: int) -> list[str]:
    if dataset == "coco-qa":
        return sorted({q.answer for s in ("train", "test") for q in splits.get(s, [])})
    counts: Counter[str] = Counter()
    for split in ("train", "val"):
        counts.update(normalize_answer(q.answer) for q in splits.get(split, []))
    return [a for a, c in counts.items() if c >= min_count]  # Counter keeps first-appearance order


def targets(questions: list[Question], answer_index: dict[str, int], vqa_scores: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sparse targets: target_index [Q, K] (-1 = none) and target_score [Q, K].

    VQA (`vqa_scores`): normalised annotator answers with MCAN's soft scores. COCO-QA: its one
    answer, as given, with score 1.
    """
    rows = []
    for q in questions:
        if vqa_scores:
            counts = Counter(normalize_answer(a) for a in q.answers or [])
            rows.append([(answer_index[a], soft_score(c)) for a, c in counts.items() if a in answer_index])
        else:
            rows.append([(answer_index[a], 1.0) for a in dict.fromkeys(q.answers or []) if a in answer_index])
    k = max((len(r) for r in rows), default=0) or 1
    index = np.full((len(rows), k), -1, np.int32)
    score = np.zeros((len(rows), k), np.float32)
    for i, r in enumerate(rows):
        for j, (a, s) in enumerate(r):
            index[i, j], score[i, j] = a, s
    return index, score


# --- the whole preparation --------------------------------------------------------------------


def prepare_vqa(
    dataset: str,
    source_dir: Path,
    out_dir: Path,
    glove: Path | None = None,
    *,
    vg_dir: Path | None = None,
    max_tokens: int = MAX_TOKENS,
    answer_min_count: int = 9,
    force: bool = False,
    progress: Progress | None = None,
) -> Path:
    """Prepare `dataset` (vqa2, vqa1, coco-qa; VQA v1 and v2 add a `vg` split when `vg_dir` holds the
    MCAN VG files) from the official files under `source_dir` into `out_dir`. Returns `out_dir`."""
    found = discover_splits(dataset, Path(source_dir), vg_dir)
    sources = []
    for _split, (qpath, apath) in sorted(found.items()):
        if dataset == "coco-qa":
            sources += [file_digest(qpath / name) for name in COCOQA_FILES]
        else:
            sources += [file_digest(p) for p in (qpath, apath) if p is not None]
    if glove is not None:
        if not Path(glove).is_file():
            raise ReproError(f"{glove}: no such GloVe file")
        sources.append(file_digest(Path(glove)))
    params = {
        "dataset": dataset,
        "splits": sorted(found),
        "max_tokens": max_tokens,
        "answer_min_count": answer_min_count,
        "glove": glove is not None,
    }
    manifest = build_manifest("vqa-questions", sources, params)
    out_dir = Path(out_dir)
    if not force and is_current(read_manifest(out_dir / "manifest.json"), manifest):
        return out_dir

    bar = Bar(progress, f"read {dataset}", len(found))
    splits: dict[str, list[Question]] = {}
    for split, (qpath, apath) in found.items():
        splits[split] = read_cocoqa_split(qpath) if dataset == "coco-qa" else read_vqa_split(qpath, apath)
        bar.advance(1)
    token_vocab = build_token_vocab(splits)
    answers = build_answer_vocab(dataset, splits, answer_min_count)
    answer_index = {a: i for i, a in enumerate(answers)}

    with staged_dir(out_dir) as tmp:
        write_json_atomic(tmp / "token_vocab.json", token_vocab)
        write_json_atomic(tmp / "answer_vocab.json", answers)
        stats: dict[str, Any] = {"tokens": len(token_vocab), "answers": len(answers)}
        if glove is not None:
            vectors, dim = load_glove(Path(glove), token_vocab, progress)
            emb = np.zeros((len(token_vocab), dim), np.float32)
            for word, i in token_vocab.items():
                if word not in (PAD, UNK) and word in vectors:
                    emb[i] = vectors[word]
            np.save(tmp / "embeddings.npy", emb)
            stats["tokens_with_vectors"] = sum(1 for w in token_vocab if w in vectors and w not in (PAD, UNK))
        bar = Bar(progress, f"tokenise {dataset}", sum(len(v) for v in splits.values()))
        for split, questions in splits.items():
            arrays = question_arrays(questions, token_vocab, answer_index, max_tokens, vqa_scores=dataset != "coco-qa")
            bar.advance(len(questions))
            np.savez(tmp / f"{split}.questions.npz", **arrays)
            stats[split] = {
                "questions": len(questions),
                "images": len({q.image_id for q in questions}),
                "answers": "target_index" in arrays,
            }
        manifest["stats"] = stats
        write_json_atomic(tmp / "manifest.json", manifest)
    return out_dir


def question_arrays(
    questions: list[Question],
    token_vocab: dict[str, int],
    answer_index: dict[str, int],
    max_tokens: int,
    vqa_scores: bool,
) -> dict[str, np.ndarray]:
    """The arrays of a `<split>.questions.npz`: ids, tokens, types, the answer and, when every question has
    answers, the targets (`targets`)."""
    tokens = np.zeros((len(questions), max_tokens), np.int64)
    for i, q in enumerate(questions):
        tokens[i] = encode(tokenize(q.question), token_vocab, max_tokens)
    arrays: dict[str, np.ndarray] = {
        "question_id": np.array([q.question_id for q in questions], np.int64),
        "image_id": np.array([q.image_id for q in questions], np.int64),
        "tokens": tokens,
        "answer_type": np.array([q.answer_type for q in questions], dtype=str),
        "question_type": np.array([q.question_type for q in questions], dtype=str),
        "answer": np.array([q.answer for q in questions], dtype=str),
    }
    if questions and all(q.answers is not None for q in questions):
        arrays["target_index"], arrays["target_score"] = targets(questions, answer_index, vqa_scores=vqa_scores)
    return arrays


def load_split(prepared_dir: Path, split: str) -> dict[str, np.ndarray]:
    path = Path(prepared_dir) / f"{split}.questions.npz"
    if not path.is_file():
        have = sorted(p.name.split(".")[0] for p in Path(prepared_dir).glob("*.questions.npz"))
        raise ReproError(f"{path}: no such split; prepared splits: {', '.join(have) or 'none'} (run repro prepare)")
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def write_vqa_layout(
    questions_path: Path,
    annotations_path: Path,
    subtype: str,
    questions: list[dict],
    annotations: list[dict],
    description: str,
) -> None:
    """Write a question file and an annotation file in the official VQA v2 layout (generated data), each on one line
    as the released files are (json's C encoder; the indented one is pure Python, seconds a file at these sizes)."""
    info = {"description": description, "version": "1.0"}
    common = {"info": info, "data_type": "mscoco", "data_subtype": subtype, "license": {"name": "generated", "url": ""}}
    write_json_atomic(questions_path, {**common, "task_type": "Open-Ended", "questions": questions}, compact=True)
    write_json_atomic(annotations_path, {**common, "annotations": annotations}, compact=True)


# --- statistics of the official files ----------------------------------------------------------

STATISTICS_SPLITS = ("train", "val", "test")  # test: all of test2015 (test-dev is a part of it)


def statistics(dataset: str, root: Path) -> dict[str, Any]:
    """Images (distinct image_id of the questions), questions, and human answers (every entry of each
    annotation's `answers`, 10 per question in VQA v2) per split whose question file is under `root`;
    "all" sums questions and answers and takes the union of images when every split is present
    (answers only when every split has annotations: the test answers are not public)."""
    splits: dict[str, dict[str, Any]] = {}
    images: set[int] = set()
    for split in STATISTICS_SPLITS:
        qname, aname = VQA_FILES[dataset][split]
        qpath = find_file(root, qname) if root.is_dir() else None
        if qpath is None:
            splits[split] = {"present": False, "file": qname}
            continue
        apath = find_file(root, aname) if aname else None
        if aname and apath is None:
            splits[split] = {"present": False, "file": aname}
            continue
        questions = read_vqa_split(qpath, apath)
        split_images = {q.image_id for q in questions}
        cell: dict[str, Any] = {"present": True, "file": str(qpath), "images": len(split_images)}
        cell["questions"] = len(questions)
        if apath is not None:
            cell["answers"] = sum(len(q.answers) for q in questions)
        splits[split] = cell
        images |= split_images
    parts = [splits[s] for s in STATISTICS_SPLITS]
    splits["all"] = {"present": all(p["present"] for p in parts), "file": "every split"}
    if splits["all"]["present"]:
        splits["all"].update(images=len(images), questions=sum(p["questions"] for p in parts))
        if all("answers" in p for p in parts):
            splits["all"]["answers"] = sum(p["answers"] for p in parts)
    return {"root": str(root), "splits": splits}
