"""ALBEF's data: its json annotation files, images from disk, captions through the BERT tokenizer.

Layouts (salesforce/ALBEF `data/*.json`, Karpathy splits for retrieval):
- pre-training (`coco.json`, `vg.json`, `cc3m_train.json`, `sbu.json`...): a list of
  {"image": path, "caption": str or [str, ...]};
- retrieval train (`flickr30k_train.json`, `coco_train.json`): a list of
  {"image": path, "caption": str, "image_id": id}, one entry per caption;
- retrieval val/test (`flickr30k_test.json`, `coco_test.json`...): a list of
  {"image": path, "caption": [str, ...]}, one entry per image.
Image paths are relative to an image root the user gives (the images are not in the json).

Captions are cleaned as ALBEF's `pre_caption` does (lower case, punctuation dropped, at most
`max_words` words). Images are resized to the model's square resolution and normalised with ALBEF's
mean and std through PIL and torch; ALBEF's training augmentations (random resized crop, flip,
RandAugment) come from torchvision, which is optional here and not used: the generated scales state
left/right relations that a flip would falsify.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from repro.errors import ReproError
from repro.families.ace_rpe.model import IMAGE_MEAN, IMAGE_STD


def pre_caption(caption: str, max_words: int = 30) -> str:
    """ALBEF's caption cleaning: lower case, punctuation to spaces, at most `max_words` words."""
    caption = re.sub(r"([,.'!?\"()*#:;~])", "", caption.lower()).replace("-", " ").replace("/", " ")
    words = re.sub(r"\s{2,}", " ", caption).rstrip("\n").strip(" ").split(" ")
    return " ".join(words[:max_words])


def read_entries(path: Path) -> list[Any]:
    """An ALBEF json annotation file: a non-empty list (its entries unchecked)."""
    try:
        entries = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReproError(f"{path}: not a readable ALBEF annotation file ({exc})") from None
    if not isinstance(entries, list) or not entries:
        raise ReproError(f"{path}: an ALBEF annotation file is a non-empty list of entries")
    return entries


def read_annotations(path: Path, kind: str) -> list[dict[str, Any]]:
    """One ALBEF json file, checked for its layout (`pretrain`, `train` or `test`)."""
    entries = read_entries(path)
    for i, entry in enumerate(entries):
        caption = entry.get("caption") if isinstance(entry, dict) else None
        ok = isinstance(entry, dict) and isinstance(entry.get("image"), str)
        if kind == "test":
            ok = ok and isinstance(caption, list) and all(isinstance(c, str) for c in caption)
        elif kind == "train":
            ok = ok and isinstance(caption, str) and "image_id" in entry
        else:
            ok = ok and (isinstance(caption, str) or isinstance(caption, list))
        if not ok:
            raise ReproError(f"{path}: entry {i} is not an ALBEF {kind} entry: {str(entry)[:120]}")
    return entries


def load_image(path: Path, size: int) -> torch.Tensor:
    """An RGB image resized to size x size (bicubic, as ALBEF's test transform), normalised; (3, size, size)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img = img.convert("RGB").resize((size, size), Image.BICUBIC)
    except (OSError, UnidentifiedImageError) as exc:
        raise ReproError(f"{path}: cannot read the image ({exc})") from None
    array = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
    mean = torch.tensor(IMAGE_MEAN)[:, None, None]
    std = torch.tensor(IMAGE_STD)[:, None, None]
    return (array - mean) / std


def tokenizer(vocab_dir: Path):
    """The BERT WordPiece tokenizer of a folder holding `vocab.txt` (bert-base-uncased's, or a generated one)."""
    from transformers import BertTokenizer

    if not (Path(vocab_dir) / "vocab.txt").is_file():
        raise ReproError(f"{vocab_dir}: no vocab.txt (the BERT vocabulary; `repro download bert-base-uncased`)")
    return BertTokenizer.from_pretrained(str(vocab_dir))


class PairDataset(Dataset):
    """One (image, caption) per item: pre-training or retrieval training (`idx` = the image's index)."""

    def __init__(self, entries: list[dict[str, Any]], image_root: Path, size: int, max_words: int = 30) -> None:
        self.items: list[tuple[str, str, int]] = []
        ids: dict[Any, int] = {}
        for entry in entries:
            captions = entry["caption"] if isinstance(entry["caption"], list) else [entry["caption"]]
            key = entry.get("image_id", entry["image"])
            index = ids.setdefault(key, len(ids))
            self.items += [(entry["image"], pre_caption(c, max_words), index) for c in captions]
        self.root, self.size = Path(image_root), size

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        image, caption, index = self.items[i]
        return {"image": load_image(self.root / image, self.size), "caption": caption, "idx": index}


class Collate:
    """Batches of PairDataset items: images stacked, captions tokenized (padded to the longest)."""

    def __init__(self, tok, max_tokens: int) -> None:
        self.tok, self.max_tokens = tok, max_tokens

    def tokenize(self, items: list[dict[str, Any]]):
        return self.tok(
            [it["caption"] for it in items],
            padding="longest",
            truncation=True,
            max_length=self.max_tokens,
            return_tensors="pt",
        )

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        text = self.tokenize(items)
        return {
            "image": torch.stack([it["image"] for it in items]),
            "input_ids": text["input_ids"],
            "attention_mask": text["attention_mask"],
            "idx": torch.tensor([it["idx"] for it in items]),
        }


class RetrievalTest:
    """A retrieval val/test file: images, texts, and ALBEF's img2txt / txt2img links."""

    def __init__(self, entries: list[dict[str, Any]], image_root: Path, max_words: int = 30) -> None:
        self.images, self.texts, self.img2txt, self.txt2img = [], [], [], []
        for i, entry in enumerate(entries):
            self.images.append(Path(image_root) / entry["image"])
            self.img2txt.append([])
            for caption in entry["caption"]:
                self.img2txt[i].append(len(self.texts))
                self.texts.append(pre_caption(caption, max_words))
                self.txt2img.append(i)
