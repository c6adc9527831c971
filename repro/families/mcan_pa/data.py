"""mcan-pa's data: the synthetic scenes in VQA v2's layout at the smoke and synthetic scales (`synthetic.py`),
a release's layout under `data: official` (`official.py`), the prepared real data at paper scale, a split
as a row's model reads it (VL-BERT's WordPiece ids), and the scenes a unit trains and is scored on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from repro.data.generated import generating
from repro.datasets.vqa_features import feature_folders
from repro.errors import ReproError
from repro.families.base import RunContext
from repro.families.mcan_pa import build
from repro.families.mcan_pa.config import VlBertConfig
from repro.paths import data_dir
from repro.specs import Spec


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Make sure the row's data exists: generated and prepared at synthetic/smoke scale, prepared at paper.

    At a scale whose settings say `data: official`, the generator writes the spec's dataset in its
    release layout (`official.py`) and the run follows the paper-scale protocol on it.
    """
    from repro.datasets.prepare import prepared_dir
    from repro.datasets.vqa import DATASETS, prepare_vqa

    dataset = spec.datasets[0]
    if dataset not in DATASETS:
        raise ReproError(f"{spec.id}: mcan-pa runs on {', '.join(DATASETS)}, not {dataset!r}")
    if scale == "paper":
        prepared = prepared_dir(dataset)
        if not (prepared / "manifest.json").is_file():
            vg = " vg-qa" if "vg-qa" in spec.datasets else ""
            raise ReproError(
                f"{spec.id}: paper-scale training needs the prepared {dataset} data and features; run "
                f"`repro download {dataset}{vg} glove-840b bottom-up-36` and `repro prepare {dataset}` and "
                f"`repro prepare bottom-up-36` first (`repro download --list` shows what is present)"
            )
        if dataset == "coco-qa":
            _need_wordnet()
        return {"prepared": prepared, "root": data_dir(), "features": feature_folders()}
    if settings.get("data") == "official":
        from repro.families.mcan_pa.official import SERVER_ANSWERS, OfficialConfig, generate_official

        cfg = OfficialConfig.from_mapping(settings.get("generator"))
        root = data_dir() / "synthetic" / f"{dataset}-release-{cfg.key()}"
        with generating(root):  # one process writes it; others wait, then find it
            generate_official(root, dataset, cfg)
            vg = root / "vg-qa" if "vg-qa" in spec.datasets and (root / "vg-qa").is_dir() else None
            prepare_vqa(dataset, root / dataset, root / "prepared", glove=None, vg_dir=vg)
        if dataset == "coco-qa":
            _need_wordnet()
        server = root / "server" / SERVER_ANSWERS
        return {"prepared": root / "prepared", "root": root, "features": [root / "features"], "server": server}
    from repro.families.mcan_pa.synthetic import GeneratorConfig, generate

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"vqa2-{cfg.key()}"
    with generating(root):  # one process writes it; others wait, then find it
        sources = generate(root / "raw", cfg)
        prepare_vqa("vqa2", root / "raw", root / "prepared", glove=None)
    return {**sources, "prepared": root / "prepared"}


def generator_settings(settings: dict[str, Any]):
    """The generator config a scale's `generator:` mapping is read with (`generator.<key>=` overrides are
    checked on it): the release-layout generator under `data: official`, else the synthetic scenes'."""
    if settings.get("data") == "official":
        from repro.families.mcan_pa.official import OfficialConfig

        return OfficialConfig
    from repro.families.mcan_pa.synthetic import GeneratorConfig

    return GeneratorConfig


def _need_wordnet() -> None:
    """COCO-QA's WUPS columns need WordNet 3.0: say so before training, not after."""
    from repro.metrics import wordnet

    wordnet.load()


def questions(config, dataset, sizes: dict | None):
    """The split as the row's model reads it: VL-BERT with the WordPiece vocabulary also gets WordPiece ids."""
    config = build.as_config(config)
    full = build.model_sizes(config, sizes)
    if not isinstance(config, VlBertConfig) or not full["vocab"]:
        return dataset
    from repro.datasets.wordpiece import WordPieceQuestions, bert_vocab_file

    return WordPieceQuestions(dataset, bert_vocab_file(), full["max_tokens"])


class Scenes(NamedTuple):
    train: Any  # the train questions as the row's model reads them
    val: Any
    data: dict[str, Any]  # what prepare_data returned (the val files scored against)


def scenes(ctx: RunContext) -> Scenes:
    """The generated train and val questions of a unit (`ctx.data`), as the row's model reads them."""
    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset

    data, sizes = ctx.data, ctx.settings.get("sizes")

    def split(name: str):
        return questions(
            ctx.config, VQADataset(data["prepared"], name, FeatureStore.open(data[f"{name}_features"])), sizes
        )

    return Scenes(split("train"), split("val"), data)
