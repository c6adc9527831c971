"""Where an ace-rpe run reads its data: the BERT vocabulary, the pre-training json files with their image
folder, per retrieval data set its train and test json files and image folder, and the weights a row
starts from. At paper scale they are ALBEF's files under the data folder, checked before any training;
at the generated scales the generator's folders (`synthetic.py`, `synthetic_tasks.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES, GeneratorConfig
from repro.paths import data_dir

DEIT_FILE = "deit_base_patch16_224-b5f2ef4d.pth"  # `repro download deit-b16`
RELEASED = {"4m": "ALBEF_4M.pth", "14m": "ALBEF.pth"}  # ALBEF's pre-training checkpoints (`init: albef`)


def released_checkpoint(config: ALBEFConfig) -> Path:
    """ALBEF's released pre-training checkpoint of the row's corpus, checked: missing, the command that gets it."""
    path = data_dir() / "albef-checkpoints" / RELEASED[config.pretrain]
    if not path.is_file():
        raise ReproError(f"{path} is missing: get it with `repro download albef-checkpoints`")
    return path


PRETRAIN_FILES = {  # ALBEF's configs/Pretrain.yaml train_file; 14m adds Conceptual 12M
    "4m": ("coco.json", "vg.json", "cc3m_train.json", "cc3m_val.json", "sbu.json"),
    "14m": ("coco.json", "vg.json", "cc12m.json", "cc3m_train.json", "cc3m_val.json", "sbu.json"),
}
IMAGE_FOLDERS = {"flickr30k": "flickr30k", "coco-retrieval": "coco-images"}  # ALBEF's image_root per data set


@dataclass(frozen=True)
class Sources:
    """Where a run reads its data: the BERT vocabulary, the pre-training json files with their image
    folder, and per retrieval data set its train and test json files and image folder."""

    vocab: Path
    pretrain: tuple[tuple[Path, Path], ...]  # (json, image root)
    retrieval: dict[str, tuple[Path, Path, Path]]  # data set -> (train json, test json, image root)
    augment: bool = False  # ALBEF's training augmentations (paper scale)
    initial: tuple[Path, Path] | None = None  # DeiT-B/16 and bert-base-uncased weights pre-training starts from


def synthetic_root(settings: dict[str, Any]) -> Path:
    """The generated retrieval and pre-training data (`synthetic.py`), a folder per generator config."""
    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return data_dir() / "synthetic" / f"albef-{cfg.key()}"


def tasks_root(settings: dict[str, Any]) -> Path:
    """The generated downstream data (`synthetic_tasks.py`), a folder apart from the retrieval data."""
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig

    cfg = TaskGeneratorConfig.from_mapping(settings.get("task_generator"))
    return data_dir() / "synthetic" / f"albef-tasks-{cfg.key()}"


def paper_sources(config: ALBEFConfig, datasets: list[str]) -> Sources:
    """The paper-scale files under the data folder, checked: the first missing one is named with the
    command that gets it. ALBEF's json files (`repro download albef-data`: `data/*.json`) name the
    retrieval images relative to the data set's folder (Flickr30K: `flickr30k-images/<id>.jpg`, COCO:
    `val2014/...`); the pre-training files name absolute paths, which the user rewrites to where the
    images are (ALBEF's README), or paths relative to `albef-data/images`."""
    root = data_dir()
    albef = root / "albef-data" / "data"
    vocab = root / "bert-base-uncased"
    need = [(vocab / "vocab.txt", "repro download bert-base-uncased")]
    initial = None
    if config.init == "pretrain":  # ALBEF pre-trains from DeiT-B/16 and bert-base-uncased
        initial = (root / "deit-b16" / DEIT_FILE, vocab / "pytorch_model.bin")
        need += [(initial[0], "repro download deit-b16"), (initial[1], "repro download bert-base-uncased")]
    corpus = [] if config.init == "albef" else PRETRAIN_FILES[config.pretrain]  # released weights: no corpus
    pretrain = tuple((albef / name, root / "albef-data" / "images") for name in corpus)
    need += [(path, "repro download albef-data") for path, _ in pretrain]
    retrieval = {}
    for dataset in datasets:
        name = RETRIEVAL_NAMES[dataset]
        retrieval[dataset] = (albef / f"{name}_train.json", albef / f"{name}_test.json", root / IMAGE_FOLDERS[dataset])
        need += [(path, "repro download albef-data") for path in retrieval[dataset][:2]]
    for path, command in need:
        if not path.is_file():
            raise ReproError(f"{path} is missing: get it with `{command}`")
    return Sources(vocab=vocab, pretrain=pretrain, retrieval=retrieval, augment=True, initial=initial)


def read_split(path: Path, kind: str, image_root: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """An ALBEF json file's entries (the first `limit`), its first image checked before any training."""
    from repro.families.ace_rpe.data import read_annotations

    entries = read_annotations(path, kind)[:limit]
    first = image_root / entries[0]["image"]
    if not first.is_file():
        raise ReproError(
            f"{first} is missing (the first image of {path.name}): the images are yours to put in place "
            f"(`repro run ... --dry-run` says where)"
        )
    return entries


def synthetic_sources(root: Path, datasets: list[str]) -> Sources:
    retrieval = {d: (root / f"{n}_train.json", root / f"{n}_test.json", root) for d, n in RETRIEVAL_NAMES.items()}
    return Sources(vocab=root / "vocab", pretrain=((root / "pretrain.json", root),), retrieval=retrieval)
