"""sa-m4c's models: the typed config, the model sizes, M4C and SA-M4C built from a row's config
(`model.py`), a full example batch, and the paper-scale parameters, FLOPs and GPU-hours estimate that
`repro model` and `repro run --dry-run` print. Nothing of the data or the training is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import DataNeed, ModelInfo
from repro.families.sa_m4c.config import CONFIGS, M4CConfig, SAM4CConfig
from repro.specs import Spec

ARCHS = ("m4c", "sa-m4c")
PAPER_NUM_ANSWERS = 5000  # fixed_answer_vocab_textvqa_5k.txt (Sec. 5.1)
# Config fields that are model sizes (the rest choose the structure, data or decoding).
CONFIG_SIZES = (
    "hidden_size",
    "heads",
    "ff_size",
    "dropout",
    "text_bert_layers",
    "max_question_tokens",
    "max_objects",
    "max_ocr_tokens",
    "decode_steps",
)
# Paper-scale cost of one training run, an estimate (the paper gives no training time): the recipe's
# updates x batch x 3 (forward and backward) x the forward FLOPs per sample that `repro model` measures
# (12.5 G for a 4-layer MMT without fc7, 2.6 G per further layer, 2.5 G for the two fc7 layers), at the
# recipe's precision (`repro.train.cost`: an A100's sustained rate).
TRAIN_UPDATES, TRAIN_BATCH = 36_000, 96
GFLOPS_4_LAYERS, GFLOPS_PER_LAYER, GFLOPS_FC7 = 12.5, 2.6, 2.5
RECIPE = "sa-m4c/textvqa"


def as_config(config: M4CConfig | SAM4CConfig | dict) -> M4CConfig | SAM4CConfig:
    return as_typed(config, CONFIGS)


def model_sizes(config: M4CConfig | SAM4CConfig, sizes: dict | None = None) -> dict[str, Any]:
    """The paper's sizes with the config's size fields, then `sizes` overrides (smoke and synthetic scales)."""
    from repro.families.sa_m4c.model import PAPER_SIZES

    full = dict(PAPER_SIZES)
    full.update({k: getattr(config, k) for k in CONFIG_SIZES})
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    if full["hidden_size"] % full["heads"]:
        raise ReproError(f"model size hidden_size={full['hidden_size']} is not divisible by heads={full['heads']}")
    return full


def build_model(
    config: M4CConfig | SAM4CConfig | dict,
    num_answers: int = PAPER_NUM_ANSWERS,
    sizes: dict | None = None,
    bert_weights: Path | None = None,
) -> nn.Module:
    """The model a row names. M4C's fine-tuned fc7 layers come with the ResNet-101 detector features of
    the released M4C; the ResNeXt-152 features of the released SA-M4C code are used as they are (so the
    improved M4C and SA-M4C have the same parameters, Sec. 5.1)."""
    from repro.families.sa_m4c.model import M4C, layer_stack, load_text_bert

    config = as_config(config)
    s = model_sizes(config, sizes)
    if num_answers < 5:
        raise ReproError(f"the answer vocabulary needs <pad> <s> </s> <unk> and one word at least, got {num_answers}")
    model = M4C(
        s,
        num_answers,
        layer_stack(config),
        fc7=config.det_backbone == "resnet-101",
        context=getattr(config, "context", 13),
        top_k=getattr(config, "top_k", None),
        relation_bias=getattr(config, "relation_bias", False),
        spatial_mixing=getattr(config, "spatial_mixing", "context"),
        input_norm_eps=config.input_norm_eps,
    )
    if bert_weights is not None:
        load_text_bert(model.text_bert, bert_weights)
    return model


def example_batch(batch_size: int = 1, sizes: dict | None = None, *, seed: int = 0) -> dict[str, torch.Tensor]:
    """A full batch in the data interface's format: every question token, object and OCR token present."""
    from repro.families.sa_m4c.model import PAPER_SIZES
    from repro.families.sa_m4c.relations import spatial_relations

    s = {**PAPER_SIZES, **(sizes or {})}
    g = torch.Generator().manual_seed(seed)
    b, n_obj, n_ocr = batch_size, s["max_objects"], s["max_ocr_tokens"]

    def boxes(n):
        xy = torch.rand(b, n, 2, generator=g) * 0.8
        return torch.cat([xy, xy + 0.02 + torch.rand(b, n, 2, generator=g) * 0.18], dim=-1)

    obj_boxes, ocr_boxes = boxes(n_obj), boxes(n_ocr)
    relations = torch.stack(
        [torch.from_numpy(spatial_relations(torch.cat([obj_boxes[i], ocr_boxes[i]]).numpy())) for i in range(b)]
    )
    prev = torch.randint(0, 10, (b, s["decode_steps"]), generator=g)
    return {
        "question_ids": torch.randint(1, min(1000, s["bert_vocab"]), (b, s["max_question_tokens"]), generator=g),
        "question_mask": torch.ones(b, s["max_question_tokens"], dtype=torch.bool),
        "obj_features": torch.rand(b, n_obj, s["obj_dim"], generator=g),
        "obj_boxes": obj_boxes,
        "obj_mask": torch.ones(b, n_obj, dtype=torch.bool),
        "ocr_fasttext": torch.randn(b, n_ocr, s["fasttext_dim"], generator=g),
        "ocr_phoc": torch.rand(b, n_ocr, s["phoc_dim"], generator=g),
        "ocr_features": torch.rand(b, n_ocr, s["ocr_app_dim"], generator=g),
        "ocr_boxes": ocr_boxes,
        "ocr_mask": torch.ones(b, n_ocr, dtype=torch.bool),
        "relations": relations,
        "prev_inds": prev,
        "question_id": torch.arange(b),
    }


