"""The memory-mapped feature store: one folder per split, any sample in one slice.

Layout of `<name>.store/`:

- `features.f16`  raw float16, C order, shape [N, max_boxes, dim], zero-padded past each count
- `boxes.f32`     raw float32 [N, max_boxes, 4]: x1, y1, x2, y2 in pixels of the original image
- `counts.npy`    int32 [N] boxes per image;  `sizes.npy` int32 [N, 2] = (width, height)
- `image_ids.npy` int64 [N], the row order
- `meta.json`     shapes, dtypes, store version and whatever provenance the writer was given
- optional extras written later with `write_extra` (e.g. DSGANet depth: `depth_hist.npy`
  float16 [N, max_boxes, 16] and `depth_peak.npy` uint8 [N, max_boxes])

Boxes stay in pixels together with the image size, so every positional module derives what it
needs (POA relative geometry, PMA normalised box + area, DSGANet bbox/depth relations).

The writer builds the folder under a hidden temporary name and renames it into place on close,
so a store is complete or absent. Readers map the files lazily (also after pickling into
DataLoader workers) and never load a whole file into memory.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from repro.errors import ReproError
from repro.utils import work_dir

STORE_VERSION = 1
_META = "meta.json"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """A temporary folder next to `final` to fill; it replaces `final` (`replace_dir`) when the block ends
    normally and is removed when the block raises, so no partial folder is ever left looking complete."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, final)


