"""mcan-pa's models: the typed configs, the paper's sizes, MCAN (and its positional variants) and VL-BERT built
from a row's config (`model.py`, `vlbert.py`), a full example batch, and the paper-scale parameters, FLOPs and
GPU-hours that `repro model` and `repro run --dry-run` print. Nothing of the data or the training is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.datasets.wordpiece import BERT_FOLDER
from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import DataNeed, ModelInfo, share_of_hours
from repro.families.mcan_pa.config import CONFIGS, McanConfig, VlBertConfig
from repro.families.mcan_pa.config import not_at_scale as config_not_at_scale
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("mcan", "vl-bert")

# The paper's vocabularies (MCAN's code: answers seen at least 9 times give 3,129; MILVLG/mcan-vqa).
PAPER_NUM_TOKENS = 20572
PAPER_NUM_ANSWERS = 3129
# Paper-scale cost of one training run, from Table VI: 4,150 s (MCAN) and 5,583 s (MCAN+PA) per epoch, 13 epochs.
EPOCH_SECONDS = {"mcan": 4150, "mcan+pa": 5583}
EPOCHS = 13


def paper_sizes() -> dict[str, Any]:
    """MCAN's sizes at the paper's settings (§IV-B)."""
    from repro.families.mcan_pa.model import PAPER_SIZES

    return dict(PAPER_SIZES)


def as_config(config: McanConfig | VlBertConfig | dict) -> McanConfig | VlBertConfig:
    return as_typed(config, CONFIGS)


def model_sizes(config: McanConfig | VlBertConfig, sizes: dict | None) -> dict[str, Any]:
    """The paper's sizes of the row's model with `sizes` applied; `sizes` may hold one mapping per arch
    (`{mcan: {...}, vl-bert: {...}}`) when a table mixes them."""
    from repro.families.mcan_pa.vlbert import VLBERT_SIZES

    sizes = dict(sizes or {})
    if config.arch in sizes:
        sizes = dict(sizes[config.arch] or {})
    sizes = {k: v for k, v in sizes.items() if k not in ARCHS}
    full = dict(VLBERT_SIZES[config.size]) if isinstance(config, VlBertConfig) else paper_sizes()
    for key, value in sizes.items():
        if key not in full:
            raise ReproError(f"unknown {config.arch} model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    width = "hidden" if isinstance(config, VlBertConfig) else "d_model"
    if full[width] % full["heads"]:
        raise ReproError(f"model size {width}={full[width]} is not divisible by heads={full['heads']}")
    if "poa" in config.positional and full["geometry_dim"] % 8:
        raise ReproError(f"POA needs geometry_dim divisible by 8, got {full['geometry_dim']}")
    if isinstance(config, VlBertConfig) and full["visual_geometry_dim"] % 8:
        raise ReproError(
            f"VL-BERT's box embedding needs visual_geometry_dim divisible by 8, got {full['visual_geometry_dim']}"
        )
    return full


def build_model(
    config: McanConfig | VlBertConfig | dict,
    num_tokens: int = PAPER_NUM_TOKENS,
    num_answers: int = PAPER_NUM_ANSWERS,
    embeddings: torch.Tensor | None = None,
    sizes: dict | None = None,
    bert_weights: Path | None = None,
) -> nn.Module:
    """The model a row names; `sizes` overrides the paper's (d_model, layers, heads, ...).

    VL-BERT at bert-base's sizes starts from the bert-base-uncased weights of the catalog folder (or
    `bert_weights`) when they are there, as VL-BERT without visual-linguistic pre-training does."""
    config = as_config(config)
    full = model_sizes(config, sizes)
    if num_tokens < 2 or num_answers < 1:
        raise ReproError(f"model needs at least 2 tokens and 1 answer, got {num_tokens} and {num_answers}")
    if isinstance(config, VlBertConfig):
        return _build_vlbert(config, num_tokens, num_answers, full, bert_weights)

    from repro.families.mcan_pa.model import MCAN

    pe = config.position_embedding
    return MCAN(
        num_tokens,
        num_answers,
        full,
        positional=config.positional,
        fusion=config.fusion or "eq8",
        position_embedding=None if pe == "none" else pe,
        embeddings=embeddings,
    )


def _build_vlbert(config: VlBertConfig, num_tokens, num_answers, sizes, bert_weights) -> nn.Module:
    """VL-BERT of the row; with `init: bert` at BERT's sizes, BERT's weights in its text stack (VL-BERT without
    visual-linguistic pre-training). `init: vl-bert-*` is loaded by the run (`vlbert_keymap.load_start`), not here."""
    from repro.families.mcan_pa.vlbert import VLBERT_SIZES, VLBert, load_bert_weights

    model = VLBert(
        num_tokens,
        num_answers,
        sizes,
        classifier=config.classifier,
        positional=config.positional,
        fusion=config.fusion or "eq8",
    )
    if config.init != "bert":
        return model
    at_bert_sizes = all(sizes[k] == VLBERT_SIZES[config.size][k] for k in ("vocab", "hidden", "layers", "heads", "ffn"))
    if bert_weights is not None or at_bert_sizes:
        folder = Path(bert_weights) if bert_weights is not None else data_dir() / BERT_FOLDER
        if not load_bert_weights(model, folder) and bert_weights is not None:
            raise ReproError(f"{folder}: no BERT weights (config.json with pytorch_model.bin or model.safetensors)")
    return model


def released_start(config: VlBertConfig):
    """The released checkpoint an `init: vl-bert-*` row starts from (repro.weights.RELEASED)."""
    from repro.weights import released_named

    return released_named(f"{config.init}-prec.model")


def example_batch(
    batch_size: int = 1,
    sizes: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    num_tokens: int = PAPER_NUM_TOKENS,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """A batch in the data interface's format: full-length questions, every region present, boxes in 640x480."""
    s = paper_sizes()
    s.update(sizes or {})
    g = torch.Generator().manual_seed(seed)
    t, n = s["max_tokens"], s["max_boxes"]
    width, height = 640.0, 480.0
    xy = torch.rand(batch_size, n, 2, generator=g) * torch.tensor([width * 0.8, height * 0.8])
    wh = 8.0 + torch.rand(batch_size, n, 2, generator=g) * torch.tensor([width * 0.2, height * 0.2])
    batch = {
        "tokens": torch.randint(1, min(100, num_tokens), (batch_size, t), generator=g),
        "features": torch.rand(batch_size, n, s["feature_dim"], generator=g) + 0.01,
        "boxes": torch.cat([xy, xy + wh], dim=-1),
        "box_count": torch.full((batch_size,), n, dtype=torch.long),
        "image_size": torch.tensor([[width, height]]).repeat(batch_size, 1),
        "question_id": torch.arange(batch_size),
        # VL-BERT's question in WordPiece ids (ordinary bert-base-uncased word pieces)
        "wordpiece": torch.randint(1996, 29612, (batch_size, t), generator=g),
    }
    return {k: v.to(device) for k, v in batch.items()}


