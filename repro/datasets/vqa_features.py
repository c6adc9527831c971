"""Which feature store holds the images of a VQA-family question split (VQA v1/v2, VQA over Visual Genome,
COCO-QA: all on COCO images).

`repro prepare bottom-up-36` (or `bottom-up-adaptive`, `openvqa-features`) writes one store per source split
under `<data_dir>/prepared/features/<source>/` (`repro.datasets.features`): `trainval` and `test2015` from the
bottom-up TSVs, `train2014`, `val2014` and `test2015` from OpenVQA's npz folders. A prepared question split
reads the first of its stores that is there, in the order of `FEATURE_SOURCES`.
"""

from __future__ import annotations

from pathlib import Path

from repro.errors import ReproError

FEATURE_SOURCES = ("bottom-up-36", "bottom-up-adaptive", "openvqa-features")
# prepared split -> the feature stores that hold its images, first found wins (COCO-QA: test is on val2014)
STORES_FOR_SPLIT = {
    "train": ("trainval", "train2014"),
    "val": ("trainval", "val2014"),
    "vg": ("trainval", "train2014"),
    "test": ("test2015",),
    "test-dev": ("test2015",),
}
COCOQA_STORES = {"train": ("trainval", "train2014"), "test": ("trainval", "val2014")}


def feature_folders(root: Path | None = None) -> list[Path]:
    """The prepared feature folders of every source, in the order they are searched."""
    from repro.datasets.prepare import feature_store_dir

    return [feature_store_dir(source, root) for source in FEATURE_SOURCES]


def feature_store(dataset: str, split: str, folders: list[Path]):
    """The feature store in `folders` that holds the images of a question split."""
    from repro.data.store import FeatureStore

    names = (COCOQA_STORES if dataset == "coco-qa" else STORES_FOR_SPLIT).get(split, ())
    for folder in folders:
        for name in names:
            if (folder / f"{name}.store").is_dir():
                return FeatureStore.open(folder / f"{name}.store")
    raise ReproError(
        f"no prepared feature store holds the {split!r} images of {dataset} ({' or '.join(names)}.store); run "
        f"`repro download bottom-up-36` and `repro prepare bottom-up-36` (or openvqa-features)"
    )