def replace_dir(tmp: Path, final: Path) -> None:
    """Move the finished folder `tmp` to `final`, replacing an older one as close to atomically as a
    filesystem allows (the old folder is renamed aside first, then removed)."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(tmp, final)
    _fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class FeatureStoreWriter:
    """Write a store for up to `num_images` images; `close()` publishes it (a context manager too).

    Images beyond `max_boxes` boxes keep their first `max_boxes` (MCAN's truncation); fewer than
    `num_images` images may be added, the files are trimmed on close.
    """

    def __init__(
        self, path: Path, num_images: int, max_boxes: int = 100, dim: int = 2048, meta: dict[str, Any] | None = None
    ) -> None:
        if num_images < 0 or max_boxes <= 0 or dim <= 0:
            raise ReproError(f"{path}: bad store shape ({num_images}, {max_boxes}, {dim})")
        self.path = Path(path)
        self.num_images, self.max_boxes, self.dim = num_images, max_boxes, dim
        self.meta = dict(meta or {})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = work_dir(self.path.parent, f".{self.path.name}.tmp-")  # sweeps a killed run's folder
        rows = max(num_images, 1)  # a zero-length memmap cannot be created
        self._features = np.memmap(self.tmp / "features.f16", np.float16, "w+", shape=(rows, max_boxes, dim))
        self._boxes = np.memmap(self.tmp / "boxes.f32", np.float32, "w+", shape=(rows, max_boxes, 4))
        self._counts = np.zeros(num_images, np.int32)
        self._sizes = np.zeros((num_images, 2), np.int32)
        self._ids = np.zeros(num_images, np.int64)
        self._seen: set[int] = set()
        self.count = 0
        self.closed = False

    def add(self, image_id: int, features: np.ndarray, boxes: np.ndarray, width: int, height: int) -> None:
        """features [n, dim], boxes [n, 4] (x1, y1, x2, y2 pixels), image size in pixels."""
        if self.closed:
            raise ReproError(f"{self.path}: store already closed")
        image_id = int(image_id)
        features, boxes = np.asarray(features), np.asarray(boxes)
        if image_id in self._seen:
            raise ReproError(f"{self.path}: image {image_id} added twice")
        if self.count >= self.num_images:
            raise ReproError(f"{self.path}: more than the {self.num_images} images the store was sized for")
        if features.ndim != 2 or features.shape[1] != self.dim:
            raise ReproError(
                f"{self.path}: image {image_id}: features have shape {features.shape}, expected [n, {self.dim}]"
            )
        if boxes.shape != (features.shape[0], 4):
            raise ReproError(
                f"{self.path}: image {image_id}: boxes have shape {boxes.shape}, expected [{features.shape[0]}, 4]"
            )
        if width <= 0 or height <= 0:
            raise ReproError(f"{self.path}: image {image_id}: image size {width}x{height} is not positive")
        n = min(features.shape[0], self.max_boxes)
        row = self.count
        self._features[row, :n] = features[:n]
        self._boxes[row, :n] = boxes[:n]
        self._counts[row], self._sizes[row], self._ids[row] = n, (width, height), image_id
        self._seen.add(image_id)
        self.count += 1

    def close(self) -> Path:
        if self.closed:
            return self.path
        n = self.count
        for arr in (self._features, self._boxes):
            arr.flush()
        feat_bytes = n * self.max_boxes * self.dim * 2
        box_bytes = n * self.max_boxes * 4 * 4
        del self._features, self._boxes
        os.truncate(self.tmp / "features.f16", feat_bytes)
        os.truncate(self.tmp / "boxes.f32", box_bytes)
        np.save(self.tmp / "counts.npy", self._counts[:n])
        np.save(self.tmp / "sizes.npy", self._sizes[:n])
        np.save(self.tmp / "image_ids.npy", self._ids[:n])
        meta = {
            "version": STORE_VERSION,
            "num_images": n,
            "max_boxes": self.max_boxes,
            "dim": self.dim,
            "features_dtype": "float16",
            "boxes_dtype": "float32",
            "box_format": "x1y1x2y2 pixels",
            **self.meta,
        }
        (self.tmp / _META).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
        for name in os.listdir(self.tmp):
            with open(self.tmp / name, "rb+") as fh:
                os.fsync(fh.fileno())
        replace_dir(self.tmp, self.path)
        self.closed = True
        return self.path

    def abort(self) -> None:
        """Drop everything written so far; no store appears."""
        self.closed = True
        self.__dict__.pop("_features", None)
        self.__dict__.pop("_boxes", None)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "FeatureStoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class FeatureStore:
    """Read side: `len(store)`, `store.image_ids`, `image_id in store`, `store.get(image_id)`."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = Path(path)
        self.meta = meta
        self.max_boxes, self.dim = int(meta["max_boxes"]), int(meta["dim"])
        n = int(meta["num_images"])
        self.image_ids = np.load(self.path / "image_ids.npy")
        self.counts = np.load(self.path / "counts.npy")
        self.sizes = np.load(self.path / "sizes.npy")
        if not (len(self.image_ids) == len(self.counts) == len(self.sizes) == n):
            raise ReproError(f"{self.path}: index files disagree with meta.json on the number of images")
        self._row = {int(i): r for r, i in enumerate(self.image_ids.tolist())}
        self._maps: dict[str, np.ndarray] | None = None

    @classmethod
    def open(cls, path: Path) -> "FeatureStore":
        path = Path(path)
        try:
            meta = json.loads((path / _META).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ReproError(f"{path}: not a feature store (no {_META}); run repro prepare") from None
        except (OSError, ValueError) as exc:
            raise ReproError(f"{path}/{_META}: unreadable ({exc})") from None
        if meta.get("version") != STORE_VERSION:
            raise ReproError(
                f"{path}: store version {meta.get('version')} is not {STORE_VERSION}; run repro prepare --force"
            )
        try:
            store = cls(path, meta)
            store._mapped()
        except (OSError, ValueError, KeyError) as exc:
            raise ReproError(f"{path}: damaged feature store ({exc}); run repro prepare --force") from None
        return store

    def _mapped(self) -> dict[str, np.ndarray]:
        if self._maps is None:
            n = len(self.image_ids)
            maps: dict[str, np.ndarray] = {}
            if n:
                maps["features"] = np.memmap(
                    self.path / "features.f16", np.float16, "r", shape=(n, self.max_boxes, self.dim)
                )
                maps["boxes"] = np.memmap(self.path / "boxes.f32", np.float32, "r", shape=(n, self.max_boxes, 4))
            for extra in self.extras:
                maps[extra] = np.load(self.path / f"{extra}.npy", mmap_mode="r")
            self._maps = maps
        return self._maps

    @property
    def extras(self) -> list[str]:
        return list(self.meta.get("extras", {}))

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers map the files themselves
        state = dict(self.__dict__)
        state["_maps"] = None
        return state

    def __len__(self) -> int:
        return len(self.image_ids)

    def __contains__(self, image_id: object) -> bool:
        try:
            return int(image_id) in self._row  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def row(self, image_id: int) -> int:
        try:
            return self._row[int(image_id)]
        except KeyError:
            raise ReproError(f"{self.path}: no features for image {image_id}") from None

    def get(self, image_id: int) -> dict[str, Any]:
        """features float16 [max_boxes, dim], boxes float32 [max_boxes, 4] pixels (both zero-padded),
        count, width, height; plus any extras (e.g. depth_hist [max_boxes, 16], depth_peak)."""
        r = self.row(image_id)
        maps = self._mapped()
        out: dict[str, Any] = {
            "features": np.array(maps["features"][r]),
            "boxes": np.array(maps["boxes"][r]),
            "count": int(self.counts[r]),
            "width": int(self.sizes[r, 0]),
            "height": int(self.sizes[r, 1]),
        }
        for extra in self.extras:
            value = np.array(maps[extra][r])
            out[extra] = value.astype(np.float32) if value.dtype == np.float16 else value
        return out

    # --- extras -------------------------------------------------------------------------------

    @staticmethod
    def write_extra(path: Path, name: str, array: np.ndarray, info: dict[str, Any] | None = None) -> None:
        """Add or replace a per-image array `name` ([N, ...], rows in the store's order), atomically."""
        store = FeatureStore.open(path)
        if array.shape[0] != len(store):
            raise ReproError(f"{path}: extra {name!r} has {array.shape[0]} rows, the store {len(store)}")
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".npy", dir=path)
        os.close(fd)
        try:
            np.save(tmp, array)
            os.replace(tmp, path / f"{name}.npy")
        finally:
            Path(tmp).unlink(missing_ok=True)
        meta = dict(store.meta)
        meta.setdefault("extras", {})[name] = {
            "dtype": str(array.dtype),
            "shape": list(array.shape[1:]),
            **(info or {}),
        }
        fd, tmp = tempfile.mkstemp(prefix=".meta.", suffix=".json", dir=path)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=2, sort_keys=True)
        os.replace(tmp, path / _META)
