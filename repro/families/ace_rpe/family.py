"""ace-rpe's run protocol (see repro.families.base): ALBEF with cross-modal position embeddings, retrieval.

A row is pre-trained once (ITC, ITM, MLM, MIM, and L_ace for the +Lace rows), then fine-tuned and
evaluated for each retrieval data set among the spec's columns (Flickr30K, MS-COCO), as ALBEF does:
ITC similarity for all pairs, the top k of each query re-scored by the ITM head (k = 128 for
Flickr30K, 256 for COCO; at most the gallery), TR/IR R@1/5/10 by `repro.metrics.retrieval`.
At the smoke (and synthetic) scale the data is generated (`synthetic.py`) in ALBEF's json layout and
read by the same code as the real files (`data.py`); at paper scale the json files, the BERT
vocabulary and the user's images are read from the data folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.ace_rpe.config import CONFIGS, ALBEFConfig
from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES
from repro.families.base import Hooks, ModelInfo, Resources, RowRun, RunContext, default_resources
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("albef",)
K_TEST = {"flickr30k": 128, "coco-retrieval": 256}  # ALBEF's configs/Retrieval_{flickr,coco}.yaml
FINETUNE_RECIPES = {"flickr30k": "ace-rpe/retrieval-flickr30k", "coco-retrieval": "ace-rpe/retrieval-coco"}
PRETRAIN_RECIPE = "ace-rpe/pretrain"
TASK_OF_DATASET = {"vqa2": "vqa", "snli-ve": "snli-ve", "nlvr2": "nlvr2"}  # spec dataset -> downstream model


# --- model --------------------------------------------------------------------------------------


def as_config(config: ALBEFConfig | dict) -> ALBEFConfig:
    return as_typed(config, CONFIGS)


def paper_sizes(config: ALBEFConfig | None = None) -> dict[str, Any]:
    """ALBEF's sizes, with the config's own backbone fields."""
    from repro.families.ace_rpe.model import PAPER_SIZES

    sizes = dict(PAPER_SIZES)
    if config is not None:
        sizes.update(
            hidden_size=config.hidden_size,
            heads=config.heads,
            patch_size=config.patch_size,
            image_layers=config.image_layers,
            text_layers=config.text_layers,
            fusion_layers=config.fusion_layers,
            queue_size=config.queue_size,
        )
    return sizes


def build_model(config: ALBEFConfig | dict, sizes: dict | None = None, task: str | None = None) -> nn.Module:
    """The ALBEF model of a row for `task` (retrieval unless the config or caller says otherwise);
    grounding uses the retrieval model (ITC + ITM), the downstream tasks `heads.TaskALBEF`."""
    from repro.families.ace_rpe.heads import TASKS

    config = as_config(config)
    task = task or config.task or "retrieval"
    task = "retrieval" if task == "grounding" else task
    if task not in ("retrieval", "pretrain", *TASKS):
        raise ReproError(f"ace-rpe: no {task} model (retrieval, pretrain, grounding, {', '.join(TASKS)})")
    full = paper_sizes(config)
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown ace-rpe model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    if full["hidden_size"] % full["heads"] or full["hidden_size"] % config.groups:
        raise ReproError(
            f"ace-rpe size hidden_size={full['hidden_size']} must divide by heads={full['heads']} and G={config.groups}"
        )
    if full["image_size"] % full["patch_size"]:
        raise ReproError(f"image_size {full['image_size']} is not a multiple of patch_size {full['patch_size']}")
    if task in TASKS:
        from repro.families.ace_rpe.heads import TaskALBEF

        return TaskALBEF(config, full, task)
    from repro.families.ace_rpe.model import ALBEF

    model = ALBEF(config, full, task)
    model.copy_params()
    return model


def parts(model: nn.Module) -> list[tuple[str, int]]:
    """Trainable parameters by part; the cross-modal position embedding apart (what a row adds)."""

    def trainable(module):
        return 0 if module is None else sum(p.numel() for p in module.parameters() if p.requires_grad)

    position = trainable(model.fusion.position)
    out = [
        ("visual_encoder", trainable(model.visual_encoder)),
        ("text_encoder", trainable(model.text_encoder)),
        ("fusion", trainable(model.fusion) - position),
        ("position_embedding", position),
    ]
    heads = ("vision_proj", "text_proj", "itm_head", "text_decoder", "cls_head", "ta_head")
    out += [(name, trainable(getattr(model, name))) for name in heads if hasattr(model, name)]
    return out + ([("temp", 1)] if hasattr(model, "temp") else [])


def spec_tasks(spec: Spec | None) -> list[str]:
    """The models a spec's columns fine-tune, in column order: retrieval (recall columns), grounding
    (the retrieval model, fine-tuned on RefCOCO+), vqa, snli-ve, nlvr2."""
    if spec is None:
        return ["retrieval"]
    tasks = [
        "grounding" if c.metric == "grounding" else TASK_OF_DATASET.get(c.dataset or "", "retrieval")
        for c in spec.columns
        if c.metric != "flops"
    ]
    return list(dict.fromkeys(tasks)) or ["retrieval"]


def describe(config: ALBEFConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """The model of each task of the spec's columns (retrieval without a spec) at ALBEF's sizes
    (384 x 384), counted on the meta device (no weights allocated)."""
    config = as_config(config)
    out = []
    for task in spec_tasks(spec):
        with torch.device("meta"):
            model = build_model(config, task=task)
        out.append(
            ModelInfo(
                name=f"albef-{config.position_embedding}" + ("" if task == "retrieval" else f"-{task}"),
                task=task,
                trainable_params=sum(p.numel() for p in model.parameters() if p.requires_grad),
                total_params=sum(p.numel() for p in model.parameters()),
                flops_per_sample=None,
                modules=parts(model),
            )
        )
    return out


def stages(config: ALBEFConfig | dict, spec: Spec) -> list[tuple[str, str, float | None]]:
    """Pre-training, then one retrieval fine-tuning per data set of the spec's recall columns, with
    their estimated A100 GPU-hours (`cost.py`: the paper gives no times)."""
    from repro.families import load_recipe
    from repro.families.ace_rpe import cost

    config = as_config(config)
    sizes = paper_sizes(config)
    pre = load_recipe(PRETRAIN_RECIPE)
    flops = pre.epochs * cost.PAIRS[config.pretrain] * cost.pretrain_flops_per_pair(sizes, config.mim_loss)
    out = [
        (
            "pre-train",
            f"{PRETRAIN_RECIPE}: {pre.epochs} epochs of {cost.PAIRS[config.pretrain] / 1e6:.1f}M pairs "
            f"({config.pretrain}), batch {pre.batch_size}, 256 px",
            cost.gpu_hours(flops),
        )
        if config.init == "pretrain"
        else ("load", f"ALBEF's {RELEASED[config.pretrain]} (`repro download albef-checkpoints`)", 0.0)
    ]
    for dataset in recall_datasets(spec):
        recipe = load_recipe(FINETUNE_RECIPES[dataset])
        flops = recipe.epochs * cost.PAIRS[dataset] * cost.finetune_flops_per_pair(sizes)
        what = f"{recipe.name}: {recipe.epochs} epochs, batch {recipe.batch_size}, 384 px; test k = {K_TEST[dataset]}"
        out.append((f"fine-tune {dataset}", what, cost.gpu_hours(flops)))
    from repro.families.ace_rpe.tasks import RECIPES

    for task in spec_tasks(spec):  # the downstream heads: no estimate (cost.py models ITC + ITM passes only)
        if task == "retrieval":
            continue
        for name in (["nlvr2-assign"] if task == "nlvr2" else []) + [task]:
            recipe = load_recipe(RECIPES[name])
            what = f"{recipe.name}: {recipe.epochs} epochs, batch {recipe.batch_size}"
            out.append((f"fine-tune {name}", what, None))
    return out


def gpu_hours(config: ALBEFConfig | dict) -> float | None:
    """Pre-training and both retrieval fine-tunings (see `stages`)."""
    from repro.families.ace_rpe import cost

    config = as_config(config)
    sizes = paper_sizes(config)
    flops = 30 * cost.PAIRS[config.pretrain] * cost.pretrain_flops_per_pair(sizes, config.mim_loss)
    flops += (10 * cost.PAIRS["flickr30k"] + 5 * cost.PAIRS["coco-retrieval"]) * cost.finetune_flops_per_pair(sizes)
    return cost.gpu_hours(flops)


def resources(config: ALBEFConfig | dict, scale: str) -> Resources:
    """Paper scale: one node of 8 A100s, as the paper pre-trains (Sec. 4.1: batch 512 on 8 NVIDIA A100),
    for the unit's GPU-hours spread over them with a quarter to spare."""
    if scale != "paper":
        return default_resources(scale, None)
    hours = gpu_hours(config)
    return Resources(gpus=8, cpus=64, mem_gb=512, hours=24.0 if hours is None else max(1.0, round(1.25 * hours / 8)))


