"""Depth maps from images with GLPN trained on NYU-Depth V2 (`transformers`), for DSGANet's depth features.

The paper estimates depth with BTS trained on NYU-Depth V2, which no maintained library ships; BTS output
is accepted as PNGs (`repro prepare depth --source`). This is the documented alternative, a deviation:
GLPN (Kim et al. 2022), the same training data, through `transformers.GLPNForDepthEstimation` and its
image processor, weights from `<data_dir>/glpn-nyu` (`repro download glpn-nyu`: the vinvino02/glpn-nyu
release). Per image: the processor's input (RGB, rescaled to 0..1, sides cut to multiples of 32), the
predicted metric depth resized back to the image's size (bicubic, as the model card does), and written as
an 8-bit PNG with gray = round(255 * depth / max_depth) (max_depth = 10 m for NYU): one absolute scale for
every image, 0 = at the camera, as `repro.datasets.depth` reads maps. The PNG keeps the image's file stem,
so `<name>_<image id>.png` finds its image id as BTS output does. Images of one size go through GLPN together,
`BATCH` at a time (COCO's 123k images come in a few sizes); each map is the one GLPN gives the image alone.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image
from rich.progress import Progress

from repro.data.progress import Bar
from repro.errors import ReproError
from repro.paths import data_dir

GLPN_FOLDER = "glpn-nyu"  # catalog entry: data_dir()/glpn-nyu
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
BATCH = 16  # images of one size through GLPN at once
WINDOW = 64 * BATCH  # images whose sizes are read ahead to form batches of one size


def load_estimator(folder: Path | None = None):
    """(model, image processor) from a folder holding a GLPN config, weights and preprocessor config."""
    from transformers import GLPNForDepthEstimation, GLPNImageProcessorPil

    folder = Path(folder) if folder is not None else data_dir() / GLPN_FOLDER
    has_weights = any((folder / name).is_file() for name in ("model.safetensors", "pytorch_model.bin"))
    if not (folder / "config.json").is_file() or not has_weights:
        raise ReproError(
            f"{folder}: no GLPN weights (config.json and model.safetensors or pytorch_model.bin); "
            f"run repro download {GLPN_FOLDER}"
        )
    try:
        model = GLPNForDepthEstimation.from_pretrained(folder).eval()
    except (OSError, ValueError) as exc:
        raise ReproError(f"{folder}: cannot load GLPN ({exc})") from None
    processor = (
        GLPNImageProcessorPil.from_pretrained(folder)
        if (folder / "preprocessor_config.json").is_file()
        else GLPNImageProcessorPil()
    )
    return model, processor


def estimate(model, processor, image: Image.Image) -> np.ndarray:
    """Metric depth float32 [H, W] at the image's size, computed on the model's device."""
    return estimate_batch(model, processor, [image])[0]


def estimate_batch(model, processor, images: list[Image.Image]) -> list[np.ndarray]:
    """`estimate` of several images of one size in one pass of the model."""
    import torch

    from repro.train.distributed import model_device

    sizes = {image.size for image in images}
    if len(sizes) != 1:
        raise ReproError(f"a GLPN batch takes images of one size, got {sorted(sizes)}")
    width, height = sizes.pop()
    device = model_device(model)
    rgb = [image.convert("RGB") for image in images]
    inputs = {k: v.to(device) for k, v in processor(images=rgb, return_tensors="pt").items()}
    with torch.no_grad():
        predicted = model(**inputs).predicted_depth  # [B, h, w]
    resized = torch.nn.functional.interpolate(
        predicted[:, None], size=(height, width), mode="bicubic", align_corners=False
    )
    return list(resized[:, 0].clamp_min(0).cpu().numpy().astype(np.float32))


def to_gray(depth: np.ndarray, max_depth: float) -> np.ndarray:
    """uint8 gray values: round(255 * depth / max_depth), clipped to 0..255."""
    return np.clip(np.round(depth * (255.0 / max_depth)), 0, 255).astype(np.uint8)


def depth_maps(
    images: Path,
    out_dir: Path,
    weights: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
    device: str | None = None,
    batch_size: int = BATCH,
) -> Path:
    """Write `<stem>.png` depth maps in `out_dir` for every image below `images` (existing maps are kept); GLPN
    runs on `device` (auto, None: a GPU when there is one, else the CPU; cpu, cuda, cuda:N), on up to `batch_size`
    images of one size at a time."""
    from repro.train.distributed import DistEnv, device_for

    images = Path(images)
    files = sorted(p for p in images.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES) if images.is_dir() else []
    if not files:
        raise ReproError(f"{images}: no images ({', '.join(IMAGE_SUFFIXES)})")
    model, processor = load_estimator(weights)
    model.to(device_for(DistEnv(), device))
    max_depth = float(getattr(model.config, "max_depth", 10.0))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bar = Bar(progress, f"depth maps {images.name}", len(files))
    todo = [p for p in files if force or not (out_dir / f"{p.stem}.png").exists()]
    bar.advance(len(files) - len(todo))
    for start in range(0, len(todo), WINDOW):
        for batch in _same_size_batches(todo[start : start + WINDOW], batch_size):
            _write_maps(model, processor, batch, out_dir, max_depth)
            bar.advance(len(batch))
    return out_dir


def _same_size_batches(paths: list[Path], batch_size: int) -> list[list[Path]]:
    """`paths` grouped by image size (read from each file's header), in batches of at most `batch_size`."""
    by_size: dict[tuple[int, int], list[Path]] = {}
    for path in paths:
        try:
            with Image.open(path) as img:
                by_size.setdefault(img.size, []).append(path)
        except (OSError, ValueError) as exc:
            raise ReproError(f"{path}: unreadable image ({exc})") from None
    return [group[i : i + batch_size] for group in by_size.values() for i in range(0, len(group), batch_size)]


def _write_maps(model, processor, paths: list[Path], out_dir: Path, max_depth: float) -> None:
    from repro.utils import write_bytes_atomic

    loaded = []
    try:
        for path in paths:
            with Image.open(path) as img:
                img.load()
                loaded.append(img.copy())
    except (OSError, ValueError) as exc:
        raise ReproError(f"{path}: unreadable image ({exc})") from None
    for path, depth in zip(paths, estimate_batch(model, processor, loaded)):
        buf = io.BytesIO()
        Image.fromarray(to_gray(depth, max_depth), mode="L").save(buf, format="PNG")
        write_bytes_atomic(out_dir / f"{path.stem}.png", buf.getvalue())