def describe(config: McanConfig | VlBertConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """Parameters and FLOPs per sample at the paper's sizes and vocabularies (mcan-pa Table VI; VL-BERT:
    bert-base-uncased's WordPiece vocabulary). The positional modules are listed apart (word_pos, box_proj,
    pwa, poa, pma): what PA adds."""
    from repro.nn.measure import count_flops, count_parameters

    config = as_config(config)
    torch.manual_seed(0)
    model = build_model(config)
    modules = [(name, p.numel()) for name, p in model.named_parameters(recurse=False) if p.requires_grad]
    modules += [(name, count_parameters(child)) for name, child in model.named_children()]
    return [
        ModelInfo(
            name=config.arch,
            task="vqa",
            trainable_params=count_parameters(model),
            total_params=count_parameters(model, trainable_only=False),
            flops_per_sample=count_flops(model, example_batch(1)),
            modules=modules,
        )
    ]


def gpu_hours(config: McanConfig | dict, precision: str | None = None) -> float | None:
    """Table VI's measured seconds per epoch (MCAN, MCAN+PA) times the 13 epochs: the paper's own time, on its
    GPU at its precision, whatever `precision`."""
    config = as_config(config)
    if isinstance(config, VlBertConfig):
        return None
    return EPOCH_SECONDS["mcan+pa" if config.positional else "mcan"] * EPOCHS / 3600


# VQA v2's train and val questions (the paper's §IV-A: 443,757 and 214,354), two of the three splits a paper-scale
# row trains on; the third, Visual Genome's QA, has no count in the paper and is left out, so a share errs high.
TRAIN_VAL_QUESTIONS = 443_757 + 214_354


def limited_hours(config: McanConfig | dict, limit: int, precision: str | None = None) -> float | None:
    """`--limit N`: the training estimate times the share of the questions the first N of each training split
    (train, val, vg) are; the epochs stay the same."""
    return share_of_hours(gpu_hours(config), 3 * limit / TRAIN_VAL_QUESTIONS)


def paper_data(spec: Spec, row) -> list[DataNeed]:
    """What a paper-scale row reads, in the order of its commands: GloVe (and Visual Genome's QA, where the
    recipe trains on its `vg` split: Tables II-V, §IV-B) before `repro prepare` of the questions reads them, the
    bottom-up features (36 boxes per image, MCAN's) prepared into stores; WordNet for COCO-QA's WUPS; BERT's
    vocabulary and weights for VL-BERT, and VL-BERT's released pre-training for a row that starts from it."""
    from repro.families import load_recipe

    dataset = spec.datasets[0]
    trains_on = load_recipe(spec.recipe).train_splits if spec.recipe else ()
    needs = [DataNeed("glove-840b")]
    if "vg" in trains_on:
        needs.append(DataNeed("vg-qa", splits=("vg",)))
    own = ("train",) if dataset == "coco-qa" else ("train", "val")
    needs += [DataNeed(dataset, dataset, splits=own), DataNeed("bottom-up-36", "bottom-up-36")]
    if dataset == "coco-qa":
        needs.append(DataNeed("wordnet"))
    config = as_config(row.config) if row.config is not None else None
    if isinstance(config, VlBertConfig):
        needs.append(DataNeed(BERT_FOLDER))
        if config.init != "bert":
            from repro.weights import released_path

            entry = released_start(config)
            needs.append(DataNeed(entry.dataset, ready=lambda: released_path(entry).is_file()))
    return needs


def not_at_scale(config, scale: str) -> str | None:
    """Why a row does not run at a generated scale (`config.not_at_scale`); None for every other row."""
    return config_not_at_scale(as_config(config), scale)
