"""Depth features for DSGANet (`dsganet` §IV-A): 16-bin depth histograms per box and per grid cell.

A depth map (PNG from any monocular estimator; the paper uses BTS) is scaled to 0..255. For each
object box the grayscale histogram of its region is taken with k = 16 bins (0-15, 16-31, ...,
240-255) and normalised to frequencies, `dep_hist` in [0, 1]^16; the bin with the highest frequency
is the object's depth `dep` ("the gray value with the highest frequency").

Choices where the paper is silent, recorded here:
- 8-bit maps are used as they are; 16-bit or 32-bit maps are rescaled linearly per image from
  their own min..max to 0..255; colour maps are converted to luminance.
- A depth map of another resolution than the image is matched by scaling the box coordinates.
  A box covers the pixels from floor(x1) to ceil(x2) (at least one pixel), clipped to the map.
- `depth_peak` is the peak bin index 0..15 (ties go to the nearer, lower bin); `peak_gray_value`
  turns it into the gray value at the bin centre (16 * bin + 7.5), which is never 0, so the
  log-ratios of eq. (4) stay finite.
- Two more scalar readings per box, for DSGANet's `depth_value` choices: `depth_mean`, the mean gray
  value of the box's pixels inside its peak bin (the bin centre when the box has no pixel), and
  `depth_mode`, its most frequent gray value.
- Grid cells: the map is split into rows x cols regions with rounded equal boundaries, numbered
  row-major (index = row * cols + col).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from rich.progress import Progress

from repro.data.manifest import folder_digest
from repro.data.progress import Bar
from repro.data.store import FeatureStore
from repro.datasets.features import image_id_from_name
from repro.errors import ReproError

BINS = 16


def load_depth_map(path: Path) -> np.ndarray:
    """A depth map as uint8 [H, W] in 0..255."""
    try:
        with Image.open(path) as img:
            if img.mode in ("RGB", "RGBA", "P", "LA"):
                img = img.convert("L")
            arr = np.asarray(img)
    except (OSError, ValueError) as exc:
        raise ReproError(f"{path}: unreadable depth map ({exc})") from None
    if arr.ndim != 2:
        raise ReproError(f"{path}: depth map has shape {arr.shape}, expected a single channel")
    if arr.dtype == np.uint8:
        return arr
    arr = arr.astype(np.float64)
    lo, hi = float(arr.min()), float(arr.max())
    if hi <= lo:
        return np.zeros(arr.shape, np.uint8)
    return np.round((arr - lo) * (255.0 / (hi - lo))).astype(np.uint8)


def _integral(depth: np.ndarray, bins: int) -> np.ndarray:
    """Per-bin summed-area tables, int32 [bins, H + 1, W + 1]."""
    index = depth.astype(np.int32) * bins // 256
    one_hot = index[None, :, :] == np.arange(bins)[:, None, None]
    table = np.zeros((bins, depth.shape[0] + 1, depth.shape[1] + 1), np.int32)
    table[:, 1:, 1:] = one_hot.cumsum(1).cumsum(2)
    return table


def region_histograms(depth: np.ndarray, regions: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Normalised histograms float32 [n, bins] of integer pixel regions [n, 4] = (x1, y1, x2, y2), x2 exclusive."""
    table = _integral(depth, bins)
    x1, y1, x2, y2 = (regions[:, i] for i in range(4))
    counts = table[:, y2, x2] - table[:, y1, x2] - table[:, y2, x1] + table[:, y1, x1]  # [bins, n]
    counts = counts.T.astype(np.float32)
    total = counts.sum(1, keepdims=True)
    return np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)


def box_regions(boxes: np.ndarray, width: int, height: int, map_shape: tuple[int, int]) -> np.ndarray:
    """Pixel boxes of the image -> integer regions of a depth map of shape (H, W)."""
    mh, mw = map_shape
    sx, sy = mw / float(width), mh / float(height)
    x1 = np.clip(np.floor(boxes[:, 0] * sx), 0, mw - 1).astype(np.int64)
    y1 = np.clip(np.floor(boxes[:, 1] * sy), 0, mh - 1).astype(np.int64)
    x2 = np.clip(np.ceil(boxes[:, 2] * sx), 0, mw).astype(np.int64)
    y2 = np.clip(np.ceil(boxes[:, 3] * sy), 0, mh).astype(np.int64)
    return np.stack([x1, y1, np.maximum(x2, x1 + 1), np.maximum(y2, y1 + 1)], 1)