def data_notes(spec: Spec) -> list[str]:
    """Where the paper scale reads what no catalog entry downloads: the images; what it does not run."""
    root = data_dir()
    if has_tasks(spec):
        skipped = ", ".join(downstream_names(spec))
        note = "refused" if not recall_datasets(spec) else "left empty (pre-training and retrieval run)"
        notes = [f"paper scale: the {skipped} columns are {note}: their heads run at the smoke and synthetic scales"]
    else:
        notes = []
    return notes + [
        f"images (not downloadable here; put them in place yourself): Flickr30K under {root / 'flickr30k'} "
        f"(flickr30k-images/), COCO 2014 under {root / 'coco-images'} (train2014/, val2014/), as ALBEF's "
        f"retrieval json files (`repro download albef-data`: {root / 'albef-data' / 'data'}) name them; "
        f"Visual Genome, CC3M and SBU for pre-training where you keep them: rewrite the paths in ALBEF's "
        f"pre-training json files to them (as ALBEF's README says), or make them relative to "
        f"{root / 'albef-data' / 'images'}",
        "weights: pre-training starts from DeiT-B/16 and bert-base-uncased as ALBEF's (`repro download deit-b16 "
        "bert-base-uncased`, which also holds the vocabulary); `repro download albef-checkpoints` (ALBEF_4M.pth, "
        "ALBEF.pth) to start a row from ALBEF's pre-training instead (model.init=albef); both recipes run "
        "under torchrun: `torchrun --nproc_per_node=8 -m repro run ID --rows ROW` (rank 0 writes the results)",
    ]


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(task: str):
    """The loss of one batch: the model's forward (ALBEF's retrieval objectives or the sum of the
    pre-training objectives, by the task the model was built for), so DistributedDataParallel sees it."""

    def step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(batch)

    return step


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """ITC similarity of the batch's images to its texts (images x texts)."""
    return model.similarity(batch["image"], batch["input_ids"], batch["attention_mask"])


