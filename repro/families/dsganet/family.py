"""dsganet's run protocol (see repro.families.base): DSGANet on VQA-style data.

At the synthetic and smoke scales the data is generated (`synthetic.py`): scenes whose objects have a
depth as well as a box, in the official VQA v2 layout with one feature store of object regions and one
of grid cells per split, each with the depth extras DSGANet reads (`depth_hist`, `depth_peak`, and the
scalar readings `depth_mean`, `depth_mode`). The model is trained on train and scored on val with the
VQA soft accuracy (`overall`) and the accuracy on the relational subset (`rel`, the "Rel." column).

At paper scale the val-scored VQA v2 ablations (Tables VI and VII, object rows) train on the prepared VQA v2
data and its object feature store with depth added (`repro prepare depth`), BERT reading the questions in
WordPiece (`repro.datasets.wordpiece`). Test-server tables (IV), GQA (V, VIII) and grid rows at paper scale say
what is missing and stop (see the family README).
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
from repro.families.base import Hooks, ModelInfo, RowRun, RunContext, train_together
from repro.families.dsganet.config import DSGANetConfig
from repro.families.mcan_pa import family as mcan_family
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("dsganet",)
# Vocabularies at paper scale: MCAN's VQA v2 question words and answers (the paper gives neither).
PAPER_NUM_TOKENS = 20572
PAPER_NUM_ANSWERS = 3129

# The "Rel." subset (Sec. V-D): questions with one of the top-100 Visual Genome relationship words or phrases,
# less non-relational words. The paper does not print its list; these are frequent VG spatial predicates.
REL_PHRASES = (
    "on",
    "in",
    "behind",
    "in front of",
    "next to",
    "near",
    "above",
    "under",
    "below",
    "beside",
    "on top of",
    "inside",
    "by",
    "beneath",
    "over",
    "against",
    "along",
    "across",
    "between",
    "around",
    "left of",
    "right of",
    "underneath",
    "outside",
    "on side of",
    "at",
)


# --- model --------------------------------------------------------------------------------------


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


def gpu_hours(config: DSGANetConfig | dict) -> float | None:
    """The paper gives no training time."""
    return None


# --- training and prediction steps ---------------------------------------------------------------


# DSGANet trains and predicts as MCAN does: answer logits against soft scores (Sec. IV-D), argmax.
loss_step, predict_step = mcan_family.loss_step, mcan_family.predict_step


# --- data ---------------------------------------------------------------------------------------


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Generate and prepare the data at synthetic/smoke scale; find the prepared real data at paper scale."""
    if scale == "paper":
        return paper_data(spec)
    from repro.datasets.vqa import prepare_vqa
    from repro.families.dsganet.synthetic import GeneratorConfig, generate

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"dsganet-vqa2-{cfg.key()}"
    sources = generate(root / "raw", cfg)
    prepare_vqa("vqa2", root / "raw", root / "prepared", glove=None)
    return {**sources, "prepared": root / "prepared"}


DEPTH_KEYS = ("depth_hist", "depth_peak", "depth_mean", "depth_mode")


def paper_data(spec: Spec) -> dict[str, Path]:
    """The real data of a val-scored VQA v2 table: prepared questions, the train and val object stores with
    their depth extras, the val files for scoring. Anything missing is named with the command that makes it."""
    from repro.datasets.prepare import feature_store_dir, prepared_dir
    from repro.datasets.vqa import VQA_FILES, find_file

    dataset = spec.datasets[0]
    if dataset != "vqa2" or spec.split != "val":
        raise ReproError(
            f"{spec.id}: paper-scale DSGANet runs the val-scored VQA v2 tables (VI and VII) so far; "
            f"{dataset} scored on {spec.split} is not wired yet; run --scale synthetic or smoke"
        )
    prepared = prepared_dir(dataset)
    if not (prepared / "manifest.json").is_file():
        raise ReproError(
            f"{spec.id}: paper-scale training needs the prepared VQA v2 data; run `repro download vqa2 "
            f"bottom-up-36` and `repro prepare vqa2` and `repro prepare bottom-up-36` first"
        )
    raw = data_dir() / dataset
    data: dict[str, Path] = {"prepared": prepared}
    for key, name in (
        ("val_questions", VQA_FILES[dataset]["val"][0]),
        ("val_annotations", VQA_FILES[dataset]["val"][1]),
    ):
        path = find_file(raw, name)
        if path is None:
            raise ReproError(f"{raw / name}: missing; the val split is scored from it: `repro download {dataset}`")
        data[key] = path
    for split in ("train", "val"):
        store = mcan_family.feature_store(dataset, split, [feature_store_dir(s) for s in mcan_family.FEATURE_SOURCES])
        if not set(DEPTH_KEYS) <= set(store.extras):
            raise ReproError(
                f"{store.path}: no depth extras ({', '.join(DEPTH_KEYS)}); estimate depth maps with `repro prepare "
                f"depth-maps --source <COCO images>` (or use BTS PNGs) and add them with `repro prepare depth "
                f"--store {store.path} --source <depth maps>`"
            )
        data[f"{split}_features"] = store.path
    return data


