"""Train and evaluate one row of a VQA-family table (MCAN and its positional variants).

At the synthetic and smoke scales the data is generated (`repro.data.synthetic`) in the official
VQA v2 layout and prepared by the same code as the real files; the model is trained on train and
scored on val with the VQA soft accuracy (`repro.metrics.vqa`, the official rules). At paper
scale the prepared real data is required; the toolkit says how to get it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.paths import data_dir
from repro.specs import Row, Spec

VQA_KEYS = ("overall", "yes/no", "number", "other")


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Make sure the row's data exists (generate and prepare it at synthetic/smoke scale)."""
    if scale == "paper":
        raise ReproError(f"{spec.id}: paper-scale training needs the prepared {', '.join(spec.datasets)} data and "
                         f"features; run `repro download vqa2 bottom-up-trainval-36` and `repro prepare vqa2` first "
                         f"(`repro download --list` shows what is present)")
    from repro.data.synthetic import GeneratorConfig, generate
    from repro.data.vqa import prepare_vqa

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"vqa2-{cfg.key()}"
    sources = generate(root / "raw", cfg)
    prepare_vqa("vqa2", root / "raw", root / "prepared", glove=None)
    return {**sources, "prepared": root / "prepared"}


def _val_annotations(path: Path) -> dict[int, dict[str, Any]]:
    return {a["question_id"]: a for a in json.loads(path.read_text())["annotations"]}


def run_vqa_row(*, spec: Spec, row: Row, scale: str, settings: dict[str, Any], seed: int, workdir: Path,
                resume: bool, progress: bool = True, extras: dict[str, Any]) -> dict[str, float]:
    from repro.data.store import FeatureStore
    from repro.data.vqa_dataset import VQADataset
    from repro.metrics import vqa as vqa_metric
    from repro.models import build_model
    from repro.train import fit, load_recipe, predict
    from repro.train.trainer import seed_everything

    data = prepare_data(spec, scale, settings)
    train = VQADataset(data["prepared"], "train", FeatureStore.open(data["train_features"]))
    val = VQADataset(data["prepared"], "val", FeatureStore.open(data["val_features"]))

    recipe = load_recipe(spec.recipe).replace(**{**settings.get("recipe", {}), "seed": seed,
                                                 "train_splits": ("train",)})
    seed_everything(seed)
    model = build_model(row.model, train.num_tokens, train.num_answers, sizes=settings.get("sizes"))
    state = fit(model, train, recipe, workdir, resume=resume, progress=progress)
    question_ids, logits = predict(model, val, recipe.eval_batch_size or recipe.batch_size)
    predicted = [train.answer_vocab[i] for i in logits.argmax(dim=1).tolist()]

    gold = _val_annotations(data["val_annotations"])
    ids = [int(q) for q in question_ids]
    result = vqa_metric.evaluate([[a["answer"] for a in gold[q]["answers"]] for q in ids], predicted, ids,
                                 [gold[q]["answer_type"] for q in ids], [gold[q]["question_type"] for q in ids])
    extras["split"] = "val"
    extras.setdefault("per_question_type", []).append(result.aggregate.get("per_question_type", {}))
    extras.setdefault("train", []).append({"steps": state.step, "final_loss": state.final_loss,
                                           "global_batch": state.global_batch, "gpus": state.gpu_count})
    return {col.name: float(result.aggregate[col.key]) for col in spec.columns
            if col.metric == "vqa" and col.key in VQA_KEYS}
