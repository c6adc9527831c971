"""Readers for the official bottom-up feature layouts and conversion into feature stores.

- Bottom-up TSV (peteanderson80/bottom-up-attention, `tools/read_tsv.py`): tab-separated, no
  header, columns `image_id, image_w, image_h, num_boxes, boxes, features`; `boxes` and `features`
  are base64 of float32 arrays of shape (num_boxes, 4) pixels x1,y1,x2,y2 and (num_boxes, 2048).
- OpenVQA / mcan-vqa per-image npz: `COCO_<split>_<12-digit id>.jpg.npz` with `x` float32
  (2048, N) channel-first, `bbox` (N, 4) pixels, `num_bbox`, `image_h`, `image_w`. The image id is
  the number after the last underscore of the file name. Arrays already stored (N, 2048) are
  accepted too (GQA's conversion uses that orientation).

Stores are written one per source split: a TSV becomes `<split>.store` named by the part of its
file name before the first underscore (`trainval_resnet101_...tsv` -> `trainval`), an npz folder
becomes `<folder name>.store` (`train2014`, `val2014`, `test2015`).
"""

from __future__ import annotations

import base64
import binascii
import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
from rich.progress import Progress

from repro.data.progress import Bar
from repro.data.store import FeatureStoreWriter
from repro.errors import ReproError
from repro.utils import csv_field_limit

TSV_FIELDS = ("image_id", "image_w", "image_h", "num_boxes", "boxes", "features")


class ImageFeatures(NamedTuple):
    image_id: int
    width: int
    height: int
    boxes: np.ndarray  # [n, 4] float32 pixels
    features: np.ndarray  # [n, dim] float32


def count_lines(path: Path) -> int:
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def read_bottom_up_tsv(path: Path, dim: int = 2048) -> Iterator[ImageFeatures]:
    with csv_field_limit(sys.maxsize), open(path, newline="", encoding="ascii", errors="strict") as fh:
        reader = csv.reader(fh, delimiter="\t")
        for line, row in enumerate(reader, 1):
            if not row:
                continue
            if len(row) != len(TSV_FIELDS):
                raise ReproError(
                    f"{path}:{line}: expected {len(TSV_FIELDS)} tab-separated fields "
                    f"({', '.join(TSV_FIELDS)}), found {len(row)}"
                )
            try:
                image_id, width, height, n = (int(v) for v in row[:4])
                boxes = np.frombuffer(base64.b64decode(row[4]), np.float32).reshape(n, 4)
                feats = np.frombuffer(base64.b64decode(row[5]), np.float32).reshape(n, -1)
            except (ValueError, binascii.Error) as exc:
                raise ReproError(f"{path}:{line}: malformed bottom-up row ({exc})") from None
            if feats.shape[1] != dim:
                raise ReproError(f"{path}:{line}: features have {feats.shape[1]} dimensions, expected {dim}")
            yield ImageFeatures(image_id, width, height, boxes, feats)


def image_id_from_name(path: Path) -> int:
    """`COCO_train2014_000000000009.jpg.npz` -> 9 (the number after the last underscore)."""
    stem = path.name.split(".")[0]
    try:
        return int(stem.rsplit("_", 1)[-1])
    except ValueError:
        raise ReproError(f"{path}: cannot read an image id from the file name") from None


def read_openvqa_npz(path: Path, dim: int = 2048) -> ImageFeatures:
    try:
        with np.load(path) as z:
            missing = [k for k in ("x", "bbox", "image_w", "image_h") if k not in z.files]
            if missing:
                raise ReproError(
                    f"{path}: missing key(s) {', '.join(missing)} (OpenVQA layout: x, bbox, num_bbox, image_w, image_h)"
                )
            x, bbox = np.asarray(z["x"], np.float32), np.asarray(z["bbox"], np.float32)
            width, height = int(z["image_w"]), int(z["image_h"])
            num = int(z["num_bbox"]) if "num_bbox" in z.files else None
    except (OSError, ValueError) as exc:
        raise ReproError(f"{path}: unreadable npz ({exc})") from None
    if x.ndim != 2 or dim not in x.shape:
        raise ReproError(f"{path}: x has shape {x.shape}, expected ({dim}, N)")
    feats = x.T if x.shape[0] == dim and x.shape[1] != dim else x  # official layout is (2048, N)
    if bbox.shape != (feats.shape[0], 4) or (num is not None and num != feats.shape[0]):
        raise ReproError(f"{path}: {feats.shape[0]} features but bbox {bbox.shape}, num_bbox {num}")
    return ImageFeatures(image_id_from_name(path), width, height, bbox, feats)


def tsv_split_name(path: Path) -> str:
    return path.name.split("_")[0].split(".")[0]


def store_from_tsv(
    tsv: Path,
    out: Path,
    max_boxes: int = 100,
    dim: int = 2048,
    meta: dict | None = None,
    progress: Progress | None = None,
) -> Path:
    n = count_lines(tsv)
    bar = Bar(progress, f"features {tsv.name}", n)
    with FeatureStoreWriter(out, n, max_boxes=max_boxes, dim=dim, meta=meta) as writer:
        for item in read_bottom_up_tsv(tsv, dim):
            writer.add(item.image_id, item.features, item.boxes, item.width, item.height)
            bar.advance(1)
    return out


def store_from_npz_dir(
    folder: Path,
    out: Path,
    max_boxes: int = 100,
    dim: int = 2048,
    meta: dict | None = None,
    progress: Progress | None = None,
) -> Path:
    files = sorted(folder.glob("*.npz"))
    if not files:
        raise ReproError(f"{folder}: no .npz feature files")
    bar = Bar(progress, f"features {folder.name}", len(files))
    with FeatureStoreWriter(out, len(files), max_boxes=max_boxes, dim=dim, meta=meta) as writer:
        for path in files:
            item = read_openvqa_npz(path, dim)
            writer.add(item.image_id, item.features, item.boxes, item.width, item.height)
            bar.advance(1)
    return out