def _questions(config: DSGANetConfig, sizes: dict[str, Any], split):
    """The split as the row's model reads it: BERT over a WordPiece vocabulary (`bert_vocab` set, as at paper
    sizes) also gets the questions in WordPiece ids, [CLS] first (`bert_ids`); the generated scales' tiny BERT
    reads the prepared word ids."""
    if config.question_encoder != "bert" or not sizes["bert_vocab"]:
        return split
    from repro.datasets.wordpiece import WordPieceQuestions, bert_vocab_file

    return WordPieceQuestions(split, bert_vocab_file(), sizes["max_tokens"] + 2, key="bert_ids", special_tokens=True)


def dataset(prepared: Path, split: str, store_path: Path):
    """A `VQADataset` that also gives the scalar depth readings of the store (`depth_mean`, `depth_mode`)."""
    from repro.data.store import FeatureStore
    from repro.datasets.vqa_dataset import VQADataset

    class DepthVQADataset(VQADataset):
        def __getitem__(self, index: int) -> dict[str, Any]:
            item = super().__getitem__(index)
            image = self.store.get(int(self.image_ids[index]))
            for key in ("depth_mean", "depth_mode"):
                if key in image:
                    item[key] = torch.from_numpy(image[key].astype("float32"))
            return item

    return DepthVQADataset(prepared, split, FeatureStore.open(store_path))


# The paper's rule (Sec. V-D): the top-100 relationships of Visual Genome, less the words or phrases unrelated
# to relations ("is, am, are, have been, etc."): forms of "be" and the perfect "have/has/had been" are dropped;
# "has"/"have" stay (possession is a Visual Genome relationship).
REL_TOP = 100
NON_RELATIONAL = ("is", "am", "are", "was", "were", "be", "been", "being", "have been", "has been", "had been")
VG_RELATIONSHIPS = (
    "relationships.json"  # Visual Genome 1.4, <data_dir>/visual-genome (`repro download vg-relationships`)
)


def vg_relationship_phrases(path: Path, top: int = REL_TOP) -> tuple[str, ...]:
    """The `top` most frequent Visual Genome predicates (lower case, spaces collapsed; ties in first-seen
    order), less NON_RELATIONAL: the paper's list of relationship words or phrases."""
    from collections import Counter

    try:
        images = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReproError(f"{path}: not a readable Visual Genome relationships file ({exc})") from None
    if not isinstance(images, list):
        raise ReproError(f"{path}: expected a list of images with 'relationships'")
    counts: Counter[str] = Counter()
    for image in images:
        for rel in (image.get("relationships") or []) if isinstance(image, dict) else []:
            predicate = " ".join(str(rel.get("predicate", "")).lower().split()) if isinstance(rel, dict) else ""
            if predicate:
                counts[predicate] += 1
    return tuple(p for p, _ in counts.most_common(top) if p not in NON_RELATIONAL)


def rel_phrases(scale: str) -> tuple[tuple[str, ...], str]:
    """The phrases of the "Rel." subset and where they come from: at paper scale the Visual Genome rule when
    relationships.json is downloaded, else (and for generated questions) the fixed REL_PHRASES."""
    from repro.datasets.vqa import find_file

    folder = data_dir() / "vg-relationships"
    path = find_file(folder, VG_RELATIONSHIPS) if scale == "paper" and folder.is_dir() else None
    if path is not None:
        return vg_relationship_phrases(path), str(path)
    return REL_PHRASES, "REL_PHRASES"


