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

from repro.datasets.wordpiece import BERT_FOLDER
from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import AttentionMaps, Hooks, ModelInfo, RowRun, RunContext, train_together
from repro.families.mcan_pa.config import CONFIGS, McanConfig, VlBertConfig
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("mcan", "vl-bert")

VQA_KEYS = ("overall", "yes/no", "number", "other")
# The paper's vocabularies (MCAN's code: answers seen at least 9 times give 3,129; MILVLG/mcan-vqa).
PAPER_NUM_TOKENS = 20572
PAPER_NUM_ANSWERS = 3129
# Paper-scale cost of one training run, from Table VI: 4,150 s (MCAN) and 5,583 s (MCAN+PA) per epoch, 13 epochs.
EPOCH_SECONDS = {"mcan": 4150, "mcan+pa": 5583}
EPOCHS = 13

FEATURE_SOURCES = ("bottom-up-36", "bottom-up-adaptive", "openvqa-features")
# prepared split -> the feature stores that hold its images, first found wins (COCO-QA: test is on val2014)
STORES_FOR_SPLIT = {
    "train": ("trainval", "train2014"),
    "val": ("trainval", "val2014"),
    "vg": ("trainval", "train2014"),
    "test": ("test2015",),
    "test-dev": ("test2015",),
}
COCOQA_STORES = {"train": ("trainval", "train2014"), "test": ("trainval", "val2014")}
ANNOTATIONS = {"vqa2": "v2_mscoco_val2014_annotations.json", "vqa1": "mscoco_val2014_annotations.json"}
# The test question files the servers score, as (prepared split, released split) -> `repro submit` targets.
# VQA v2's server takes every test2015 question for both phases; VQA v1's takes test-dev2015 and test2015 apart.
TEST_FILES = {
    "vqa2": {("test", "test2015"): ("vqa2-test-dev", "vqa2-test-std")},
    "vqa1": {("test-dev", "test-dev2015"): ("vqa1-test-dev",), ("test", "test2015"): ("vqa1-test",)},
}


# --- model --------------------------------------------------------------------------------------


def paper_sizes() -> dict[str, Any]:
    """MCAN's sizes at the paper's settings (§IV-B)."""
    from repro.families.mcan_pa.model import PAPER_SIZES

    return dict(PAPER_SIZES)


def as_config(config: McanConfig | VlBertConfig | dict) -> McanConfig | VlBertConfig:
    return as_typed(config, CONFIGS)


