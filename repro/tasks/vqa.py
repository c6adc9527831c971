"""Train and evaluate one row of a VQA-family table (MCAN and its positional variants).

At the synthetic and smoke scales the data is generated (`repro.data.synthetic`) in the official
VQA v2 layout and prepared by the same code as the real files; the model is trained on train and
scored on val with the VQA soft accuracy (`repro.metrics.vqa`, the official rules).

At paper scale the model is trained on the recipe's splits of the prepared real data (VQA v2:
train + val + VG, as the paper does for test-dev and test-std). Those splits can only be scored by
the evaluation server, so the run writes predictions for every test2015 question in the server's
format (`results/<paper>/<table>/predictions/<row>.test2015.json`, ready for `repro submit`) and
the record's metrics stay empty until a score comes back. When the recipe leaves val out of
training, val is scored locally and kept in the record's `extra.val` (never compared with the
paper's test-dev numbers).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.paths import data_dir
from repro.specs import Row, Spec

VQA_KEYS = ("overall", "yes/no", "number", "other")


FEATURE_SOURCES = ("bottom-up-36", "bottom-up-adaptive", "openvqa-features")
STORES_FOR_SPLIT = {"train": ("trainval", "train2014"), "val": ("trainval", "val2014"), "vg": ("trainval",),
                    "test": ("test2015",), "test-dev": ("test2015",)}
ANNOTATIONS = {"vqa2": "v2_mscoco_val2014_annotations.json", "vqa1": "mscoco_val2014_annotations.json"}


def paper_store(split: str):
    """The prepared feature store that holds the images of a question split."""
    from repro.data.prepare import feature_store_dir
    from repro.data.store import FeatureStore

    for source in FEATURE_SOURCES:
        for name in STORES_FOR_SPLIT.get(split, ()):
            path = feature_store_dir(source) / f"{name}.store"
            if path.is_dir():
                return FeatureStore.open(path)
    raise ReproError(f"no prepared feature store holds the {split!r} images; run `repro download bottom-up-36` "
                     f"and `repro prepare bottom-up-36` (or openvqa-features)")


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Make sure the row's data exists: generated and prepared at synthetic/smoke scale, prepared at paper."""
    if scale == "paper":
        from repro.data.prepare import prepared_dir

        dataset = spec.datasets[0]
        prepared = prepared_dir(dataset)
        if dataset not in ANNOTATIONS or not (prepared / "manifest.json").is_file():
            raise ReproError(f"{spec.id}: paper-scale training needs the prepared {dataset} data and features; run "
                             f"`repro download {dataset} glove-840b bottom-up-36` and `repro prepare {dataset}` and "
                             f"`repro prepare bottom-up-36` first (`repro download --list` shows what is present)")
        return {"prepared": prepared}
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
    from repro.models import build_model
    from repro.train import fit, load_recipe
    from repro.train.trainer import seed_everything

    data = prepare_data(spec, scale, settings)
    if scale == "paper":
        return _run_paper(spec, row, settings, seed, workdir, resume, progress, extras, data["prepared"])
    train = VQADataset(data["prepared"], "train", FeatureStore.open(data["train_features"]))
    val = VQADataset(data["prepared"], "val", FeatureStore.open(data["val_features"]))

    recipe = load_recipe(spec.recipe).replace(**{**settings.get("recipe", {}), "seed": seed,
                                                 "train_splits": ("train",)})
    seed_everything(seed)
    model = build_model(row.model, train.num_tokens, train.num_answers, sizes=settings.get("sizes"))
    state = fit(model, train, recipe, workdir, resume=resume, progress=progress)
    _record_training(extras, state)
    result = _score(model, val, train.answer_vocab, data["val_annotations"], recipe, progress)
    extras["split"] = "val"
    extras.setdefault("per_question_type", []).append(result.aggregate.get("per_question_type", {}))
    return _columns(spec, result.aggregate)