def rel_questions(questions_file: Path, phrases: tuple[str, ...] = REL_PHRASES) -> set[int]:
    """Question ids of the "Rel." subset: questions that contain one of `phrases` as whole words."""
    import re

    if not phrases:
        return set()
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True)) + r")\b", re.IGNORECASE
    )
    questions = json.loads(Path(questions_file).read_text())["questions"]
    return {int(q["question_id"]) for q in questions if pattern.search(q["question"])}


def rel_accuracy(per_item: dict, subset: set[int]) -> tuple[float, int]:
    """Mean per-question score (VQA accuracy, percent) over the predicted questions in the Rel. subset."""
    scores = [per_item[q] for q in per_item if int(q) in subset]
    return (sum(scores) / len(scores) if scores else float("nan")), len(scores)


# --- one (row, seed) ----------------------------------------------------------------------------


def run_row(ctx: RunContext) -> RowRun:
    from repro.train import fit
    from repro.train.trainer import seed_everything

    data, train, val = _splits(ctx)
    recipe = _recipe(ctx)
    seed_everything(ctx.seed)
    model = build_model(ctx.config, train.num_tokens, train.num_answers, sizes=ctx.settings.get("sizes"))
    state = fit(
        model,
        ctx.limited(train),
        recipe,
        ctx.workdir,
        loss_step=loss_step(recipe.loss),
        resume=ctx.resume,
        progress=ctx.progress,
    )
    return _scored_run(ctx, model, state, train, val, data, recipe)


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds trained together (`repro.train.ensemble`) at a generated scale, each scored as `run_row`
    scores it; `ensemble: true` in the scale's settings."""
    ctx = ctxs[0]
    data, train, val = _splits(ctx)
    recipes = [_recipe(c) for c in ctxs]
    models, states = train_together(
        ctxs,
        lambda c: build_model(c.config, train.num_tokens, train.num_answers, sizes=c.settings.get("sizes")),
        train,
        recipes,
        loss_step(recipes[0].loss),
    )
    return [_scored_run(*unit, train, val, data, r) for unit, r in zip(zip(ctxs, models, states), recipes)]


def _splits(ctx: RunContext):
    """The prepared data, and the train and val questions in the row's features."""
    data = prepare_data(ctx.spec, ctx.scale, ctx.settings)
    config = as_config(ctx.config)
    store = "features" if config.features == "objects" else "grid_features"
    if f"train_{store}" not in data:
        raise ReproError(
            f"{ctx.spec.id} row {ctx.row.name}: grid features of the real images (X-152 C5, `repro download "
            f"grid-features`) are not prepared into a feature store yet; object rows run at paper scale"
        )
    sizes = model_sizes(config, ctx.settings.get("sizes"))
    train, val = (
        _questions(config, sizes, dataset(data["prepared"], s, data[f"{s}_{store}"])) for s in ("train", "val")
    )
    return data, train, val


def _recipe(ctx: RunContext):
    from repro.families import load_recipe

    return load_recipe(ctx.spec.recipe).replace(
        **{**ctx.settings.get("recipe", {}), "seed": ctx.seed, "train_splits": ("train",)}
    )


def _scored_run(ctx: RunContext, model, state, train, val, data: dict[str, Path], recipe) -> RowRun:
    """A trained unit scored on the val split: the spec's columns, per answer and question type, Rel."""
    phrases, phrase_source = rel_phrases(ctx.scale)
    scores = score(
        model,
        ctx.limited(val),
        train.answer_vocab,
        data["val_annotations"],
        data["val_questions"],
        recipe,
        ctx.progress,
        phrases,
    )
    # "accuracy" columns (GQA, Tables V and VIII) are exact match with the answer; "vqa" columns the VQA score
    metrics = {
        col.name: float(scores["exact"] if col.metric == "accuracy" and col.key == "overall" else scores[col.key])
        for col in ctx.spec.columns
        if col.key in scores
    }
    return RowRun(
        metrics=metrics,
        split="val",
        training=state.summary(),
        extra={
            "per_answer_type": {k: scores[k] for k in ("yes/no", "number", "other") if k in scores},
            "per_question_type": scores.get("per_question_type", {}),
        },
        info={"rel_questions": scores["rel_count"], "rel_phrases": phrase_source},
    )