def model_sizes(config: McanConfig | VlBertConfig, sizes: dict | None) -> dict[str, Any]:
    """The paper's sizes of the row's model with `sizes` applied; `sizes` may hold one mapping per arch
    (`{mcan: {...}, vl-bert: {...}}`) when a table mixes them."""
    from repro.families.mcan_pa.vlbert import VLBERT_BASE_SIZES

    sizes = dict(sizes or {})
    if config.arch in sizes:
        sizes = dict(sizes[config.arch] or {})
    sizes = {k: v for k, v in sizes.items() if k not in ARCHS}
    full = dict(VLBERT_BASE_SIZES) if isinstance(config, VlBertConfig) else paper_sizes()
    for key, value in sizes.items():
        if key not in full:
            raise ReproError(f"unknown {config.arch} model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    width = "hidden" if isinstance(config, VlBertConfig) else "d_model"
    if full[width] % full["heads"]:
        raise ReproError(f"model size {width}={full[width]} is not divisible by heads={full['heads']}")
    if "poa" in config.positional and full["geometry_dim"] % 8:
        raise ReproError(f"POA needs geometry_dim divisible by 8, got {full['geometry_dim']}")
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
    from repro.families.mcan_pa.vlbert import VLBERT_BASE_SIZES, VLBert, load_bert_weights

    if config.pretrained:
        raise ReproError("VL-BERT's visual-linguistic pre-training is not reproduced; rows run with pretrained: false")
    model = VLBert(num_tokens, num_answers, sizes, positional=config.positional, fusion=config.fusion or "eq8")
    base = all(sizes[k] == VLBERT_BASE_SIZES[k] for k in ("vocab", "hidden", "layers", "heads", "ffn"))
    if bert_weights is not None or base:
        folder = Path(bert_weights) if bert_weights is not None else data_dir() / BERT_FOLDER
        if not load_bert_weights(model, folder) and bert_weights is not None:
            raise ReproError(f"{folder}: no BERT weights (config.json with pytorch_model.bin or model.safetensors)")
    return model


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


def gpu_hours(config: McanConfig | dict) -> float | None:
    config = as_config(config)
    if isinstance(config, VlBertConfig):
        return None
    return EPOCH_SECONDS["mcan+pa" if config.positional else "mcan"] * EPOCHS / 3600


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(loss_name: str):
    """The loss step for a recipe's loss: the answer logits against the soft scores (Eq. 4)."""
    from repro.train.trainer import recipe_loss_step

    return recipe_loss_step(loss_name)


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The answer logits; the answer is their argmax over the vocabulary."""
    return model(batch)


# --- data ---------------------------------------------------------------------------------------


def feature_store(dataset: str, split: str, folders: list[Path]):
    """The feature store in `folders` that holds the images of a question split."""
    from repro.data.store import FeatureStore

    names = (COCOQA_STORES if dataset == "coco-qa" else STORES_FOR_SPLIT).get(split, ())
    for folder in folders:
        for name in names:
            if (folder / f"{name}.store").is_dir():
                return FeatureStore.open(folder / f"{name}.store")
    raise ReproError(
        f"no prepared feature store holds the {split!r} images of {dataset} ({' or '.join(names)}.store); run "
        f"`repro download bottom-up-36` and `repro prepare bottom-up-36` (or openvqa-features)"
    )


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Make sure the row's data exists: generated and prepared at synthetic/smoke scale, prepared at paper.

    At a scale whose settings say `data: official`, the generator writes the spec's dataset in its
    release layout (`official.py`) and the run follows the paper-scale protocol on it.
    """
    from repro.datasets.prepare import feature_store_dir, prepared_dir
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
        return {"prepared": prepared, "root": data_dir(), "features": [feature_store_dir(s) for s in FEATURE_SOURCES]}
    if settings.get("data") == "official":
        from repro.families.mcan_pa.official import SERVER_ANSWERS, OfficialConfig, generate_official

        cfg = OfficialConfig.from_mapping(settings.get("generator"))
        root = generate_official(data_dir() / "synthetic" / f"{dataset}-release-{cfg.key()}", dataset, cfg)
        vg = root / "vg-qa" if "vg-qa" in spec.datasets and (root / "vg-qa").is_dir() else None
        prepare_vqa(dataset, root / dataset, root / "prepared", glove=None, vg_dir=vg)
        if dataset == "coco-qa":
            _need_wordnet()
        server = root / "server" / SERVER_ANSWERS
        return {"prepared": root / "prepared", "root": root, "features": [root / "features"], "server": server}
    from repro.families.mcan_pa.synthetic import GeneratorConfig, generate

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"vqa2-{cfg.key()}"
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


# --- one (row, seed) ----------------------------------------------------------------------------


def run_row(ctx: RunContext) -> RowRun:
    from repro.train import fit
    from repro.train.trainer import seed_everything

    data = prepare_data(ctx.spec, ctx.scale, ctx.settings)
    if not ctx.generated or "server" in data:
        return _run_release(ctx, data)
    train, val = _generated_splits(ctx, data)
    recipe = _generated_recipe(ctx)
    seed_everything(ctx.seed)
    model = build_model(ctx.config, train.num_tokens, train.num_answers, sizes=ctx.settings.get("sizes"))
    state = fit(
        model, train, recipe, ctx.workdir, loss_step=loss_step(recipe.loss), resume=ctx.resume, progress=ctx.progress
    )
    return _generated_run(ctx, model, state, train, val, data, recipe)


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds trained together (`repro.train.ensemble`) on the synthetic scenes, each scored as `run_row`
    scores it; `ensemble: true` in a generated scale's settings."""
    ctx = ctxs[0]
    if not isinstance(as_config(ctx.config), McanConfig):
        raise ReproError(f"row {ctx.row.name!r}: only MCAN rows train their seeds together; run it with --no-ensemble")
    data = prepare_data(ctx.spec, ctx.scale, ctx.settings)
    if not ctx.generated or "server" in data:
        raise ReproError(f"{ctx.spec.id}: seeds are trained together on the synthetic scenes, not on release files")
    train, val = _generated_splits(ctx, data)
    recipes = [_generated_recipe(c) for c in ctxs]
    models, states = train_together(
        ctxs,
        lambda c: build_model(c.config, train.num_tokens, train.num_answers, sizes=c.settings.get("sizes")),
        train,
        recipes,
        loss_step(recipes[0].loss),
    )
    return [_generated_run(*unit, train, val, data, r) for unit, r in zip(zip(ctxs, models, states), recipes)]


def _generated_splits(ctx: RunContext, data: dict[str, Any]):
    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset

    sizes = ctx.settings.get("sizes")
    train = _questions(
        ctx.config, VQADataset(data["prepared"], "train", FeatureStore.open(data["train_features"])), sizes
    )
    val = _questions(ctx.config, VQADataset(data["prepared"], "val", FeatureStore.open(data["val_features"])), sizes)
    return train, val


def _generated_recipe(ctx: RunContext):
    from repro.families import load_recipe

    return load_recipe(ctx.spec.recipe).replace(
        **{**ctx.settings.get("recipe", {}), "seed": ctx.seed, "train_splits": ("train",)}
    )


def _generated_run(ctx: RunContext, model, state, train, val, data: dict[str, Any], recipe) -> RowRun:
    """A unit trained on the synthetic scenes, scored on their val split."""
    result = _score(model, val, train.answer_vocab, _annotations(data["val_annotations"]), recipe, ctx.progress)
    return RowRun(
        metrics=_columns(ctx.spec, {None: result.aggregate}),
        split="val",
        training=state.summary(),
        extra={"per_question_type": result.aggregate.get("per_question_type", {})},
    )


def _columns(spec: Spec, aggregates: dict[str | None, dict[str, Any]]) -> dict[str, float]:
    """The spec's VQA columns from each split's VQA scores (key None: the one split scored, for every column)."""
    out = {}
    for col in spec.columns:
        aggregate = aggregates.get(None, aggregates.get(col.split))
        if col.metric == "vqa" and col.key in VQA_KEYS and aggregate is not None:
            out[col.name] = float(aggregate[col.key])
    return out


def _annotations(path: Path) -> dict[int, dict[str, Any]]:
    return {a["question_id"]: a for a in json.loads(path.read_text())["annotations"]}


def _answers(model, dataset, answer_vocab: list[str], recipe, progress: bool) -> tuple[list[int], list[str]]:
    from repro.train import predict

    question_ids, logits = predict(
        model, dataset, recipe.eval_batch_size or recipe.batch_size, predict_step=predict_step, progress=progress
    )
    return [int(q) for q in question_ids], [answer_vocab[i] for i in logits.argmax(dim=1).tolist()]


def _vqa_scores(ids: list[int], predicted: list[str], gold: dict[int, dict[str, Any]]):
    from repro.metrics import vqa as vqa_metric

    return vqa_metric.evaluate(
        [[a["answer"] for a in gold[q]["answers"]] for q in ids],
        predicted,
        ids,
        [gold[q]["answer_type"] for q in ids],
        [gold[q]["question_type"] for q in ids],
    )


def _score(model, dataset, answer_vocab: list[str], gold: dict[int, dict[str, Any]], recipe, progress: bool = True):
    """VQA accuracy of `model` on a split, against the official annotations."""
    return _vqa_scores(*_answers(model, dataset, answer_vocab, recipe, progress), gold)


def _cocoqa_columns(spec: Spec, prepared: Path, ids: list[int], predicted: list[str]) -> dict[str, float]:
    """Table I's columns on COCO-QA test: exact-match accuracy, overall and per type, and WUPS@t (`key` = t)."""
    from repro.datasets.vqa import load_split
    from repro.metrics import accuracy, wups

    test = load_split(prepared, "test")
    by_id = {int(q): (str(a), str(t)) for q, a, t in zip(test["question_id"], test["answer"], test["answer_type"])}
    gold, types = [by_id[q][0] for q in ids], [by_id[q][1] for q in ids]
    acc = accuracy.evaluate(gold, predicted, ids, types).aggregate
    out = {}
    for col in spec.columns:
        if col.metric == "accuracy":
            value = acc["accuracy"] if col.key == "overall" else acc["per_type"].get(col.key)
        elif col.metric == "wups":
            value = wups.evaluate(gold, predicted, threshold=float(col.key)).aggregate[wups.key_for(float(col.key))]
        else:
            continue
        if value is not None:
            out[col.name] = float(value)
    return out


def _unwrapped(dataset):
    return dataset.dataset if hasattr(dataset, "indices") else dataset


def _questions(config, dataset, sizes: dict | None):
    """The split as the row's model reads it: VL-BERT with the WordPiece vocabulary also gets WordPiece ids."""
    config = as_config(config)
    full = model_sizes(config, sizes)
    if not isinstance(config, VlBertConfig) or not full["vocab"]:
        return dataset
    from repro.datasets.wordpiece import WordPieceQuestions, bert_vocab_file

    return WordPieceQuestions(dataset, bert_vocab_file(), full["max_tokens"])


def _run_release(ctx: RunContext, data: dict[str, Any]) -> RowRun:
    """The paper's protocol on a release's files (the real ones, or generated in their layout): train on the
    recipe's splits, score what can be scored here, write the server's prediction files."""
    from torch.utils.data import ConcatDataset

    from repro.datasets.vqa import find_file, load_split
    from repro.datasets.vqa_dataset import VQADataset
    from repro.families import load_recipe
    from repro.paths import results_dir
    from repro.train import fit
    from repro.train.trainer import seed_everything
    from repro.utils import write_json_atomic

    spec, prepared, dataset = ctx.spec, data["prepared"], ctx.spec.datasets[0]
    recipe = load_recipe(spec.recipe).replace(**{**ctx.settings.get("recipe", {}), "seed": ctx.seed})
    tests = [split for split, _ in TEST_FILES.get(dataset, {("test", "test"): ()})]
    have = {p.name.split(".")[0] for p in prepared.glob("*.questions.npz")}
    missing = [s for s in (*recipe.train_splits, *tests) if s not in have]
    if missing:
        raise ReproError(
            f"{prepared}: the prepared data has no {', '.join(missing)} split; the recipe "
            f"{recipe.name} trains on {', '.join(recipe.train_splits)} (VG needs the MCAN VG files in "
            f"{data['root'] / 'vg-qa'}, then `repro prepare {dataset} --force`)"
        )

    def split_data(split: str):
        questions = VQADataset(prepared, split, feature_store(dataset, split, data["features"]))
        return _questions(ctx.config, questions, ctx.settings.get("sizes"))

    parts = [ctx.limited(split_data(split)) for split in recipe.train_splits]
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
    run = RowRun(metrics={}, split=spec.split, training=state.summary())
    if dataset == "coco-qa":  # the test answers are public: scored here
        ids, answers = _answers(model, ctx.limited(split_data("test")), first.answer_vocab, recipe, ctx.progress)
        run.metrics, run.split = _cocoqa_columns(spec, prepared, ids, answers), "test"
        return run

    if "val" not in recipe.train_splits:
        annotations = find_file(data["root"] / dataset, ANNOTATIONS[dataset])
        if annotations is not None:
            val = ctx.limited(split_data("val"))
            run.extra["val"] = _score(
                model, val, first.answer_vocab, _annotations(annotations), recipe, ctx.progress
            ).aggregate

    scale = "" if ctx.scale == "paper" else f".{ctx.scale}"
    predicted: dict[str, dict[int, str]] = {}
    commands: dict[str, list[str]] = {}
    for (split, released), targets in TEST_FILES[dataset].items():
        ids, answers = _answers(model, ctx.limited(split_data(split)), first.answer_vocab, recipe, ctx.progress)
        predicted[released] = dict(zip(ids, answers))
        partial = ".partial" if ctx.limit else ""  # a partial file is never mistaken for a full submission
        name = f"{ctx.row.slug}{scale}.seed{ctx.seed}.{released}{partial}.json"
        out = (ctx.results_root or results_dir()) / spec.paper / spec.id / "predictions" / name
        write_json_atomic(out, [{"question_id": q, "answer": a} for q, a in zip(ids, answers)])
        run.predictions.append(str(out))
        questions = "" if ctx.scale == "paper" else f" --questions {_question_file(data['root'], dataset, split)}"
        commands[str(out)] = [f"repro submit {t} --predictions {out}{questions}" for t in targets]
    run.extra["submit"] = commands

    if "server" in data:  # generated data: scored as the server scores test-dev and test-std
        gold = _annotations(data["server"])
        test = predicted["test2015"]
        dev_ids = {int(q) for q in load_split(prepared, "test-dev")["question_id"]}
        dev = predicted.get("test-dev2015") or {q: a for q, a in test.items() if q in dev_ids}
        std = {q: a for q, a in test.items() if q not in dev_ids}
        scores = {
            name: _vqa_scores(list(p), list(p.values()), gold).aggregate
            for name, p in (("test-dev", dev), ("test-std", std))
        }
        run.metrics = _columns(spec, scores)
    return run  # at paper scale the server scores test-dev/test-std: `repro submit <target> --predictions <file>`


def _question_file(root: Path, dataset: str, split: str) -> Path:
    from repro.datasets.vqa import VQA_FILES, find_file

    name = VQA_FILES[dataset][split][0]
    return find_file(root / dataset, name) or root / dataset / name


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
    if "val_features" not in data:
        raise ReproError(f"{ctx.spec.id} at scale {ctx.scale}: attention maps are drawn on the synthetic scenes")
    if not isinstance(as_config(ctx.config), McanConfig):
        raise ReproError(f"row {ctx.row.name!r}: attention maps are drawn for MCAN rows")
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
    gold = _annotations(data["val_annotations"]).get(question_id, {}).get("multiple_choice_answer")
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


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    run_row=run_row,
    run_ensemble=run_ensemble,
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale
    generator_settings=generator_settings,
    attention=attention,
    example_batch=example_batch,
)
