"""mcan-pa's run protocol (see repro.families.base): MCAN and its positional variants on VQA-style data.

At the synthetic and smoke scales the data is generated (`synthetic.py`) in the official VQA v2
layout and prepared by the same code as the real files; the model is trained on train and scored
on val with the VQA soft accuracy (`repro.metrics.vqa`, the official rules).

At paper scale the model is trained on the recipe's splits of the prepared real data (VQA v2:
train + val + VG, as the paper does for test-dev and test-std). Those splits can only be scored by
the evaluation server, so the run writes predictions for every test2015 question in the server's
format (`results/<paper>/<table>/predictions/<row>.seed<N>.test2015.json`, ready for `repro
submit`) and the record's metrics stay empty until a score comes back. When the recipe leaves val
out of training, val is scored locally and kept in the record's `extra.val` (never compared with
the paper's test-dev numbers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import AttentionMaps, ModelInfo, RowRun, RunContext
from repro.families.mcan_pa.config import CONFIGS, McanConfig, VlBertConfig
from repro.families.mcan_pa.synthetic import GeneratorConfig
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("mcan",)  # VL-BERT_BASE+PA (Table IV) is not implemented yet
GENERATOR = GeneratorConfig  # the synthetic generator's settings (generator.<key>=... overrides are checked on it)
SUPPORTS_LIMIT = True  # repro run --limit N: the first N questions of each split at paper scale
VQA_KEYS = ("overall", "yes/no", "number", "other")
# The paper's vocabularies (MCAN's code: answers seen at least 9 times give 3,129; MILVLG/mcan-vqa).
PAPER_NUM_TOKENS = 20572
PAPER_NUM_ANSWERS = 3129
# Paper-scale cost of one training run, from Table VI: 4,150 s (MCAN) and 5,583 s (MCAN+PA) per epoch, 13 epochs.
EPOCH_SECONDS = {"mcan": 4150, "mcan+pa": 5583}
EPOCHS = 13

FEATURE_SOURCES = ("bottom-up-36", "bottom-up-adaptive", "openvqa-features")
STORES_FOR_SPLIT = {
    "train": ("trainval", "train2014"),
    "val": ("trainval", "val2014"),
    "vg": ("trainval",),
    "test": ("test2015",),
    "test-dev": ("test2015",),
}
ANNOTATIONS = {"vqa2": "v2_mscoco_val2014_annotations.json", "vqa1": "mscoco_val2014_annotations.json"}
SUBMISSION_TARGETS = {"vqa2": "vqa2-test-dev", "vqa1": "vqa1-test-dev"}


# --- model --------------------------------------------------------------------------------------


def paper_sizes() -> dict[str, Any]:
    """MCAN's sizes at the paper's settings (§IV-B)."""
    from repro.families.mcan_pa.model import PAPER_SIZES

    return dict(PAPER_SIZES)


def as_config(config: McanConfig | VlBertConfig | dict) -> McanConfig | VlBertConfig:
    return as_typed(config, CONFIGS)


def build_model(
    config: McanConfig | dict,
    num_tokens: int = PAPER_NUM_TOKENS,
    num_answers: int = PAPER_NUM_ANSWERS,
    embeddings: torch.Tensor | None = None,
    sizes: dict | None = None,
) -> nn.Module:
    """The model a row names; `sizes` overrides the paper's (d_model, layers, heads, ...)."""
    config = as_config(config)
    if isinstance(config, VlBertConfig):
        raise ReproError("VL-BERT_BASE+PA (mcan-pa Table IV) is not implemented yet")
    full = paper_sizes()
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    if full["d_model"] % full["heads"]:
        raise ReproError(f"model size d_model={full['d_model']} is not divisible by heads={full['heads']}")
    if "poa" in config.positional and full["geometry_dim"] % 8:
        raise ReproError(f"POA needs geometry_dim divisible by 8, got {full['geometry_dim']}")
    if num_tokens < 2 or num_answers < 1:
        raise ReproError(f"model needs at least 2 tokens and 1 answer, got {num_tokens} and {num_answers}")

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
    }
    return {k: v.to(device) for k, v in batch.items()}


