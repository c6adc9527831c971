"""PSAC's released TGIF-QA frame features (HDF5) -> the toolkit's feature store.

Released layout (lixiangpengcs/PSAC's loader): one HDF5 file per feature type,
`TGIF_RESNET_pool5.hdf5` (ResNet-152 pool5, 2048-d) or `TGIF_C3D_pool5.hdf5` (4096-d); one dataset
per video, named `str(key)` with `key` the question files' column, holding float (frames, dim).

`repro prepare tgif-qa` writes one store per file present, `<data_dir>/prepared/features/tgif-qa/`
`resnet.store` / `c3d.store` (repro.data.store). A video is a store "image" whose boxes are its
frames: at most `STORE_FRAMES` kept, equally spaced (`np.linspace`, end excluded, as the code), the
count = frames kept; boxes are zeros and the size 1x1 (a frame has no box).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from rich.progress import Progress

from repro.data.progress import Bar
from repro.data.store import FeatureStoreWriter
from repro.errors import ReproError

# feature type -> (released file name, dimension)
FEATURE_FILES = {"resnet": ("TGIF_RESNET_pool5.hdf5", 2048), "c3d": ("TGIF_C3D_pool5.hdf5", 4096)}
STORE_FRAMES = 36  # the most any setting reads (paper N = 35, official code 36)
WHERE = (
    "the PSAC authors' Google Drive (lixiangpengcs/PSAC code_file/README.md): ResNet "
    "https://drive.google.com/open?id=0B15H16jpV4w2SlVleTBRT3dUTGs, C3D "
    "https://drive.google.com/open?id=0B15H16jpV4w2cFZoOXpPMlFLX3M"
)


def sample_frames(video: np.ndarray, frames: int) -> np.ndarray:
    """N equally spaced frames of a longer clip (Sec. 4.3; `linspace`, end excluded, as the code)."""
    if len(video) <= frames:
        return video
    return video[np.linspace(0, len(video), frames, endpoint=False).astype(int)]


def read_frame_hdf5(path: Path, dim: int) -> Iterator[tuple[int, np.ndarray]]:
    """(key, float32 frames x dim) for every dataset of a released feature file, in key order."""
    import h5py

    try:
        fh = h5py.File(path, "r")
    except OSError as exc:
        raise ReproError(f"{path}: not a readable HDF5 file ({exc})") from None
    with fh:
        names = list(fh.keys())
        try:
            keys = sorted((int(n), n) for n in names)
        except ValueError:
            bad = next(n for n in names if not n.lstrip("-").isdigit())
            raise ReproError(
                f"{path}: dataset {bad!r} is not a video key (released layout: one dataset per key)"
            ) from None
        for key, name in keys:
            value = fh[name]
            if not isinstance(value, h5py.Dataset) or value.ndim != 2 or value.shape[1] != dim:
                shape = getattr(value, "shape", "a group")
                raise ReproError(f"{path}: video {name} has shape {shape}, expected (frames, {dim})")
            yield key, np.asarray(value, dtype=np.float32)


def count_videos(path: Path) -> int:
    import h5py

    try:
        with h5py.File(path, "r") as fh:
            return len(fh.keys())
    except OSError as exc:
        raise ReproError(f"{path}: not a readable HDF5 file ({exc})") from None


def store_from_frame_hdf5(
    path: Path,
    out: Path,
    dim: int,
    frames: int = STORE_FRAMES,
    meta: dict | None = None,
    progress: Progress | None = None,
) -> Path:
    """One store of a released feature file: videos as images, their sampled frames as boxes."""
    n = count_videos(path)
    bar = Bar(progress, f"frames {path.name}", n)
    with FeatureStoreWriter(out, n, max_boxes=frames, dim=dim, meta=meta) as writer:
        for key, video in read_frame_hdf5(path, dim):
            video = sample_frames(video, frames)
            writer.add(key, video, np.zeros((len(video), 4), np.float32), 1, 1)
            bar.advance(1)
    return out


def find_feature_files(folders: list[Path]) -> dict[str, Path]:
    """The released feature files present in the first of `folders` that has any."""
    for folder in folders:
        found = {kind: folder / name for kind, (name, _) in FEATURE_FILES.items() if (folder / name).is_file()}
        if found:
            return found
    names = " or ".join(name for name, _ in FEATURE_FILES.values())
    raise ReproError(f"no {names} in {' or '.join(map(str, folders))}; get them from {WHERE}")
