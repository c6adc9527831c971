"""A row's seeds pre-trained as ALBEF pre-trains (ITC, ITM, MLM, MIM, and L_ace for the +Lace rows), the seeds together,
through the store of pre-trainings shared across tables at the generated scales (`pretrained.py`), or ALBEF's
released weights where the row says so; with what the fine-tunings after it read with. `family.run_ensemble` and
the pilot (`pilot.py`) start from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from repro.families.ace_rpe.build import PRETRAIN_RECIPE, as_config, build_model
from repro.families.ace_rpe.columns import recall_datasets
from repro.families.ace_rpe.keymap import albef_initialisation, load_albef, read_checkpoint
from repro.families.ace_rpe.sources import (
    paper_sources,
    read_split,
    released_checkpoint,
    run_vocabulary,
    synthetic_sources,
)
from repro.families.base import RunContext


@dataclass
class Pretrained:
    """A row's seeds after pre-training: each seed's weights and record of it, and what its fine-tunings read with
    (the tokenizer, the model sizes with its vocabulary, the fine-tuning image size, the collate of pairs)."""

    weights: list[dict[str, torch.Tensor]]
    training: list[dict[str, Any]]  # per seed {"pretrain": ...}
    sources: Any
    tok: Any
    sizes: dict[str, Any]
    size: int  # the fine-tunings' image size
    pretrain_size: int
    max_tokens: int
    collate: Any


def pretrained(ctxs: list[RunContext]) -> Pretrained:
    """Each seed of `ctxs` (one row) pre-trained (ITC, ITM, MLM, MIM, and L_ace for the +Lace rows; the seeds
    together), read from the store of shared pre-trainings at the generated scales, or ALBEF's released weights
    where the row says so."""
    from repro.families.ace_rpe.data import Collate, PairDataset, tokenizer
    from repro.families.ace_rpe.stages import train_stage
    from repro.train.trainer import seed_everything

    ctx = ctxs[0]
    settings = ctx.settings
    datasets = recall_datasets(ctx.spec)
    data: dict[str, Path] = ctx.data or {}
    if ctx.scale == "paper":
        sources = paper_sources(as_config(ctx.config), datasets)
        vocab = sources.vocab
    else:
        sources = synthetic_sources(data["root"], datasets)
        vocab = run_vocabulary(data)  # the tasks' or, with `task_words`, the pre-training folder's
    tok = tokenizer(vocab)
    sizes = {
        **settings.get("sizes", {}),
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
        "cls_token_id": tok.cls_token_id,
        "sep_token_id": tok.sep_token_id,
        "mask_token_id": tok.mask_token_id,
    }
    pretrain_size = int(settings.get("pretrain_image_size", sizes.get("image_size", 256)))
    max_tokens = int(settings.get("max_tokens", 30))
    collate = Collate(tok, max_tokens)

    def seeded(c: RunContext):
        seed_everything(c.seed)
        return build_model(c.config, {**sizes, "image_size": pretrain_size}, task="pretrain")

    models = [seeded(c) for c in ctxs]
    training: list[dict[str, Any]] = [{} for _ in ctxs]
    if as_config(ctx.config).init == "albef":  # ALBEF's released weights in place of our pre-training
        checkpoint = released_checkpoint(as_config(ctx.config))
        for model, done in zip(models, training):
            report = load_albef(model, read_checkpoint(checkpoint))
            done["pretrain"] = {"checkpoint": str(checkpoint), "steps": 0, "new": report.new}
    else:
        crop = 0.2 if sources.augment else None
        parts = [  # --limit N: the first N entries of each file
            PairDataset(read_split(path, "pretrain", root, ctx.limit), root, pretrain_size, crop_scale=crop)
            for path, root in sources.pretrain
        ]
        train_pairs = parts[0] if len(parts) == 1 else torch.utils.data.ConcatDataset(parts)
        if sources.initial is not None:  # paper scale: DeiT-B/16 + bert-base-uncased, as ALBEF
            deit, bert = (read_checkpoint(path) for path in sources.initial)
            for model in models:
                load_albef(model, albef_initialisation(deit, bert))
        recipes = [c.recipe(name=PRETRAIN_RECIPE, overrides=settings.get("pretrain_recipe", {})) for c in ctxs]

        def pretrain(which: list[int]) -> list[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
            chosen = [ctxs[i] for i in which]
            trained = [models[i] for i in which]
            done = train_stage(chosen, trained, train_pairs, [recipes[i] for i in which], "pretrain", collate)
            return [(m.state_dict(), d) for m, d in zip(trained, done)]

        if ctx.generated and recipes[0].max_steps is None:  # one pre-training per configuration and seed, shared
            for done, shared in zip(training, shared_pretraining(ctxs, models, pretrain, recipes, vocab, sources)):
                done["pretrain"] = shared
        else:
            for done, (_, stage) in zip(training, pretrain(list(range(len(ctxs))))):
                done["pretrain"] = stage
        if sources.initial is not None:
            for done in training:
                done["pretrain"]["initial"] = [str(path) for path in sources.initial]
    weights = [model.state_dict() for model in models]
    size = sizes.get("image_size", 384)
    return Pretrained(weights, training, sources, tok, sizes, size, pretrain_size, max_tokens, collate)


def shared_pretraining(ctxs: list[RunContext], models, pretrain, recipes, vocab: Path, sources) -> list[dict[str, Any]]:
    """`pretrain(indices)` through the store of pre-trainings shared across tables (`pretrained.py`): each seed's
    model ends with the weights of its configuration and seed, trained here (the missing ones together) or by the
    unit that stored them; the record's `training.pretrain` says which (hash, reused, trained_by). `vocab`: the
    vocabulary the units tokenize with; `sources`: where the pre-training pairs are."""
    from repro.families.ace_rpe import pretrained as store

    max_tokens = int(ctxs[0].settings.get("max_tokens", 30))
    data = store.data_hash(store.pretraining_files(vocab, sources.pretrain), {"max_tokens": max_tokens})
    keys = [store.key(as_config(c.config), m.sizes, r, data) for c, m, r in zip(ctxs, models, recipes)]
    units = [{"spec": c.spec.id, "row": c.row.name, "seed": c.seed, "scale": c.scale} for c in ctxs]
    out = []
    got = store.shared([k[0] for k in keys], [k[1] for k in keys], units, pretrain)
    for model, (weights, training) in zip(models, got):
        if training["reused"]:
            model.load_state_dict(weights)
        out.append(training)
    return out