def score(
    model,
    data,
    answer_vocab: list[str],
    annotations: Path,
    questions: Path,
    recipe,
    progress: bool = True,
    phrases: tuple[str, ...] = REL_PHRASES,
) -> dict[str, Any]:
    """VQA accuracy on a split (overall, per answer type, per question type) and on its Rel. subset (`rel`);
    `accuracy`-metric columns of GQA-like specs read `overall` as well."""
    from repro.metrics import vqa as vqa_metric
    from repro.train import predict

    ids, logits = predict(
        model, data, recipe.eval_batch_size or recipe.batch_size, predict_step=predict_step, progress=progress
    )
    ids = [int(q) for q in ids]
    predicted = [answer_vocab[i] for i in logits.argmax(dim=1).tolist()]
    gold = {a["question_id"]: a for a in json.loads(Path(annotations).read_text())["annotations"]}
    result = vqa_metric.evaluate(
        [[a["answer"] for a in gold[q]["answers"]] for q in ids],
        predicted,
        ids,
        [gold[q]["answer_type"] for q in ids],
        [gold[q]["question_type"] for q in ids],
    )
    out = dict(result.aggregate)
    out["rel"], out["rel_count"] = rel_accuracy(result.per_item, rel_questions(questions, phrases))
    exact = sum(p == gold[q]["multiple_choice_answer"] for p, q in zip(predicted, ids, strict=True))
    out["exact"] = 100.0 * exact / len(ids)
    return out


# --- Tables II and III: statistics of the official files ----------------------------------------

# What each column counts (the paper does not define them; see the specs' notes).
STATISTICS_MEANING = {
    "vqa2": {
        "images": "distinct image_id of the split's question file",
        "questions": "questions in the split's question file (test: all of test2015)",
        "answers": "human answers in the split's annotation file (10 per question)",
    },
    "gqa": {
        "images": "distinct imageId of the split's balanced question file",
        "questions": "questions in the split's balanced question file",
        "vocab": "distinct question words (MCAN's tokenisation), per split; all: their union",
    },
}


def statistics(ctx: RunContext) -> RowRun:
    """One row of Table II (VQA v2) or III (GQA balanced) counted from the official files: at paper scale
    those under `<data_dir>/<dataset>` (`repro download`), at smoke scale tiny files in the same layouts
    that this writes. Cells whose file is missing stay empty and are listed in `info.missing`."""
    from repro.datasets import gqa, vqa
    from repro.families.dsganet.synthetic import write_stats_fixture

    dataset = ctx.spec.datasets[0]
    if dataset not in STATISTICS_MEANING:
        raise ReproError(f"{ctx.spec.id}: no statistics for dataset {dataset!r}")
    if ctx.scale == "paper":
        root = data_dir() / dataset
        if not root.is_dir():
            raise ReproError(f"{root}: no such folder; run repro download {dataset} first")
    else:
        root = write_stats_fixture(dataset, data_dir() / "synthetic" / f"dsganet-{dataset}-stats")
    stats = gqa.statistics(root) if dataset == "gqa" else vqa.statistics(dataset, root)
    split = str((ctx.row.compute or {}).get("split", "all"))
    cell = stats["splits"].get(split)
    if cell is None:
        raise ReproError(f"{ctx.spec.id}: unknown split {split!r}; one of {', '.join(stats['splits'])}")
    metrics = {c.name: float(cell[c.key]) for c in ctx.spec.columns if cell.get(c.key) is not None}
    info: dict[str, Any] = {"source": stats["root"], "meaning": STATISTICS_MEANING[dataset], "missing": []}
    if not cell["present"]:
        missing = [s["file"] for s in stats["splits"].values() if not s["present"] and s["file"].endswith(".json")]
        info["missing"] = sorted(set(missing))
    return RowRun(metrics=metrics, split=split, info=info)


COMPUTE_TASKS = {"statistics": statistics}  # `compute: {task: ...}` rows -> what runs them


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    run_row=run_row,
    run_ensemble=run_ensemble,
    compute_tasks=COMPUTE_TASKS,
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale
    example_batch=example_batch,
)