# --- data ---------------------------------------------------------------------------------------


DEIT_FILE = "deit_base_patch16_224-b5f2ef4d.pth"  # `repro download deit-b16`
RELEASED = {"4m": "ALBEF_4M.pth", "14m": "ALBEF.pth"}  # ALBEF's pre-training checkpoints (`init: albef`)


def released_checkpoint(config: ALBEFConfig) -> Path:
    """ALBEF's released pre-training checkpoint of the row's corpus, checked: missing, the command that gets it."""
    path = data_dir() / "albef-checkpoints" / RELEASED[config.pretrain]
    if not path.is_file():
        raise ReproError(f"{path} is missing: get it with `repro download albef-checkpoints`")
    return path


PRETRAIN_FILES = {  # ALBEF's configs/Pretrain.yaml train_file; 14m adds Conceptual 12M
    "4m": ("coco.json", "vg.json", "cc3m_train.json", "cc3m_val.json", "sbu.json"),
    "14m": ("coco.json", "vg.json", "cc12m.json", "cc3m_train.json", "cc3m_val.json", "sbu.json"),
}
IMAGE_FOLDERS = {"flickr30k": "flickr30k", "coco-retrieval": "coco-images"}  # ALBEF's image_root per data set


@dataclass(frozen=True)
class Sources:
    """Where a run reads its data: the BERT vocabulary, the pre-training json files with their image
    folder, and per retrieval data set its train and test json files and image folder."""

    vocab: Path
    pretrain: tuple[tuple[Path, Path], ...]  # (json, image root)
    retrieval: dict[str, tuple[Path, Path, Path]]  # data set -> (train json, test json, image root)
    augment: bool = False  # ALBEF's training augmentations (paper scale)
    initial: tuple[Path, Path] | None = None  # DeiT-B/16 and bert-base-uncased weights pre-training starts from


