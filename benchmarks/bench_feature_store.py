"""Random-access reads: the memory-mapped feature store against OpenVQA-style per-image .npz files.

Generates `--images` images with 10-100 boxes each (bottom-up's adaptive range) in both layouts,
then reads them in the same shuffled order the way a training loader does: the store with one
`get` (a slice of the map), the npz baseline with `np.load`, transpose of `x` (2048, N) and
zero-padding to 100 boxes, as OpenVQA's loader does. Both deliver float32 features [100, dim] and
boxes [100, 4]; torch runs single-threaded, as in DataLoader workers. Prints samples/s of each and
the ratio.

Feature width defaults to 512 instead of 2048 to keep disk use modest (about 0.2 GB in total at
3,000 images); `--dim 2048` gives the real width.

    python -m benchmarks.bench_feature_store            # 3,000 images
    python -m benchmarks.bench_feature_store --images 500
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.progress import track

from repro.data.store import FeatureStore, FeatureStoreWriter

MAX_BOXES = 100


def generate(folder: Path, images: int, dim: int, seed: int) -> tuple[Path, Path, list[int]]:
    rng = np.random.default_rng(seed)
    npz_dir = folder / "val2014"
    npz_dir.mkdir(parents=True)
    ids = sorted(rng.choice(600_000, images, replace=False).tolist())
    store_path = folder / "val2014.store"
    with FeatureStoreWriter(store_path, images, MAX_BOXES, dim) as writer:
        for image_id in track(ids, description="generate", console=Console(stderr=True)):
            n = int(rng.integers(10, MAX_BOXES + 1))
            feats = rng.standard_normal((n, dim), dtype=np.float32)
            w, h = int(rng.integers(300, 640)), int(rng.integers(300, 640))
            xy = rng.uniform(0, [w / 2, h / 2], (n, 2))
            boxes = np.concatenate([xy, xy + rng.uniform(1, [w / 2, h / 2], (n, 2))], 1).astype(np.float32)
            np.savez(
                npz_dir / f"COCO_val2014_{image_id:012d}.jpg.npz",
                x=feats.T,
                bbox=boxes,
                num_bbox=n,
                image_h=h,
                image_w=w,
            )
            writer.add(image_id, feats, boxes, w, h)
    return store_path, npz_dir, ids


def read_npz(npz_dir: Path, image_id: int) -> tuple[np.ndarray, np.ndarray]:
    with np.load(npz_dir / f"COCO_val2014_{image_id:012d}.jpg.npz") as z:
        x = z["x"].T
        bbox = z["bbox"]
        _ = int(z["image_w"]), int(z["image_h"])
    feats = np.zeros((MAX_BOXES, x.shape[1]), np.float32)
    feats[: len(x)] = x
    boxes = np.zeros((MAX_BOXES, 4), np.float32)
    boxes[: len(bbox)] = bbox
    return feats, boxes


def read_store(store: FeatureStore, image_id: int) -> tuple[np.ndarray, np.ndarray]:
    item = store.get(image_id)
    # float16 -> float32 as VQADataset does it (torch's conversion is vectorised; numpy's is not)
    return torch.from_numpy(item["features"]).float().numpy(), item["boxes"]


def rate(fn, order: list[int], repeats: int) -> float:
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for image_id in order:
            fn(image_id)
        best = max(best, len(order) / (time.perf_counter() - start))
    return best


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--reads", type=int, default=3000, help="random reads per layout and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=None, help="where to generate (default: a temp folder)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as in DataLoader workers; one sample is too small to share across threads
    folder = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    try:
        store_path, npz_dir, ids = generate(folder, args.images, args.dim, args.seed)
        store = FeatureStore.open(store_path)
        order = np.random.default_rng(args.seed + 1).choice(ids, args.reads).tolist()
        for image_id in order[:5]:  # both layouts must give the same sample
            a, b = read_store(store, image_id), read_npz(npz_dir, image_id)
            assert np.allclose(a[0], b[0], atol=1e-2) and np.array_equal(a[1], b[1])
        npz_rate = rate(lambda i: read_npz(npz_dir, i), order, args.repeats)
        store_rate = rate(lambda i: read_store(store, i), order, args.repeats)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratio = store_rate / npz_rate
    print(f"images={args.images} dim={args.dim} max_boxes={MAX_BOXES} reads={args.reads} (best of {args.repeats})")
    print(f"per-image npz (baseline): {npz_rate:10.0f} samples/s")
    print(f"feature store (mmap):     {store_rate:10.0f} samples/s")
    print(f"ratio store / npz:        {ratio:10.1f}x")
    return ratio


if __name__ == "__main__":
    main()