def _columns(spec: Spec, aggregate: dict[str, Any]) -> dict[str, float]:
    return {col.name: float(aggregate[col.key]) for col in spec.columns if col.metric == "vqa" and col.key in VQA_KEYS}


def _record_training(extras: dict[str, Any], state) -> None:
    extras.setdefault("train", []).append({"steps": state.step, "final_loss": state.final_loss,
                                           "global_batch": state.global_batch, "gpus": state.gpu_count})


def _score(model, dataset, answer_vocab: list[str], annotations: Path, recipe, progress: bool = True):
    """VQA accuracy of `model` on a split with the official annotation file."""
    from repro.metrics import vqa as vqa_metric
    from repro.train import predict

    question_ids, logits = predict(model, dataset, recipe.eval_batch_size or recipe.batch_size, progress=progress)
    predicted = [answer_vocab[i] for i in logits.argmax(dim=1).tolist()]
    gold = _val_annotations(annotations)
    ids = [int(q) for q in question_ids]
    return vqa_metric.evaluate([[a["answer"] for a in gold[q]["answers"]] for q in ids], predicted, ids,
                               [gold[q]["answer_type"] for q in ids], [gold[q]["question_type"] for q in ids])


def _run_paper(spec: Spec, row: Row, settings: dict[str, Any], seed: int, workdir: Path, resume: bool,
               progress: bool, extras: dict[str, Any], prepared: Path) -> dict[str, float]:
    from torch.utils.data import ConcatDataset

    from repro.data.vqa import find_file
    from repro.data.vqa_dataset import VQADataset
    from repro.models import build_model
    from repro.paths import results_dir
    from repro.results import write_json_atomic
    from repro.train import fit, load_recipe, predict
    from repro.train.trainer import seed_everything

    recipe = load_recipe(spec.recipe).replace(**{**settings.get("recipe", {}), "seed": seed})
    have = {p.name.split(".")[0] for p in prepared.glob("*.questions.npz")}
    missing = [s for s in (*recipe.train_splits, "test") if s not in have]
    if missing:
        raise ReproError(f"{prepared}: the prepared data has no {', '.join(missing)} split; the recipe "
                         f"{recipe.name} trains on {', '.join(recipe.train_splits)} (VG needs the MCAN VG files in "
                         f"{data_dir() / 'vg-qa'}, then `repro prepare {spec.datasets[0]} --force`)")
    parts = [VQADataset(prepared, split, paper_store(split)) for split in recipe.train_splits]
    first = parts[0]
    seed_everything(seed)
    model = build_model(row.model, first.num_tokens, first.num_answers,
                        embeddings=getattr(first, "embeddings", None), sizes=settings.get("sizes"))
    state = fit(model, ConcatDataset(parts), recipe, workdir, resume=resume, progress=progress)
    _record_training(extras, state)

    if "val" not in recipe.train_splits:
        annotations = find_file(data_dir() / spec.datasets[0], ANNOTATIONS[spec.datasets[0]])
        if annotations is not None:
            val = VQADataset(prepared, "val", paper_store("val"))
            extras.setdefault("val", []).append(
                _score(model, val, first.answer_vocab, annotations, recipe, progress).aggregate)

    test = VQADataset(prepared, "test", paper_store("test"))
    question_ids, logits = predict(model, test, recipe.eval_batch_size or recipe.batch_size, progress=progress)
    answers = [first.answer_vocab[i] for i in logits.argmax(dim=1).tolist()]
    out = results_dir() / spec.paper / spec.id / "predictions" / f"{row.slug}.seed{seed}.test2015.json"
    write_json_atomic(out, [{"question_id": int(q), "answer": a} for q, a in zip(question_ids, answers)])
    extras.setdefault("predictions", []).append(str(out))
    extras["split"] = spec.split
    return {}  # the server scores test-dev/test-std: `repro submit vqa2-test-dev --predictions <file>`