def describe(config: McanConfig | dict) -> list[ModelInfo]:
    """Parameters and FLOPs per sample at the paper's sizes and vocabularies (mcan-pa Table VI)."""
    from repro.nn.measure import count_flops, count_parameters

    config = as_config(config)
    torch.manual_seed(0)
    model = build_model(config)
    modules = [(name, count_parameters(child)) for name, child in model.named_children()]
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


def gpu_hours(config: McanConfig | dict) -> float | None:
    config = as_config(config)
    if isinstance(config, VlBertConfig):
        return None
    return EPOCH_SECONDS["mcan+pa" if config.positional else "mcan"] * EPOCHS / 3600


def submission_target(spec: Spec) -> str | None:
    return next((SUBMISSION_TARGETS[d] for d in spec.datasets if d in SUBMISSION_TARGETS), None)


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(loss_name: str):
    """The loss step for a recipe's loss: the answer logits against the soft scores (Eq. 4)."""
    from repro.train.trainer import recipe_loss_step

    return recipe_loss_step(loss_name)


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The answer logits; the answer is their argmax over the vocabulary."""
    return model(batch)


# --- data ---------------------------------------------------------------------------------------


def paper_store(split: str):
    """The prepared feature store that holds the images of a question split."""
    from repro.data.store import FeatureStore
    from repro.datasets.prepare import feature_store_dir

    for source in FEATURE_SOURCES:
        for name in STORES_FOR_SPLIT.get(split, ()):
            path = feature_store_dir(source) / f"{name}.store"
            if path.is_dir():
                return FeatureStore.open(path)
    raise ReproError(
        f"no prepared feature store holds the {split!r} images; run `repro download bottom-up-36` "
        f"and `repro prepare bottom-up-36` (or openvqa-features)"
    )


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Make sure the row's data exists: generated and prepared at synthetic/smoke scale, prepared at paper."""
    if scale == "paper":
        from repro.datasets.prepare import prepared_dir

        dataset = spec.datasets[0]
        prepared = prepared_dir(dataset)
        if dataset not in ANNOTATIONS or not (prepared / "manifest.json").is_file():
            raise ReproError(
                f"{spec.id}: paper-scale training needs the prepared {dataset} data and features; run "
                f"`repro download {dataset} glove-840b bottom-up-36` and `repro prepare {dataset}` and "
                f"`repro prepare bottom-up-36` first (`repro download --list` shows what is present)"
            )
        return {"prepared": prepared}
    from repro.datasets.vqa import prepare_vqa
    from repro.families.mcan_pa.synthetic import GeneratorConfig, generate

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"vqa2-{cfg.key()}"
    sources = generate(root / "raw", cfg)
    prepare_vqa("vqa2", root / "raw", root / "prepared", glove=None)
    return {**sources, "prepared": root / "prepared"}


# --- one (row, seed) ----------------------------------------------------------------------------


def run_row(ctx: RunContext) -> RowRun:
    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset
    from repro.train import fit, load_recipe
    from repro.train.trainer import seed_everything

    data = prepare_data(ctx.spec, ctx.scale, ctx.settings)
    if not ctx.generated:
        return _run_paper(ctx, data["prepared"])
    train = VQADataset(data["prepared"], "train", FeatureStore.open(data["train_features"]))
    val = VQADataset(data["prepared"], "val", FeatureStore.open(data["val_features"]))

    recipe = load_recipe(ctx.spec.recipe).replace(
        **{**ctx.settings.get("recipe", {}), "seed": ctx.seed, "train_splits": ("train",)}
    )
    seed_everything(ctx.seed)
    model = build_model(ctx.config, train.num_tokens, train.num_answers, sizes=ctx.settings.get("sizes"))
    state = fit(
        model, train, recipe, ctx.workdir, loss_step=loss_step(recipe.loss), resume=ctx.resume, progress=ctx.progress
    )
    result = _score(model, val, train.answer_vocab, data["val_annotations"], recipe, ctx.progress)
    return RowRun(
        metrics=_columns(ctx.spec, result.aggregate),
        split="val",
        training=_training(state),
        extra={"per_question_type": result.aggregate.get("per_question_type", {})},
    )


