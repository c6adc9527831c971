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
    def __init__(self, path: Path, image_root: Path, size: int) -> None:
        self.entries = read_json_list(path, {"question_id": int, "question": str, "image": str, "answer": list})
        self.root, self.size = Path(image_root), size

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        counts = Counter(entry["answer"])
        return {
            "image": load_image(self.root / entry["image"], self.size),
            "caption": pre_question(entry["question"]),
            "answers": [a + EOS for a in counts],
            "weights": [c / len(entry["answer"]) for c in counts.values()],
        }


class VQATest(Dataset):
    def __init__(self, path: Path, image_root: Path, size: int) -> None:
        self.entries = read_json_list(path, {"question_id": int, "question": str, "image": str})
        self.root, self.size = Path(image_root), size

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        image = load_image(self.root / entry["image"], self.size)
        return {"image": image, "caption": pre_question(entry["question"]), "question_id": entry["question_id"]}


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
    def __init__(self, path: Path, image_root: Path, size: int) -> None:
        self.entries = read_json_list(path, {"image": str, "sentence": str, "label": str})
        for i, entry in enumerate(self.entries):
            if entry["label"] not in VE_LABELS:
                raise ReproError(f"{path}: entry {i}: label {entry['label']!r} is not one of {', '.join(VE_LABELS)}")
        self.root, self.size = Path(image_root), size

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        image = load_image(self.root / f"{entry['image']}.jpg", self.size)
        return {"image": image, "caption": pre_caption(entry["sentence"]), "label": VE_LABELS[entry["label"]]}


class NLVRData(Dataset):
    def __init__(self, path: Path, image_root: Path, size: int) -> None:
        self.entries = read_json_list(path, {"images": list, "sentence": str, "label": str})
        for i, entry in enumerate(self.entries):
            if len(entry["images"]) != 2 or entry["label"] not in ("True", "False"):
                raise ReproError(f"{path}: entry {i} needs two images and label True or False: {str(entry)[:120]}")
        self.root, self.size = Path(image_root), size

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: int) -> dict[str, Any]:
        entry = self.entries[i]
        left, right = (load_image(self.root / p, self.size) for p in entry["images"])
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
