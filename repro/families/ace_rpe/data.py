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
`max_words` words). Images are resized to the model's square resolution (bicubic) and normalised with
ALBEF's mean and std. ALBEF's training augmentations (`dataset/__init__.py`: RandomResizedCrop with
scale (0.2, 1) for pre-training and (0.5, 1) for fine-tuning, a horizontal flip, RandomAugment(2, 7)
over Identity, AutoContrast, Equalize, Brightness, Sharpness, ShearX/Y, TranslateX/Y, Rotate) are
torchvision transforms in ALBEF; torchvision does not import beside the CPU build of torch this
project pins, so `augment` does the same with PIL (`ImageOps`, `ImageEnhance`, affine transforms).
They are applied at paper scale only: the generated scales state left/right relations that a flip
would falsify.
"""

from __future__ import annotations

import json
import math
import random
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


KEEP_BYTES = 256 * 2**20  # a process's budget for decoded images read without augmentation (`load_image`)
_kept: dict[tuple, np.ndarray] = {}
_kept_bytes = 0


def _keep_budget() -> int:
    """KEEP_BYTES in a process; in a DataLoader worker, its share of it: a loader's N workers keep KEEP_BYTES / N
    each, so that a paper-scale evaluation with its recipe's workers holds what one process would, not N times it."""
    info = torch.utils.data.get_worker_info()
    return KEEP_BYTES if info is None else KEEP_BYTES // info.num_workers


def load_image(path: Path, size: int, crop_scale: float | None = None) -> torch.Tensor:
    """An RGB image resized to size x size (bicubic, as ALBEF's test transform), normalised; (3, size, size).
    With `crop_scale`, ALBEF's training augmentations instead (`augment`, crops of at least that share).

    Read without augmentation, an image's decoded pixels (uint8, a quarter of the normalised tensor's bytes) are
    kept, keyed by its file's path, size and modification time, while the process's kept images fit in its budget
    (`_keep_budget`): a generated scale's tens of thousands of 36 px images, every task's, are decoded once a process
    instead of once an item an epoch; at paper scale the budget holds a few hundred. Each call normalises afresh, so
    callers own the tensor returned."""
    global _kept_bytes
    key = None
    if crop_scale is None:
        try:
            stat = Path(path).stat()
            key = (str(path), size, stat.st_mtime_ns, stat.st_size)
        except OSError:
            pass  # reported by the read below
        if key in _kept:
            return _normalise(_kept[key])
    pixels = _decode(path, size, crop_scale)
    if key is not None and _kept_bytes + pixels.nbytes <= _keep_budget():
        _kept[key], _kept_bytes = pixels, _kept_bytes + pixels.nbytes
    return _normalise(pixels)