def _columns(spec: Spec, aggregate: dict[str, Any]) -> dict[str, float]:
    return {col.name: float(aggregate[col.key]) for col in spec.columns if col.metric == "vqa" and col.key in VQA_KEYS}


def _training(state) -> dict[str, Any]:
    return {
        "steps": state.step,
        "final_loss": state.final_loss,
        "global_batch": state.global_batch,
        "gpus": state.gpu_count,
    }


def _val_annotations(path: Path) -> dict[int, dict[str, Any]]:
    return {a["question_id"]: a for a in json.loads(path.read_text())["annotations"]}


def _answers(model, dataset, answer_vocab: list[str], recipe, progress: bool) -> tuple[list[int], list[str]]:
    from repro.train import predict

    question_ids, logits = predict(
        model, dataset, recipe.eval_batch_size or recipe.batch_size, predict_step=predict_step, progress=progress
    )
    return [int(q) for q in question_ids], [answer_vocab[i] for i in logits.argmax(dim=1).tolist()]


def _score(model, dataset, answer_vocab: list[str], annotations: Path, recipe, progress: bool = True):
    """VQA accuracy of `model` on a split with the official annotation file."""
    from repro.metrics import vqa as vqa_metric

    ids, predicted = _answers(model, dataset, answer_vocab, recipe, progress)
    gold = _val_annotations(annotations)
    return vqa_metric.evaluate(
        [[a["answer"] for a in gold[q]["answers"]] for q in ids],
        predicted,
        ids,
        [gold[q]["answer_type"] for q in ids],
        [gold[q]["question_type"] for q in ids],
    )


def _limited(dataset, limit: int | None):
    """The first `limit` questions of a split (`repro run --limit`), or all of them."""
    from torch.utils.data import Subset

    return dataset if limit is None or limit >= len(dataset) else Subset(dataset, range(limit))


def _unwrapped(dataset):
    return dataset.dataset if hasattr(dataset, "indices") else dataset


def _run_paper(ctx: RunContext, prepared: Path) -> RowRun:
    from torch.utils.data import ConcatDataset

    from repro.datasets.vqa import find_file
    from repro.datasets.vqa_dataset import VQADataset
    from repro.paths import results_dir
    from repro.train import fit, load_recipe
    from repro.train.trainer import seed_everything
    from repro.utils import write_json_atomic

    spec = ctx.spec
    recipe = load_recipe(spec.recipe).replace(**{**ctx.settings.get("recipe", {}), "seed": ctx.seed})
    have = {p.name.split(".")[0] for p in prepared.glob("*.questions.npz")}
    missing = [s for s in (*recipe.train_splits, "test") if s not in have]
    if missing:
        raise ReproError(
            f"{prepared}: the prepared data has no {', '.join(missing)} split; the recipe "
            f"{recipe.name} trains on {', '.join(recipe.train_splits)} (VG needs the MCAN VG files in "
            f"{data_dir() / 'vg-qa'}, then `repro prepare {spec.datasets[0]} --force`)"
        )
    parts = [_limited(VQADataset(prepared, split, paper_store(split)), ctx.limit) for split in recipe.train_splits]
    first = _unwrapped(parts[0])
    seed_everything(ctx.seed)
    model = build_model(
        ctx.config,
        first.num_tokens,
        first.num_answers,
        embeddings=getattr(first, "embeddings", None),
        sizes=ctx.settings.get("sizes"),
    )
    state = fit(
        model,
        ConcatDataset(parts),
        recipe,
        ctx.workdir,
        loss_step=loss_step(recipe.loss),
        resume=ctx.resume,
        progress=ctx.progress,
    )
    run = RowRun(metrics={}, split=spec.split, training=_training(state))

    if "val" not in recipe.train_splits:
        annotations = find_file(data_dir() / spec.datasets[0], ANNOTATIONS[spec.datasets[0]])
        if annotations is not None:
            val = _limited(VQADataset(prepared, "val", paper_store("val")), ctx.limit)
            run.extra["val"] = _score(model, val, first.answer_vocab, annotations, recipe, ctx.progress).aggregate

    test = _limited(VQADataset(prepared, "test", paper_store("test")), ctx.limit)
    ids, answers = _answers(model, test, first.answer_vocab, recipe, ctx.progress)
    partial = ".partial" if ctx.limit else ""  # a partial file is never mistaken for a full submission
    name = f"{ctx.row.slug}.seed{ctx.seed}.test2015{partial}.json"
    out = (ctx.results_root or results_dir()) / spec.paper / spec.id / "predictions" / name
    write_json_atomic(out, [{"question_id": q, "answer": a} for q, a in zip(ids, answers)])
    run.predictions.append(str(out))
    return run  # the server scores test-dev/test-std: `repro submit <target> --predictions <file>`