def box_histograms(
    depth: np.ndarray, boxes: np.ndarray, width: int, height: int, bins: int = BINS
) -> tuple[np.ndarray, np.ndarray]:
    """(dep_hist float32 [n, bins], peak bin int64 [n]) for pixel boxes [n, 4] of a width x height image."""
    if len(boxes) == 0:
        return np.zeros((0, bins), np.float32), np.zeros(0, np.int64)
    hist = region_histograms(depth, box_regions(np.asarray(boxes, np.float64), width, height, depth.shape), bins)
    return hist, hist.argmax(1)


def region_readings(depth: np.ndarray, regions: np.ndarray, bins: int = BINS) -> dict[str, np.ndarray]:
    """Per integer region [n, 4]: `depth_hist`, `depth_peak`, `depth_mean` (mean gray value inside the peak
    bin) and `depth_mode` (most frequent gray value)."""
    hist = region_histograms(depth, regions, bins)
    peak = hist.argmax(1)
    mean, mode = np.zeros(len(regions), np.float32), np.zeros(len(regions), np.float32)
    for k, (x1, y1, x2, y2) in enumerate(regions):
        pixels = depth[y1:y2, x1:x2].ravel().astype(np.int64)
        inside = pixels[pixels * bins // 256 == peak[k]]
        mean[k] = inside.mean() if len(inside) else (peak[k] + 0.5) * 256 / bins
        mode[k] = np.bincount(pixels, minlength=256).argmax() if len(pixels) else mean[k]
    return {"depth_hist": hist, "depth_peak": peak, "depth_mean": mean, "depth_mode": mode}


def grid_regions(map_shape: tuple[int, int], rows: int, cols: int) -> np.ndarray:
    mh, mw = map_shape
    ys = np.round(np.linspace(0, mh, rows + 1)).astype(np.int64)
    xs = np.round(np.linspace(0, mw, cols + 1)).astype(np.int64)
    return np.array(
        [
            [xs[c], ys[r], max(xs[c + 1], xs[c] + 1), max(ys[r + 1], ys[r] + 1)]
            for r in range(rows)
            for c in range(cols)
        ],
        np.int64,
    )


def grid_histograms(depth: np.ndarray, rows: int, cols: int, bins: int = BINS) -> tuple[np.ndarray, np.ndarray]:
    """(dep_hist [rows * cols, bins], peak [rows * cols]) for a rows x cols grid, row-major."""
    hist = region_histograms(depth, grid_regions(depth.shape, rows, cols), bins)
    return hist, hist.argmax(1)


def peak_gray_value(peak: np.ndarray, bins: int = BINS) -> np.ndarray:
    """The object depth `dep` in 0..255: the centre of the peak bin."""
    width = 256 / bins
    return np.asarray(peak, np.float32) * width + (width - 1) / 2


def index_depth_maps(depth_dir: Path) -> dict[int, Path]:
    """{image id: PNG} for every `*.png` below `depth_dir` (id = the number after the last '_')."""
    found: dict[int, Path] = {}
    for path in sorted(Path(depth_dir).rglob("*.png")):
        try:
            found[image_id_from_name(path)] = path
        except ReproError:
            continue
    return found


def add_depth_to_store(store_path: Path, depth_dir: Path, progress: Progress | None = None) -> Path:
    """Compute `depth_hist`, `depth_peak`, `depth_mean` and `depth_mode` for every box of a feature store
    from its images' depth maps (`region_readings`)."""
    store = FeatureStore.open(store_path)
    maps = index_depth_maps(depth_dir)
    missing = [int(i) for i in store.image_ids if int(i) not in maps]
    if missing:
        raise ReproError(
            f"{depth_dir}: no depth map for {len(missing)} of {len(store)} images of {store_path} "
            f"(e.g. image {missing[0]}; expected <name>_<image id>.png)"
        )
    out = {
        "depth_hist": np.zeros((len(store), store.max_boxes, BINS), np.float16),
        "depth_peak": np.zeros((len(store), store.max_boxes), np.uint8),
        "depth_mean": np.zeros((len(store), store.max_boxes), np.float32),
        "depth_mode": np.zeros((len(store), store.max_boxes), np.float32),
    }
    bar = Bar(progress, f"depth {Path(store_path).name}", len(store))
    for row, image_id in enumerate(store.image_ids.tolist()):
        item = store.get(image_id)
        n = item["count"]
        if n:
            depth = load_depth_map(maps[image_id])
            regions = box_regions(np.asarray(item["boxes"][:n], np.float64), item["width"], item["height"], depth.shape)
            for key, value in region_readings(depth, regions).items():
                out[key][row, :n] = value
        bar.advance(1)
    info = {"source": folder_digest(Path(depth_dir), "**/*.png"), "bins": BINS}
    for key, value in out.items():
        FeatureStore.write_extra(Path(store_path), key, value, info)
    return Path(store_path)