def describe(config: M4CConfig | SAM4CConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """Parameters (and FLOPs of one teacher-forced pass) at the paper's sizes, answer vocabulary 5,000."""

    config = as_config(config)
    torch.manual_seed(0)
    return [ModelInfo.measure(build_model(config), config.arch, "textvqa", example_batch(1))]


def gpu_hours(config: M4CConfig | SAM4CConfig | dict, precision: str | None = None) -> float | None:
    """The training estimate above at `precision` (None: the recipe's own, fp32)."""
    from repro.families import load_recipe
    from repro.families.sa_m4c.model import layer_stack
    from repro.train import cost

    config = as_config(config)
    gflops = GFLOPS_4_LAYERS + GFLOPS_PER_LAYER * (len(layer_stack(config)) - 4)
    gflops += GFLOPS_FC7 if config.det_backbone == "resnet-101" else 0.0
    flops = TRAIN_UPDATES * TRAIN_BATCH * 3 * gflops * 1e9
    return cost.gpu_hours(flops, precision or load_recipe(RECIPE).precision)


def paper_data(spec: Spec, row) -> list[DataNeed]:
    """What a paper-scale row reads, in the order a run checks it (`prepare._inputs`): the TextVQA questions,
    BERT, FastText, MMF's answer vocabulary, the row's OCR tokens, its object and OCR-box features. A
    ReproError for what does not run at paper scale yet (ST-VQA, Rosetta-ml's OCR-box features)."""
    from repro.families.sa_m4c.prepare import _inputs, locate

    config = as_config(row.config)
    if config.with_stvqa or spec.datasets[0] != "textvqa":
        raise ReproError("paper-scale training on ST-VQA (with_stvqa, Table 3) is not implemented yet (README)")
    files: dict[str, list[tuple[Path, str]]] = {}
    for folder, name, command in _inputs(config.ocr, config.det_backbone):
        files.setdefault(command.split()[-1], []).append((folder, name))
    return [
        DataNeed(
            dataset,
            ready=lambda got=got: all(locate(f, n) is not None for f, n in got),
            splits=("train", "val") if dataset == "textvqa" else (),
        )
        for dataset, got in files.items()
    ]
