"""dsganet's model: the typed config, the paper's sizes, DSGANet built from a row's config (`model.py`, with
MCAN's encoder-decoder blocks), a full example batch, and the paper-scale parameters and FLOPs that `repro
model` prints. Nothing of the data or the training is imported here.
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
from repro.families.dsganet.config import DSGANetConfig
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("dsganet",)
# Vocabularies at paper scale: MCAN's VQA v2 question words and answers (the paper gives neither).
PAPER_NUM_TOKENS = 20572
PAPER_NUM_ANSWERS = 3129


def as_config(config: DSGANetConfig | dict) -> DSGANetConfig:
    return as_typed(config, (DSGANetConfig,))


def paper_sizes(config: DSGANetConfig | dict | None = None) -> dict[str, Any]:
    """The model's sizes: the config's (paper's) L, d_h, d_s, heads, FFN, dropout, k, and MODEL defaults."""
    from repro.families.dsganet.model import PAPER_SIZES

    s = dict(PAPER_SIZES)
    if config is not None:
        c = as_config(config)
        s.update(
            d_model=c.hidden_size,
            layers=c.layers,
            heads=c.heads,
            ffn=c.ff_size,
            spatial_dim=c.spatial_dim,
            dropout=c.dropout,
            depth_bins=c.depth_bins,
            flat_out=2 * c.hidden_size,
            max_boxes=c.max_objects,
            max_grids=c.max_grids,
        )
    return s


def model_sizes(config: DSGANetConfig | dict, sizes: dict | None = None) -> dict[str, Any]:
    full = paper_sizes(config)
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    if full["d_model"] % full["heads"]:
        raise ReproError(f"model size d_model={full['d_model']} is not divisible by heads={full['heads']}")
    if full["bert_hidden"] % full["bert_heads"]:
        raise ReproError(f"bert_hidden={full['bert_hidden']} is not divisible by bert_heads={full['bert_heads']}")
    return full


def build_model(
    config: DSGANetConfig | dict,
    num_tokens: int = PAPER_NUM_TOKENS,
    num_answers: int = PAPER_NUM_ANSWERS,
    embeddings: torch.Tensor | None = None,
    sizes: dict | None = None,
    bert_weights: Path | None = None,
) -> nn.Module:
    """The model a row names; `sizes` overrides the paper's. BERT weights come from `bert_weights` or the local
    bert-base-uncased folder when it holds weights and BERT has bert-base's sizes; otherwise BERT starts random."""
    from repro.families.dsganet.model import PAPER_SIZES, DSGANet, load_bert_weights

    config = as_config(config)
    s = model_sizes(config, sizes)
    if num_tokens < 2 or num_answers < 1:
        raise ReproError(f"model needs at least 2 tokens and 1 answer, got {num_tokens} and {num_answers}")
    model = DSGANet(
        num_tokens,
        num_answers,
        s,
        features=config.features,
        encoder=config.question_encoder,
        daa=config.daa,
        sga=config.sga,
        alpha=config.grid_alpha,
        depth_value=config.depth_value,
        log_eps=config.log_eps,
        embeddings=embeddings,
    )
    if config.question_encoder == "bert":
        bert_keys = [k for k in PAPER_SIZES if k.startswith("bert_")]
        if bert_weights is not None or all(s[k] == PAPER_SIZES[k] for k in bert_keys):
            folder = Path(bert_weights) if bert_weights is not None else data_dir() / BERT_FOLDER
            if not load_bert_weights(model.question, folder) and bert_weights is not None:
                raise ReproError(f"{folder}: no BERT weights (config.json with pytorch_model.bin or model.safetensors)")
    return model


def example_batch(
    batch_size: int = 1,
    sizes: dict[str, Any] | None = None,
    *,
    config: DSGANetConfig | dict | None = None,
    seed: int = 0,
    num_tokens: int = PAPER_NUM_TOKENS,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """A batch in the data interface's format: full-length questions, every region (or grid cell) present, boxes in
    a 640 x 480 image, depth extras. Grid rows get a rows x cols grid with rows * cols = max_grids or less."""
    from repro.datasets.depth import grid_regions

    cfg = as_config(config) if config is not None else None
    s = paper_sizes(cfg)
    s.update(sizes or {})
    g = torch.Generator().manual_seed(seed)
    width, height = 640.0, 480.0
    grids = cfg is not None and cfg.features == "grids"
    if grids:
        cols = min(s["grid_size"], s["max_grids"])
        rows = max(1, s["max_grids"] // cols)
        boxes = torch.from_numpy(grid_regions((int(height), int(width)), rows, cols)).float()
        n = rows * cols
        boxes = boxes[None].repeat(batch_size, 1, 1)
    else:
        n = s["max_boxes"]
        xy = torch.rand(batch_size, n, 2, generator=g) * torch.tensor([width * 0.8, height * 0.8])
        wh = 8.0 + torch.rand(batch_size, n, 2, generator=g) * torch.tensor([width * 0.2, height * 0.2])
        boxes = torch.cat([xy, xy + wh], dim=-1)
    bins = s["depth_bins"]
    hist = torch.rand(batch_size, n, bins, generator=g)
    hist = hist / hist.sum(-1, keepdim=True)
    peak = hist.argmax(-1)
    mean = peak.float() * (256 / bins) + torch.rand(batch_size, n, generator=g) * (256 / bins)
    batch = {
        "tokens": torch.randint(1, min(100, num_tokens), (batch_size, s["max_tokens"]), generator=g),
        "features": torch.rand(batch_size, n, s["feature_dim"], generator=g) + 0.01,
        "boxes": boxes,
        "box_count": torch.full((batch_size,), n, dtype=torch.long),
        "image_size": torch.tensor([[width, height]]).repeat(batch_size, 1),
        "depth_hist": hist,
        "depth_peak": peak,
        "depth_mean": mean,
        "depth_mode": mean.floor(),
        "question_id": torch.arange(batch_size),
    }
    return {k: v.to(device) for k, v in batch.items()}


def describe(config: DSGANetConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """Parameters and FLOPs per sample at the paper's sizes (MCAN's VQA v2 vocabularies; bert-base-uncased)."""
    from repro.nn.measure import count_flops, count_parameters

    config = as_config(config)
    torch.manual_seed(0)
    model = build_model(config, bert_weights=None)
    modules = [(name, count_parameters(child)) for name, child in model.named_children()]
    return [
        ModelInfo(
            name=config.arch,
            task="vqa",
            trainable_params=count_parameters(model),
            total_params=count_parameters(model, trainable_only=False),
            flops_per_sample=count_flops(model, example_batch(1, config=config)),
            modules=modules,
        )
    ]


# Paper-scale cost: the paper gives no training time, so it is estimated from FLOPs: one forward pass at the
# paper's sizes (`repro model`'s count on `example_batch`: 21.2 GFLOPs with BERT, 18.7 with the GRU, 100
# objects), x3 for the backward pass, over VQA v2's 443,757 train questions for 13 epochs (paper line 310),
# at the recipe's precision (`repro.train.cost`: an A100's sustained rate).
GFLOPS_PER_QUESTION = {"bert": 21.2, "gru": 18.7}
TRAIN_QUESTIONS, EPOCHS = 443_757, 13
RECIPE = "dsganet/vqa2"


def gpu_hours(config: DSGANetConfig | dict, precision: str | None = None) -> float | None:
    """Estimated GPU-hours of an object row's training (see GFLOPS_PER_QUESTION) at `precision` (None: the
    recipe's own, fp32); None for grid rows, which do not run at paper scale yet."""
    from repro.families import load_recipe
    from repro.train import cost

    config = as_config(config)
    if config.features != "objects":
        return None
    flops = 3 * GFLOPS_PER_QUESTION[config.question_encoder] * 1e9 * TRAIN_QUESTIONS * EPOCHS
    return cost.gpu_hours(flops, precision or load_recipe(RECIPE).precision)


def limited_hours(config: DSGANetConfig | dict, limit: int, precision: str | None = None) -> float | None:
    """`--limit N`: the training estimate times the share of VQA v2's train questions the first N are; the
    epochs stay the same."""
    return share_of_hours(gpu_hours(config, precision), limit / TRAIN_QUESTIONS)


DEPTH_KEYS = ("depth_hist", "depth_peak", "depth_mean", "depth_mode")


def refuse_control_at_paper_scale(spec: Spec) -> None:
    """A positive control (`table: "Control: ..."`) asks a generated task built to need its mechanism: it has no
    paper scale."""
    if spec.table.startswith("Control"):
        raise ReproError(
            f"{spec.id} is a positive control of the synthetic scale (its task is generated): run --scale synthetic"
        )


def paper_data(spec: Spec, row) -> list[DataNeed]:
    """What a paper-scale row reads, in the order of its commands: the VQA v2 questions prepared, BERT's
    vocabulary and weights (or GloVe for the GRU rows), the bottom-up object stores, then depth: GLPN-NYU
    estimates maps of the COCO 2014 images and `repro prepare depth` adds their histograms to the stores.
    A ReproError for what does not run at paper scale yet (test-server and GQA tables, grid rows) or at all (the
    positive controls: their task is generated)."""
    refuse_control_at_paper_scale(spec)
    dataset = spec.datasets[0]
    if dataset != "vqa2" or spec.split != "val":
        raise ReproError(
            f"paper-scale DSGANet runs the val-scored VQA v2 tables (VI and VII) so far; {dataset} scored on "
            f"{spec.split} is not wired yet (README: Status)"
        )
    config = as_config(row.config)
    if config.features != "objects":
        raise ReproError(
            "grid features of the real images (X-152 C5) are not prepared into a feature store yet; object rows "
            "run at paper scale (README: Status)"
        )
    root = data_dir()
    maps = root / "prepared" / "depth-maps"
    store = root / "prepared" / "features" / "bottom-up-36" / "trainval.store"
    words = DataNeed(BERT_FOLDER) if config.question_encoder == "bert" else DataNeed("glove-840b")
    questions = DataNeed("vqa2", "vqa2", splits=("train", "val"))
    needs = [words, questions, DataNeed("bottom-up-36", "bottom-up-36"), DataNeed("glpn-nyu")]
    for folder in ("train2014", "val2014"):
        images = root / "coco-images" / folder
        needs.append(DataNeed("coco-images", f"depth-maps --source {images}", lambda m=maps / folder: _has_files(m)))
    for folder in ("train2014", "val2014"):
        needs.append(DataNeed("coco-images", f"depth --store {store} --source {maps / folder}", _depth_ready))
    return needs


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _depth_ready() -> bool:
    """The train and val object stores carry DSGANet's depth extras."""
    from repro.datasets.vqa_features import feature_folders, feature_store

    try:
        stores = [feature_store("vqa2", split, feature_folders()) for split in ("train", "val")]
    except ReproError:
        return False
    return all(set(DEPTH_KEYS) <= set(s.extras) for s in stores)