def synthetic_root(settings: dict[str, Any]) -> Path:
    from repro.families.ace_rpe.synthetic import GeneratorConfig

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return data_dir() / "synthetic" / f"albef-{cfg.key()}"


def paper_sources(config: ALBEFConfig, datasets: list[str]) -> Sources:
    """The paper-scale files under the data folder, checked: the first missing one is named with the
    command that gets it. ALBEF's json files (`repro download albef-data`: `data/*.json`) name the
    retrieval images relative to the data set's folder (Flickr30K: `flickr30k-images/<id>.jpg`, COCO:
    `val2014/...`); the pre-training files name absolute paths, which the user rewrites to where the
    images are (ALBEF's README), or paths relative to `albef-data/images`."""
    root = data_dir()
    albef = root / "albef-data" / "data"
    vocab = root / "bert-base-uncased"
    need = [(vocab / "vocab.txt", "repro download bert-base-uncased")]
    initial = None
    if config.init == "pretrain":  # ALBEF pre-trains from DeiT-B/16 and bert-base-uncased
        initial = (root / "deit-b16" / DEIT_FILE, vocab / "pytorch_model.bin")
        need += [(initial[0], "repro download deit-b16"), (initial[1], "repro download bert-base-uncased")]
    corpus = [] if config.init == "albef" else PRETRAIN_FILES[config.pretrain]  # released weights: no corpus
    pretrain = tuple((albef / name, root / "albef-data" / "images") for name in corpus)
    need += [(path, "repro download albef-data") for path, _ in pretrain]
    retrieval = {}
    for dataset in datasets:
        name = RETRIEVAL_NAMES[dataset]
        retrieval[dataset] = (albef / f"{name}_train.json", albef / f"{name}_test.json", root / IMAGE_FOLDERS[dataset])
        need += [(path, "repro download albef-data") for path in retrieval[dataset][:2]]
    for path, command in need:
        if not path.is_file():
            raise ReproError(f"{path} is missing: get it with `{command}`")
    return Sources(vocab=vocab, pretrain=pretrain, retrieval=retrieval, augment=True, initial=initial)


