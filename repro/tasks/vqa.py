"""Train and evaluate one row of a VQA-family table (MCAN and its positional variants).

At the synthetic and smoke scales the data is generated (`repro.data.synthetic`) in the official
VQA v2 layout and prepared by the same code as the real files; the model is trained on train and
scored on val with the VQA soft accuracy. At paper scale the prepared real data is required.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.paths import data_dir
from repro.specs import Row, Spec

VQA_KEYS = {"overall", "yes/no", "number", "other"}


def synthetic_data(scale: str, settings: dict[str, Any]) -> tuple[Path, dict[str, Path]]:
    """Generate (once) and prepare the synthetic VQA v2 files; return the prepared folder and sources."""
    from repro.data.synthetic import GeneratorConfig, generate
    from repro.data.vqa import prepare_vqa

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"vqa2-{scale}-{cfg.key()}"
    sources = generate(root / "raw", cfg)
    prepared = root / "prepared"
    prepare_vqa("vqa2", root / "raw", prepared, glove=None)
    return prepared, sources


def run_vqa_row(*, spec: Spec, row: Row, scale: str, settings: dict[str, Any], seed: int, workdir: Path,
                resume: bool, progress=None, extras: dict[str, Any]) -> dict[str, float]:
    import torch

    from repro.data.store import FeatureStore
    from repro.data.vqa_dataset import VQADataset
    from repro.metrics import vqa as vqa_metric
    from repro.models import build_model
    from repro.train.recipe import load_recipe
    from repro.train.trainer import fit, predict

    if scale == "paper":
        raise ReproError(f"{spec.id}: paper-scale training needs the prepared {', '.join(spec.datasets)} data; "
                         f"run `repro download vqa2` and `repro prepare vqa2` first")
    prepared, sources = synthetic_data(scale, settings)
    train = VQADataset(prepared, "train", FeatureStore.open(sources["train_features"]))
    val = VQADataset(prepared, "val", FeatureStore.open(sources["val_features"]))

    torch.manual_seed(seed)
    model = build_model(row.model, train.num_tokens, train.num_answers, embeddings=None,
                        sizes=settings.get("sizes"))
    recipe = load_recipe(spec.recipe, overrides={**settings.get("recipe", {}), "seed": seed})
    fit(model, train, recipe, workdir, resume=resume)
    question_ids, logits = predict(model, val, batch_size=recipe.batch_size)
    answers = [train.answer_vocab[i] for i in logits.argmax(dim=1).tolist()]
    predictions = [{"question_id": int(q), "answer": a} for q, a in zip(question_ids, answers)]

    scores = vqa_metric.evaluate_files(sources["val_annotations"], sources["val_questions"], predictions)
    extras["split"] = "val"
    out: dict[str, float] = {}
    for col in spec.columns:
        if col.metric != "vqa" or col.key not in VQA_KEYS:
            continue
        out[col.name] = float(scores[col.key])
    return out
