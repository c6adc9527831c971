"""Depth maps from images with GLPN trained on NYU-Depth V2 (`transformers`), for DSGANet's depth features.

The paper estimates depth with BTS trained on NYU-Depth V2, which no maintained library ships; BTS output
is accepted as PNGs (`repro prepare depth --source`). This is the documented alternative, a deviation:
GLPN (Kim et al. 2022), the same training data, through `transformers.GLPNForDepthEstimation` and its
image processor, weights from `<data_dir>/glpn-nyu` (`repro download glpn-nyu`: the vinvino02/glpn-nyu
release). Per image: the processor's input (RGB, rescaled to 0..1, sides cut to multiples of 32), the
predicted metric depth resized back to the image's size (bicubic, as the model card does), and written as
an 8-bit PNG with gray = round(255 * depth / max_depth) (max_depth = 10 m for NYU): one absolute scale for
every image, 0 = at the camera, as `repro.datasets.depth` reads maps. The PNG keeps the image's file stem,
so `<name>_<image id>.png` finds its image id as BTS output does.
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
    import torch

    from repro.train.distributed import model_device

    device = model_device(model)
    inputs = {k: v.to(device) for k, v in processor(images=image.convert("RGB"), return_tensors="pt").items()}
    with torch.no_grad():
        predicted = model(**inputs).predicted_depth  # [1, h, w]
    resized = torch.nn.functional.interpolate(
        predicted[:, None], size=(image.height, image.width), mode="bicubic", align_corners=False
    )
    return resized[0, 0].clamp_min(0).cpu().numpy().astype(np.float32)


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
) -> Path:
    """Write `<stem>.png` depth maps in `out_dir` for every image below `images` (existing maps are kept); GLPN
    runs on `device` (auto, None: a GPU when there is one, else the CPU; cpu, cuda, cuda:N)."""
    from repro.train.distributed import DistEnv, device_for
    from repro.utils import write_bytes_atomic

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
    for path in files:
        target = out_dir / f"{path.stem}.png"
        if force or not target.exists():
            try:
                with Image.open(path) as img:
                    gray = to_gray(estimate(model, processor, img), max_depth)
            except (OSError, ValueError) as exc:
                raise ReproError(f"{path}: unreadable image ({exc})") from None
            buf = io.BytesIO()
            Image.fromarray(gray, mode="L").save(buf, format="PNG")
            write_bytes_atomic(target, buf.getvalue())
        bar.advance(1)
    return out_dir