def read_split(path: Path, kind: str, image_root: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """An ALBEF json file's entries (the first `limit`), its first image checked before any training."""
    from repro.families.ace_rpe.data import read_annotations

    entries = read_annotations(path, kind)[:limit]
    first = image_root / entries[0]["image"]
    if not first.is_file():
        raise ReproError(
            f"{first} is missing (the first image of {path.name}): the images are yours to put in place "
            f"(`repro run ... --dry-run` says where)"
        )
    return entries


def synthetic_sources(root: Path, datasets: list[str]) -> Sources:
    retrieval = {d: (root / f"{n}_train.json", root / f"{n}_test.json", root) for d, n in RETRIEVAL_NAMES.items()}
    return Sources(vocab=root / "vocab", pretrain=((root / "pretrain.json", root),), retrieval=retrieval)


def downstream_names(spec: Spec) -> list[str]:
    """The downstream columns' data sets (VQA v2, SNLI-VE, NLVR2, RefCOCO+) in column order."""
    names = {"vqa2": "VQA v2", "snli-ve": "SNLI-VE", "nlvr2": "NLVR2"}
    out = [names[c.dataset] if c.dataset in names else "RefCOCO+" for c in spec.columns if _downstream(c)]
    return list(dict.fromkeys(out))


def _downstream(column) -> bool:
    return column.dataset in TASK_OF_DATASET or column.metric == "grounding"


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    if scale == "paper":
        if has_tasks(spec) and not recall_datasets(spec):  # refused before any GPU-hour is spent
            raise ReproError(
                f"{spec.id}: the {', '.join(downstream_names(spec))} heads run at the smoke and synthetic scales "
                "only; at paper scale pre-training and retrieval run (Tables 1, 3, 6-9): "
                "repro/families/ace_rpe/README.md says what is missing"
            )
        # the files every row needs; a row that pre-trains checks its corpus when it starts (run_row)
        sources = paper_sources(ALBEFConfig(arch="albef", init="albef"), recall_datasets(spec))
        return {"root": data_dir(), "vocab": sources.vocab}
    from repro.families.ace_rpe.synthetic import GeneratorConfig, generate

    root = synthetic_root(settings)
    generate(root, GeneratorConfig.from_mapping(settings.get("generator")))
    if not has_tasks(spec) or "task_generator" not in settings:
        return {"root": root}  # a generated scale without `task_generator` fills the retrieval columns only
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig, generate_tasks

    tasks = tasks_root(settings)
    generate_tasks(tasks, TaskGeneratorConfig.from_mapping(settings.get("task_generator")))
    return {"root": root, "tasks": tasks}


def has_tasks(spec: Spec) -> bool:
    """Whether the spec has downstream columns (VQA, SNLI-VE, NLVR2, grounding: `tasks.py`)."""
    return any(_downstream(c) for c in spec.columns)


def tasks_root(settings: dict[str, Any]) -> Path:
    """The generated downstream data (`synthetic_tasks.py`), a folder apart from the retrieval data."""
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig

    cfg = TaskGeneratorConfig.from_mapping(settings.get("task_generator"))
    return data_dir() / "synthetic" / f"albef-tasks-{cfg.key()}"


# --- retrieval evaluation (ALBEF's Retrieval.py evaluation()) ----------------------------------------


@torch.no_grad()
def score_matrices(model, test, tok, size: int, k: int, batch_size: int = 64, max_tokens: int = 30):
    """ALBEF's score matrices: ITC similarity for all pairs, the top k of each row re-scored by the ITM
    head's positive logit, every other entry -100. Under torchrun each rank re-scores its share of the
    rows and the matrices are summed over the ranks, as ALBEF's evaluation() does."""
    import torch.distributed as dist

    from repro.families.ace_rpe.data import load_image

    model.eval()
    device = next(model.parameters()).device
    text_embeds, text_masks, text_feats = [], [], []
    for start in range(0, len(test.texts), batch_size):
        enc = tok(
            test.texts[start : start + batch_size],
            padding="max_length",
            truncation=True,
            max_length=max_tokens,
            return_tensors="pt",
        ).to(device)
        embeds = model.text_embeds(enc["input_ids"], enc["attention_mask"])
        text_embeds.append(embeds)
        text_masks.append(enc["attention_mask"])
        text_feats.append(model.text_feat(embeds))
    text_embeds, text_masks, text_feats = torch.cat(text_embeds), torch.cat(text_masks), torch.cat(text_feats)
    image_embeds, image_feats = [], []
    for start in range(0, len(test.images), batch_size):
        images = torch.stack([load_image(p, size) for p in test.images[start : start + batch_size]]).to(device)
        embeds = model.image_embeds(images)
        image_embeds.append(embeds)
        image_feats.append(model.image_feat(embeds))
    image_embeds, image_feats = torch.cat(image_embeds), torch.cat(image_feats)
    ranks = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    rank = dist.get_rank() if ranks > 1 else 0
    sims = image_feats @ text_feats.T
    i2t = torch.zeros(sims.shape, device=device)  # rows of other ranks stay 0 until the sum
    t2i = torch.zeros(sims.T.shape, device=device)
    for scores, query_is_image in ((i2t, True), (t2i, False)):
        rows = list(range(rank, scores.shape[0], ranks))
        if not rows:
            continue
        similarity = sims[rows] if query_is_image else sims.T[rows]
        top = similarity.topk(min(k, scores.shape[1]), dim=1).indices  # (queries, k)
        queries = torch.tensor(rows, device=device)[:, None].expand_as(top).reshape(-1)
        candidates = top.reshape(-1)
        images, texts = (queries, candidates) if query_is_image else (candidates, queries)
        logits = torch.cat(
            [  # the ITM head on (text, image) pairs, `batch_size` pairs at a time
                model.itm_logits(text_embeds[t], text_masks[t], image_embeds[i])[:, 1]
                for i, t in zip(images.split(batch_size), texts.split(batch_size))
            ]
        )
        scores[rows] = -100.0
        scores[queries, candidates] = logits
    if ranks > 1:
        dist.all_reduce(i2t)
        dist.all_reduce(t2i)
    return i2t.cpu().numpy(), t2i.cpu().numpy()


# --- one (row, seed) ----------------------------------------------------------------------------


def column_dataset(spec: Spec, column) -> str:
    """A recall column's data set; Table 7's columns name none: MS-COCO, the spec's only one."""
    if column.dataset:
        return column.dataset
    return "coco-retrieval" if "coco-images" in spec.datasets else "flickr30k"


def recall_datasets(spec: Spec) -> list[str]:
    """The retrieval data sets of a spec's recall columns, in column order."""
    return list(dict.fromkeys(column_dataset(spec, c) for c in spec.columns if c.metric == "recall"))


def transfer(weights: dict[str, torch.Tensor], model: nn.Module) -> None:
    """Load pre-trained weights into a fine-tuning model, resizing what depends on the resolution
    (pre-training at 256 px, fine-tuning at 384 px): the ViT position embeddings and APE's patch table
    bicubically, as ALBEF's interpolate_pos_embed, and RPE's (2g-1) x (2g-1) offset table likewise."""
    import math

    import torch.nn.functional as F

    from repro.families.ace_rpe.keymap import interpolate_position

    target = model.state_dict()
    kept = {}
    for key, value in weights.items():
        if key not in target:
            continue
        want = target[key].shape
        if value.shape != want:
            if key.endswith("image_relative.weight"):  # ((2g-1)^2, D) offsets on a square
                old, new = math.isqrt(value.shape[0]), math.isqrt(want[0])
                grid = value.T.reshape(1, -1, old, old)
                value = F.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
                value = value.reshape(-1, new * new).T
            elif value.dim() == 3:  # ViT: (1, 1 + g^2, D)
                value = interpolate_position(value, want[1])
            else:  # APE: (1 + g^2, D)
                value = interpolate_position(value[None], want[0])[0]
        kept[key] = value
    model.load_state_dict(kept, strict=False)


def _recipe(name: str, overrides: dict[str, Any], seed: int):
    from repro.families import load_recipe

    return load_recipe(name).replace(**{**overrides, "seed": seed})


def run_row(ctx: RunContext) -> RowRun:
    """Pre-train the row, then fine-tune and evaluate it on each retrieval data set of the spec. At paper
    scale this runs as one process or as every rank of a torchrun job (the trainer's DDP); the sizes are
    ALBEF's unless the settings (an override) give others, pre-training at 256 px, fine-tuning at 384."""
    from repro.families.ace_rpe.data import Collate, PairDataset, RetrievalTest, tokenizer
    from repro.metrics import retrieval
    from repro.train import fit
    from repro.train.trainer import seed_everything

    settings = ctx.settings
    datasets = recall_datasets(ctx.spec)
    data: dict[str, Path] = {}
    if ctx.scale == "paper":
        sources = paper_sources(as_config(ctx.config), datasets)
        vocab = sources.vocab
    else:
        data = prepare_data(ctx.spec, ctx.scale, settings)
        sources = synthetic_sources(data["root"], datasets)
        vocab = data.get("tasks", data["root"]) / "vocab"  # the tasks' vocabulary holds the captions' words too
    tok = tokenizer(vocab)
    sizes = {
        **settings.get("sizes", {}),
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
        "cls_token_id": tok.cls_token_id,
        "sep_token_id": tok.sep_token_id,
        "mask_token_id": tok.mask_token_id,
    }
    size = sizes.get("image_size", 384)
    pretrain_size = int(settings.get("pretrain_image_size", sizes.get("image_size", 256)))
    max_tokens = int(settings.get("max_tokens", 30))
    collate = Collate(tok, max_tokens)

    def pairs(files, kind, image_size, crop_scale):  # --limit N: the first N entries of each file
        parts = [
            PairDataset(read_split(path, kind, root, ctx.limit), root, image_size, crop_scale=crop_scale)
            for path, root in files
        ]
        return parts[0] if len(parts) == 1 else torch.utils.data.ConcatDataset(parts)

    from repro.families.ace_rpe.keymap import albef_initialisation, load_albef, read_checkpoint

    seed_everything(ctx.seed)
    pretrained = build_model(ctx.config, {**sizes, "image_size": pretrain_size}, task="pretrain")
    training: dict[str, Any] = {}
    if as_config(ctx.config).init == "albef":  # ALBEF's released weights in place of our pre-training
        checkpoint = released_checkpoint(as_config(ctx.config))
        report = load_albef(pretrained, read_checkpoint(checkpoint))
        training["pretrain"] = {"checkpoint": str(checkpoint), "steps": 0, "new": report.new}
    else:
        train_pairs = pairs(sources.pretrain, "pretrain", pretrain_size, 0.2 if sources.augment else None)
        if sources.initial is not None:  # paper scale: DeiT-B/16 + bert-base-uncased, as ALBEF
            deit, bert = (read_checkpoint(path) for path in sources.initial)
            load_albef(pretrained, albef_initialisation(deit, bert))
        recipe = _recipe(PRETRAIN_RECIPE, settings.get("pretrain_recipe", {}), ctx.seed)
        state = fit(
            pretrained,
            train_pairs,
            recipe,
            ctx.workdir / "pretrain",
            loss_step=loss_step("pretrain"),
            collate_fn=collate,
            resume=ctx.resume,
            progress=ctx.progress,
        )
        training["pretrain"] = {"steps": state.step, "final_loss": state.final_loss, "world_size": state.world_size}
        if sources.initial is not None:
            training["pretrain"]["initial"] = [str(path) for path in sources.initial]
    weights = pretrained.state_dict()

    metrics: dict[str, float] = {}
    extra: dict[str, Any] = {}
    columns = [(c, column_dataset(ctx.spec, c)) for c in ctx.spec.columns if c.metric == "recall"]
    for dataset in datasets:
        name = RETRIEVAL_NAMES[dataset]
        train_json, test_json, image_root = sources.retrieval[dataset]
        seed_everything(ctx.seed)
        model = build_model(ctx.config, sizes, task="retrieval")
        transfer(weights, model)
        train = pairs([(train_json, image_root)], "train", size, 0.5 if sources.augment else None)
        recipe = _recipe(FINETUNE_RECIPES[dataset], settings.get("recipe", {}), ctx.seed)
        state = fit(
            model,
            train,
            recipe,
            ctx.workdir / name,
            loss_step=loss_step("retrieval"),
            collate_fn=collate,
            resume=ctx.resume,
            progress=ctx.progress,
        )
        training[name] = {"steps": state.step, "final_loss": state.final_loss, "world_size": state.world_size}
        test = RetrievalTest(read_split(test_json, "test", image_root, ctx.limit), image_root)
        k = int(settings.get("k_test", {}).get(dataset, K_TEST[dataset]))
        i2t, t2i = score_matrices(model, test, tok, size, k, max_tokens=max_tokens)
        result = retrieval.evaluate(i2t, t2i, test.img2txt, test.txt2img)
        extra[f"{name}_r_mean"] = result.aggregate["r_mean"]
        for col, col_dataset in columns:
            if col_dataset == dataset:
                metrics[col.name] = float(result.aggregate[col.key.replace("@mean", "_mean")])
        del model
    split = "test" if ctx.scale == "paper" else "test (generated)"
    run = RowRun(metrics=metrics, split=split, training=training, extra=extra)
    if "tasks" in data:
        from repro.families.ace_rpe.tasks import run_tasks

        done = run_tasks(ctx, data["tasks"], data["root"], weights, sizes, tok, size, max_tokens)
        run.metrics.update(done["metrics"])
        run.training.update(done["training"])
        run.extra.update(done["extra"])
        run.predictions += done["predictions"]
    return run


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    run_row=run_row,
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale
    stages=stages,
    data_notes=data_notes,
    resources=resources,
)