# --- attention maps (repro attention) -----------------------------------------------------------


def attention(ctx: RunContext, question_id: int) -> AttentionMaps:
    """One val question of a generated scale through the unit's trained model (`ctx.workdir/last.pt`).

    Maps over the image's boxes: `decoder self-attention` (Eq. 12, POA's place): per decoder layer and
    head, the attention each box receives from the other boxes (mean over the querying boxes);
    `image pooling` (Eq. 1): the weight of each box in the image's attention-based pooling.
    """
    import numpy as np
    from torch.utils.data import default_collate

    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset
    from repro.nn.inspect import record_attention
    from repro.train.checkpoint import load_checkpoint

    if not ctx.generated:
        raise ReproError("attention maps are drawn at the smoke and synthetic scales (generated scenes)")
    data = prepare_data(ctx.spec, ctx.scale, ctx.settings)
    val = VQADataset(data["prepared"], "val", FeatureStore.open(data["val_features"]))
    where = np.nonzero(np.asarray(val.question_ids) == question_id)[0]
    if len(where) == 0:
        some = ", ".join(str(int(q)) for q in val.question_ids[:5])
        raise ReproError(f"no val question {question_id} at scale {ctx.scale}; val questions are e.g. {some}")
    checkpoint = ctx.workdir / "last.pt"
    if not checkpoint.is_file():
        raise ReproError(
            f"{checkpoint}: no trained model; train it first with `repro train {ctx.spec.id} --row "
            f"'{ctx.row.name}' --scale {ctx.scale} --seed {ctx.seed}`"
        )
    model = build_model(ctx.config, val.num_tokens, val.num_answers, sizes=ctx.settings.get("sizes"))
    try:
        model.load_state_dict(load_checkpoint(checkpoint)["model"])
    except RuntimeError as exc:
        raise ReproError(f"{checkpoint} does not fit this row's model: {str(exc).splitlines()[0]}") from None
    model.eval()
    item = val[int(where[0])]
    batch = default_collate([item])
    pooled: dict[str, torch.Tensor] = {}

    def pooling(module, args, output) -> None:  # Eq. 1's softmax over the image's boxes
        x, mask = args
        pooled["weights"] = torch.softmax(module.mlp(x).masked_fill(mask[..., None], -1e9), dim=1)[..., 0].detach()

    handle = model.flat_img.register_forward_hook(pooling)
    with torch.no_grad(), record_attention(model) as maps:
        logits = model(batch)
    handle.remove()
    n = int(item["box_count"])
    layers = len(model.decoder)
    received = np.stack(
        [maps[f"decoder.{i}.self_att"][0, :, :n, :n].mean(dim=1).numpy() for i in range(layers)]
    )  # [layers, heads, n]
    questions = json.loads(data["val_questions"].read_text())["questions"]
    question = next((q["question"] for q in questions if q["question_id"] == question_id), "?")
    gold = _val_annotations(data["val_annotations"]).get(question_id, {}).get("multiple_choice_answer")
    return AttentionMaps(
        question=question,
        answer=val.answer_vocab[int(logits.argmax(dim=1))],
        gold=gold,
        image_size=tuple(float(v) for v in item["image_size"]),
        boxes=item["boxes"][:n].numpy(),
        box_labels=[f"#{k + 1}" for k in range(n)],
        over_boxes={
            "decoder self-attention": received,
            "image pooling": pooled["weights"][0, :n].numpy()[None, None, :],
        },
        raw={name.replace(".", "_"): m[0].numpy() for name, m in maps.items()}
        | {"image_pooling": pooled["weights"][0].numpy()},
    )
