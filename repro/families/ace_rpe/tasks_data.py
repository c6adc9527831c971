"""ALBEF's downstream json files (salesforce/ALBEF `dataset/{vqa,ve,nlvr,grounding}_dataset.py`), checked
for their layout, and the batches the heads of `heads.py` take.

- VQA (`vqa_train.json`, `vqa_test.json`, `answer_list.json`): {question_id, question, answer:
  [str, ...] (train), image, dataset: "vqa"}; an answer's weight is its share of the annotators;
  answers end with ALBEF's eos "[SEP]" and are tokenized as the decoder reads them;
- SNLI-VE (`ve_*.json`): {image: id without extension (".jpg" is appended), sentence, label};
- NLVR2 (`nlvr_*.json`): {images: [left, right], sentence, label: "True" | "False"};
- RefCOCO+ (`refcoco+_{train,val,test}.json`): {image, text, ref_id}; the gold box, split and image
  size of each ref_id come from the refer annotations (`refcoco+/refs(unc).p`, a pickled list of
  refs, and `refcoco+/instances.json`), the proposals from `refcoco+/dets.json` ({image_id: [[x, y,
  w, h, ...], ...]}), as ALBEF's `grounding_eval` reads them.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from repro.errors import ReproError
from repro.families.ace_rpe.data import Collate, load_image, pre_caption, read_entries
from repro.families.ace_rpe.heads import VE_LABELS

EOS = "[SEP]"  # ALBEF configs/VQA.yaml eos


def read_json_list(path: Path, required: dict[str, type | tuple[type, ...]]) -> list[dict[str, Any]]:
    """An ALBEF json file: a non-empty list of objects with the `required` keys of the given types."""
    entries = read_entries(path)
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or any(not isinstance(entry.get(k), t) for k, t in required.items()):
            wanted = ", ".join(required)
            raise ReproError(f"{path}: entry {i} lacks one of {wanted} (or has the wrong type): {str(entry)[:120]}")
    return entries


def pre_question(question: str, max_words: int = 30) -> str:
    """ALBEF's `pre_question`: lower case, punctuation except ' dropped, at most `max_words` words."""
    import re

    question = re.sub(r"([,.'!?\"()*#:;~])", "", question.lower()).replace("-", " ").replace("/", " ")
    return " ".join(question.rstrip(" ").split(" ")[:max_words])


# --- VQA ---


class VQATrain(Dataset):
    """ALBEF's VQA training entries of one or more files (its `train_file`: vqa_train, vqa_val, vg_qa): a VQA
    entry's answers weighted by their share of the annotators, a Visual Genome one's single answer by 0.5;
    each image under its data set's root (`roots`: "vqa", "vg"); with `crop_scale`, ALBEF's augmentations."""

    def __init__(
        self,
        paths: Path | Sequence[Path],
        roots: Path | Mapping[str, Path],
        size: int,
        crop_scale: float | None = None,
        limit: int | None = None,
    ) -> None:
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        self.entries: list[dict[str, Any]] = []
        self.firsts: list[tuple[Path, dict[str, Any]]] = []  # each file's first entry (its image checked first)
        for path in paths:
            entries = read_json_list(path, {"question_id": (int, str), "question": str, "image": str})[:limit]
            for i, entry in enumerate(entries):
                source = entry.get("dataset", "vqa")
                answer = entry.get("answer")
                if source not in ("vqa", "vg") or not (
                    isinstance(answer, str) if source == "vg" else isinstance(answer, list) and answer
                ):
                    raise ReproError(
                        f"{path}: entry {i} is not an ALBEF VQA training entry (dataset vqa with a list of answers, "
                        f"or vg with one): {str(entry)[:120]}"
                    )
            self.entries += entries
            self.firsts.append((Path(path), entries[0]))
        self.roots = {"vqa": Path(roots), "vg": Path(roots)} if isinstance(roots, (str, Path)) else dict(roots)
        self.size, self.crop_scale = size, crop_scale

    def image_path(self, entry: dict[str, Any]) -> Path:
        return self.roots[entry.get("dataset", "vqa")] / entry["image"]

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        if entry.get("dataset", "vqa") == "vg":
            answers, weights = [entry["answer"]], [0.5]
        else:
            counts = Counter(entry["answer"])
            answers, weights = list(counts), [c / len(entry["answer"]) for c in counts.values()]
        return {
            "image": load_image(self.image_path(entry), self.size, self.crop_scale),
            "caption": pre_question(entry["question"]),
            "answers": [a + EOS for a in answers],
            "weights": weights,
        }


class VQATest(Dataset):
    """ALBEF's VQA test entries ({question_id, question, image}, from a file or given), questions of up to 50
    words (ALBEF's test split); `gold`: each question's annotator answers where the file has them (val)."""

    def __init__(
        self,
        path: Path | None,
        image_root: Path,
        size: int,
        entries: list[dict[str, Any]] | None = None,
        limit: int | None = None,
    ) -> None:
        if entries is None:
            entries = read_json_list(path, {"question_id": (int, str), "question": str, "image": str})
        self.entries = entries[:limit]
        self.root, self.size = Path(image_root), size
        self.gold = {e["question_id"]: e["answer"] for e in self.entries if isinstance(e.get("answer"), list)}
        if len(self.gold) != len(self.entries):
            self.gold = None

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        image = load_image(self.root / entry["image"], self.size)
        return {"image": image, "caption": pre_question(entry["question"], 50), "question_id": entry["question_id"]}


def test2015_entries(path: Path) -> list[dict[str, Any]]:
    """The server's test2015 question file (`{"questions": [{question_id, image_id, question}]}`) as ALBEF's
    test entries, the image named as in COCO's test2015 folder: VQA v2's test set for both phases (ALBEF's
    `vqa_test.json` holds test-dev only, which the server no longer takes)."""
    try:
        questions = json.loads(Path(path).read_text())["questions"]
        return [
            {
                "question_id": q["question_id"],
                "question": q["question"],
                "image": f"test2015/COCO_test2015_{int(q['image_id']):012d}.jpg",
                "dataset": "vqa",
            }
            for q in questions
        ]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ReproError(f"{path}: not VQA v2's test2015 question file ({exc!r})") from None


def read_answer_list(path: Path) -> list[str]:
    try:
        answers = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReproError(f"{path}: not a readable answer list ({exc})") from None
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise ReproError(f"{path}: ALBEF's answer list is a non-empty json list of strings")
    return answers


def tokenize_answers(tok, answers: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    enc = tok(answers, padding="longest", return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


# --- SNLI-VE and NLVR2 ---


class VEData(Dataset):
    def __init__(
        self, path: Path, image_root: Path, size: int, crop_scale: float | None = None, limit: int | None = None
    ) -> None:
        self.entries = read_json_list(path, {"image": str, "sentence": str, "label": str})[:limit]
        for i, entry in enumerate(self.entries):
            if entry["label"] not in VE_LABELS:
                raise ReproError(f"{path}: entry {i}: label {entry['label']!r} is not one of {', '.join(VE_LABELS)}")
        self.root, self.size, self.crop_scale = Path(image_root), size, crop_scale

    def image_path(self, entry: dict[str, Any]) -> Path:
        return self.root / f"{entry['image']}.jpg"

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        image = load_image(self.image_path(entry), self.size, self.crop_scale)
        return {"image": image, "caption": pre_caption(entry["sentence"]), "label": VE_LABELS[entry["label"]]}


class NLVRData(Dataset):
    def __init__(
        self, path: Path, image_root: Path, size: int, crop_scale: float | None = None, limit: int | None = None
    ) -> None:
        self.entries = read_json_list(path, {"images": list, "sentence": str, "label": str})[:limit]
        for i, entry in enumerate(self.entries):
            if len(entry["images"]) != 2 or entry["label"] not in ("True", "False"):
                raise ReproError(f"{path}: entry {i} needs two images and label True or False: {str(entry)[:120]}")
        self.root, self.size, self.crop_scale = Path(image_root), size, crop_scale

    def image_path(self, entry: dict[str, Any]) -> Path:
        return self.root / entry["images"][0]

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        left, right = (load_image(self.root / p, self.size, self.crop_scale) for p in entry["images"])
        return {
            "image": (left, right),
            "caption": pre_caption(entry["sentence"]),
            "label": int(entry["label"] == "True"),
        }


class TaskCollate(Collate):
    """Batches of the datasets above: images stacked (NLVR2: `image` left, `image_right`), text tokenized;
    VQA training answers flattened with the index of their question and their weight."""

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        text = self.tokenize(items)
        batch: dict[str, Any] = {"input_ids": text["input_ids"], "attention_mask": text["attention_mask"]}
        if isinstance(items[0]["image"], tuple):  # NLVR2
            batch["image"] = torch.stack([it["image"][0] for it in items])
            batch["image_right"] = torch.stack([it["image"][1] for it in items])
        else:
            batch["image"] = torch.stack([it["image"] for it in items])
        if "label" in items[0]:
            batch["label"] = torch.tensor([it["label"] for it in items])
        if "answers" in items[0]:
            answers = [a for it in items for a in it["answers"]]
            batch["answer_ids"], batch["answer_mask"] = tokenize_answers(self.tok, answers)
            batch["answer_owner"] = torch.tensor([i for i, it in enumerate(items) for _ in it["answers"]])
            batch["answer_weight"] = torch.tensor([w for it in items for w in it["weights"]])
        if "question_id" in items[0]:
            batch["question_id"] = [it["question_id"] for it in items]
        return batch


# --- RefCOCO+ (weakly supervised grounding) ---


class Refer:
    """What ALBEF's grounding evaluation reads from the refer toolkit's RefCOCO+ (unc) annotations:
    per ref_id its split, gold box [x, y, w, h] and image size."""

    def __init__(self, folder: Path) -> None:
        refs_file, instances_file = Path(folder) / "refs(unc).p", Path(folder) / "instances.json"
        try:
            refs = pickle.loads(refs_file.read_bytes())
            instances = json.loads(instances_file.read_text())
        except (OSError, pickle.UnpicklingError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            what = "the refer annotations refs(unc).p and instances.json are not readable"
            raise ReproError(f"{folder}: {what} ({exc})") from None
        try:
            boxes = {a["id"]: a["bbox"] for a in instances["annotations"]}
            sizes = {i["id"]: (i["width"], i["height"]) for i in instances["images"]}
            self.refs = {
                r["ref_id"]: (r["split"], boxes[r["ann_id"]], r["image_id"], sizes[r["image_id"]]) for r in refs
            }
        except (KeyError, TypeError) as exc:
            raise ReproError(
                f"{folder}: refs(unc).p / instances.json lack {exc} (the refer toolkit's layout)"
            ) from None


def read_dets(path: Path) -> dict[str, list[list[float]]]:
    try:
        dets = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReproError(f"{path}: not a readable detection file ({exc})") from None
    if not isinstance(dets, dict) or not all(isinstance(v, list) for v in dets.values()):
        raise ReproError(f"{path}: dets.json maps each image id to a list of [x, y, w, h, ...] proposals")
    return dets


def grounding_entries(path: Path) -> list[dict[str, Any]]:
    return read_json_list(path, {"image": str, "text": str, "ref_id": int})
