"""dsganet's data: generated scenes at the smoke and synthetic scales (`synthetic.py`), the prepared VQA v2
data with depth added at paper scale, and the questions as a row's model reads them (depth readings from the
store, BERT's WordPiece ids), a unit's train and val splits in its row's features.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.utils.data import Dataset

from repro.datasets.vqa_features import feature_folders, feature_store
from repro.errors import ReproError
from repro.families.base import RunContext
from repro.families.dsganet import build
from repro.families.dsganet.config import DSGANetConfig
from repro.paths import data_dir
from repro.specs import Spec


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Generate and prepare the data at synthetic/smoke scale; find the prepared real data at paper scale."""
    if scale == "paper":
        return paper_data(spec)
    from repro.data.generated import generating
    from repro.datasets.vqa import prepare_vqa
    from repro.families.dsganet.synthetic import GeneratorConfig, generate

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"dsganet-vqa2-{cfg.key()}"
    with generating(root):  # one process writes it; others wait, then find it
        sources = generate(root / "raw", cfg)
        prepare_vqa("vqa2", root / "raw", root / "prepared", glove=None)
    return {**sources, "prepared": root / "prepared"}


DEPTH_KEYS = ("depth_hist", "depth_peak", "depth_mean", "depth_mode")


def paper_data(spec: Spec) -> dict[str, Path]:
    """The real data of a val-scored VQA v2 table: prepared questions, the train and val object stores with
    their depth extras, the val files for scoring. Anything missing is named with the command that makes it."""
    from repro.datasets.prepare import prepared_dir
    from repro.datasets.vqa import VQA_FILES, find_file

    build.refuse_control_at_paper_scale(spec)
    dataset = spec.datasets[0]
    if dataset != "vqa2" or spec.split != "val":
        raise ReproError(
            f"{spec.id}: paper-scale DSGANet runs the val-scored VQA v2 tables (VI and VII) so far; "
            f"{dataset} scored on {spec.split} is not wired yet; run --scale synthetic or smoke"
        )
    prepared = prepared_dir(dataset)
    if not (prepared / "manifest.json").is_file():
        raise ReproError(
            f"{spec.id}: paper-scale training needs the prepared VQA v2 data; run `repro download vqa2 "
            f"bottom-up-36` and `repro prepare vqa2` and `repro prepare bottom-up-36` first"
        )
    raw = data_dir() / dataset
    data: dict[str, Path] = {"prepared": prepared}
    for key, name in (
        ("val_questions", VQA_FILES[dataset]["val"][0]),
        ("val_annotations", VQA_FILES[dataset]["val"][1]),
    ):
        path = find_file(raw, name)
        if path is None:
            raise ReproError(f"{raw / name}: missing; the val split is scored from it: `repro download {dataset}`")
        data[key] = path
    for split in ("train", "val"):
        store = feature_store(dataset, split, feature_folders())
        if not set(DEPTH_KEYS) <= set(store.extras):
            raise ReproError(
                f"{store.path}: no depth extras ({', '.join(DEPTH_KEYS)}); estimate depth maps with `repro prepare "
                f"depth-maps --source <COCO images>` (or use BTS PNGs) and add them with `repro prepare depth "
                f"--store {store.path} --source <depth maps>`"
            )
        data[f"{split}_features"] = store.path
    return data


def questions(config: DSGANetConfig, sizes: dict[str, Any], split):
    """The split as the row's model reads it: BERT over a WordPiece vocabulary (`bert_vocab` set, as at paper
    sizes) also gets the questions in WordPiece ids, [CLS] first (`bert_ids`); the generated scales' tiny BERT
    reads the prepared word ids."""
    if config.question_encoder != "bert" or not sizes["bert_vocab"]:
        return split
    from repro.datasets.wordpiece import WordPieceQuestions, bert_vocab_file

    return WordPieceQuestions(split, bert_vocab_file(), sizes["max_tokens"] + 2, key="bert_ids", special_tokens=True)


def dataset(prepared: Path, split: str, store_path: Path):
    """A `VQADataset` that also gives the scalar depth readings of the store (`depth_mean`, `depth_mode`)."""
    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset

    class DepthVQADataset(VQADataset):
        def __getitem__(self, index: int) -> dict[str, Any]:
            item = super().__getitem__(index)
            image = self.store.get(int(self.image_ids[index]))
            for key in ("depth_mean", "depth_mode"):
                if key in image:
                    item[key] = torch.from_numpy(image[key].astype("float32"))
            return item

    return DepthVQADataset(prepared, split, FeatureStore.open(store_path))


class ReadyItems(Dataset):
    """A split's items built once and kept, for the generated scales (a few thousand small items): each epoch's
    batches are then only stacked, not read from the store and converted again. Everything else (vocabularies,
    image ids) is the split's."""

    def __init__(self, split):
        self.split = split
        self.items = [split[i] for i in range(len(split))]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.items[index]

    def __getattr__(self, name: str):
        if name in ("split", "items"):  # not set yet (copy, unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.split, name)


class Splits(NamedTuple):
    train: Any  # the train questions in the row's features, as its model reads them
    val: Any
    data: dict[str, Path]  # what prepare_data returned (the val files scored against)


def splits(ctx: RunContext) -> Splits:
    """The train and val questions in the row's features (object regions or grid cells)."""
    data, config = ctx.data, build.as_config(ctx.config)
    store = "features" if config.features == "objects" else "grid_features"
    if f"train_{store}" not in data:
        raise ReproError(
            f"{ctx.spec.id} row {ctx.row.name}: grid features of the real images (X-152 C5, `repro download "
            f"grid-features`) are not prepared into a feature store yet; object rows run at paper scale"
        )
    sizes = build.model_sizes(config, ctx.settings.get("sizes"))
    train, val = (
        questions(config, sizes, dataset(data["prepared"], s, data[f"{s}_{store}"])) for s in ("train", "val")
    )
    if ctx.generated:
        train, val = ReadyItems(train), ReadyItems(val)
    return Splits(train, val, data)