def _decode(path: Path, size: int, crop_scale: float | None) -> np.ndarray:
    """The image's RGB pixels at size x size, resized or augmented: uint8, (size, size, 3)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            img = img.resize((size, size), Image.BICUBIC) if crop_scale is None else augment(img, size, crop_scale)
            return np.asarray(img, dtype=np.uint8)
    except (OSError, UnidentifiedImageError) as exc:
        raise ReproError(f"{path}: cannot read the image ({exc})") from None


_MEAN = torch.tensor(IMAGE_MEAN)[:, None, None]
_STD = torch.tensor(IMAGE_STD)[:, None, None]


def _normalise(pixels: np.ndarray) -> torch.Tensor:
    """uint8 (H, W, 3) pixels to the model's input: scaled to [0, 1], less ALBEF's mean, over its std; (3, H, W)."""
    array = torch.from_numpy(pixels.astype(np.float32) / 255.0).permute(2, 0, 1)
    return (array - _MEAN) / _STD


RANDAUGMENT = ("Identity", "AutoContrast", "Equalize", "Brightness", "Sharpness")
RANDAUGMENT += ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")


def _random_resized_crop(img, size: int, scale_min: float, rng: random.Random):
    """torchvision's RandomResizedCrop(size, scale=(scale_min, 1), ratio=(3/4, 4/3), bicubic)."""
    from PIL import Image

    width, height = img.size
    for _ in range(10):
        area = width * height * rng.uniform(scale_min, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            left, top = rng.randint(0, width - w), rng.randint(0, height - h)
            return img.resize((size, size), Image.BICUBIC, box=(left, top, left + w, top + h))
    side = min(width, height)  # the fallback: the central square
    left, top = (width - side) // 2, (height - side) // 2
    return img.resize((size, size), Image.BICUBIC, box=(left, top, left + side, top + side))


def _rand_augment(img, rng: random.Random, n: int = 2, magnitude: int = 7):
    """ALBEF's RandomAugment(2, 7): n operations drawn from RANDAUGMENT, each applied with probability 0.5
    at magnitude/10 of its range: shear 0.3, translation 10 px and rotation 30 degrees with a random sign,
    enhancement factor 0.1 + 1.8 (magnitude/10); the uncovered area grey (128)."""
    from PIL import Image, ImageEnhance, ImageOps

    level = magnitude / 10
    fill = (128, 128, 128)
    for name in rng.sample(RANDAUGMENT, n):
        if rng.random() > 0.5 or name == "Identity":
            continue
        sign = rng.choice((-1, 1))
        if name == "AutoContrast":
            img = ImageOps.autocontrast(img)
        elif name == "Equalize":
            img = ImageOps.equalize(img)
        elif name in ("Brightness", "Sharpness"):
            enhancer = ImageEnhance.Brightness if name == "Brightness" else ImageEnhance.Sharpness
            img = enhancer(img).enhance(0.1 + 1.8 * level)
        elif name == "Rotate":
            img = img.rotate(sign * level * 30, fillcolor=fill)
        else:
            shift = sign * (level * 0.3 if name.startswith("Shear") else level * 10)
            matrix = {
                "ShearX": (1, shift, 0, 0, 1, 0),
                "ShearY": (1, 0, 0, shift, 1, 0),
                "TranslateX": (1, 0, shift, 0, 1, 0),
                "TranslateY": (1, 0, 0, 0, 1, shift),
            }[name]
            img = img.transform(img.size, Image.AFFINE, matrix, fillcolor=fill)
    return img


def augment(img, size: int, scale_min: float, rng: random.Random | None = None):
    """ALBEF's training transform of a PIL image, before normalisation: random resized crop (a `scale_min` of 1:
    the whole image resized, as its grounding transform), horizontal flip (probability 0.5), RandomAugment(2, 7)."""
    from PIL import Image

    rng = rng or random.Random(random.getrandbits(64))
    if scale_min >= 1.0:  # ALBEF's grounding transform: the whole image resized, no crop
        img = img.resize((size, size), Image.BICUBIC)
    else:
        img = _random_resized_crop(img, size, scale_min, rng)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return _rand_augment(img, rng)


def tokenizer(vocab_dir: Path):
    """The BERT WordPiece tokenizer of a folder holding `vocab.txt` (bert-base-uncased's, or a generated one)."""
    from transformers import BertTokenizer

    if not (Path(vocab_dir) / "vocab.txt").is_file():
        raise ReproError(f"{vocab_dir}: no vocab.txt (the BERT vocabulary; `repro download bert-base-uncased`)")
    return BertTokenizer.from_pretrained(str(vocab_dir))


class PairDataset(Dataset):
    """One (image, caption) per item: pre-training or retrieval training (`idx` = the image's index);
    with `crop_scale`, ALBEF's training augmentations (0.2 for pre-training, 0.5 for fine-tuning)."""

    def __init__(
        self,
        entries: list[dict[str, Any]],
        image_root: Path,
        size: int,
        max_words: int = 30,
        crop_scale: float | None = None,
    ) -> None:
        self.items: list[tuple[str, str, int]] = []
        ids: dict[Any, int] = {}
        for entry in entries:
            captions = entry["caption"] if isinstance(entry["caption"], list) else [entry["caption"]]
            key = entry.get("image_id", entry["image"])
            index = ids.setdefault(key, len(ids))
            self.items += [(entry["image"], pre_caption(c, max_words), index) for c in captions]
        self.root, self.size, self.crop_scale = Path(image_root), size, crop_scale

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        image, caption, index = self.items[i]
        image = load_image(self.root / image, self.size, self.crop_scale)
        return {"image": image, "caption": caption, "idx": index}


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
