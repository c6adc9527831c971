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

from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.ace_rpe.config import CONFIGS, ALBEFConfig
from repro.families.base import ModelInfo, Resources, RowRun, RunContext, default_resources
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
    from repro.families.ace_rpe import cost
    from repro.train import load_recipe

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
    ]
    for dataset in dict.fromkeys(column_dataset(spec, c) for c in spec.columns if c.metric == "recall"):
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
    """Where the paper scale reads what no catalog entry downloads: the images."""
    root = data_dir()
    return [
        f"images (not downloadable here; put them in place yourself): Flickr30K under {root / 'flickr30k'}, "
        f"COCO 2014 under {root / 'coco-images'}, Visual Genome, CC3M and SBU under {root / 'albef-data' / 'images'}; "
        f"ALBEF's json files (`repro download albef-data`) name them relative to those folders",
        "checkpoints: `repro download albef-checkpoints` (ALBEF_4M.pth, ALBEF.pth) to start a row from ALBEF's "
        "pre-training (keymap.load_albef); vocabulary: `repro download bert-base-uncased`",
    ]


def submission_target(spec: Spec) -> str | None:
    """VQA v2 test-dev for the VQA columns (the file answers all of test2015, test-std too); the other
    test sets (Flickr30K, COCO, SNLI-VE, NLVR2 test-P, RefCOCO+) are public: scored locally."""
    return "vqa2-test-dev" if "vqa2" in spec.datasets else None


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(task: str):
    """The loss of one batch: ALBEF's retrieval objectives or the sum of the pre-training objectives."""

    def step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if task == "pretrain":
            return sum(model.pretrain_loss(batch).values())
        return model.retrieval_loss(batch)

    return step


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """ITC similarity of the batch's images to its texts (images x texts)."""
    return model.similarity(batch["image"], batch["input_ids"], batch["attention_mask"])


# --- data ---------------------------------------------------------------------------------------


def synthetic_root(settings: dict[str, Any]) -> Path:
    from repro.families.ace_rpe.synthetic import GeneratorConfig

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return data_dir() / "synthetic" / f"albef-{cfg.key()}"


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    if scale == "paper":
        raise ReproError(
            f"{spec.id}: paper-scale ALBEF training reads ALBEF's json files, the bert-base-uncased vocabulary "
            f"and the images (COCO, Visual Genome, CC3M, SBU, Flickr30K) under {data_dir()}; the paper-scale "
            f"pipeline is not implemented yet"
        )
    from repro.families.ace_rpe.synthetic import GeneratorConfig, generate

    root = synthetic_root(settings)
    generate(root, GeneratorConfig.from_mapping(settings.get("generator")))
    if not has_tasks(spec):
        return {"root": root}
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig, generate_tasks

    tasks = tasks_root(settings)
    generate_tasks(tasks, TaskGeneratorConfig.from_mapping(settings.get("task_generator")))
    return {"root": root, "tasks": tasks}


def has_tasks(spec: Spec) -> bool:
    """Whether the spec has downstream columns (VQA, SNLI-VE, NLVR2, grounding: `tasks.py`)."""
    return any(c.dataset in TASK_OF_DATASET or c.metric == "grounding" for c in spec.columns)


def tasks_root(settings: dict[str, Any]) -> Path:
    """The generated downstream data (`synthetic_tasks.py`), a folder apart from the retrieval data."""
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig

    cfg = TaskGeneratorConfig.from_mapping(settings.get("task_generator"))
    return data_dir() / "synthetic" / f"albef-tasks-{cfg.key()}"


# --- retrieval evaluation (ALBEF's Retrieval.py evaluation()) ----------------------------------------


@torch.no_grad()
def score_matrices(model, test, tok, size: int, k: int, batch_size: int = 64, max_tokens: int = 30):
    """ALBEF's score matrices: ITC similarity for all pairs, the top k of each row re-scored by the ITM
    head's positive logit, every other entry -100."""
    from repro.families.ace_rpe.data import load_image

    model.eval()
    text_embeds, text_masks, text_feats = [], [], []
    for start in range(0, len(test.texts), batch_size):
        enc = tok(
            test.texts[start : start + batch_size],
            padding="max_length",
            truncation=True,
            max_length=max_tokens,
            return_tensors="pt",
        )
        embeds = model.text_embeds(enc["input_ids"], enc["attention_mask"])
        text_embeds.append(embeds)
        text_masks.append(enc["attention_mask"])
        text_feats.append(model.text_feat(embeds))
    text_embeds, text_masks, text_feats = torch.cat(text_embeds), torch.cat(text_masks), torch.cat(text_feats)
    image_embeds, image_feats = [], []
    for start in range(0, len(test.images), batch_size):
        images = torch.stack([load_image(p, size) for p in test.images[start : start + batch_size]])
        embeds = model.image_embeds(images)
        image_embeds.append(embeds)
        image_feats.append(model.image_feat(embeds))
    image_embeds, image_feats = torch.cat(image_embeds), torch.cat(image_feats)
    sims = image_feats @ text_feats.T
    i2t = torch.full(sims.shape, -100.0)
    for i, row in enumerate(sims):
        top = row.topk(min(k, row.numel())).indices
        logits = model.itm_logits(text_embeds[top], text_masks[top], image_embeds[i].expand(len(top), -1, -1))
        i2t[i, top] = logits[:, 1]
    t2i = torch.full(sims.T.shape, -100.0)
    for j, row in enumerate(sims.T):
        top = row.topk(min(k, row.numel())).indices
        n = len(top)
        logits = model.itm_logits(text_embeds[j].expand(n, -1, -1), text_masks[j].expand(n, -1), image_embeds[top])
        t2i[j, top] = logits[:, 1]
    return i2t.numpy(), t2i.numpy()


# --- one (row, seed) ----------------------------------------------------------------------------


def column_dataset(spec: Spec, column) -> str:
    """A recall column's data set; Table 7's columns name none: MS-COCO, the spec's only one."""
    if column.dataset:
        return column.dataset
    return "coco-retrieval" if "coco-images" in spec.datasets else "flickr30k"


def _recipe(name: str, overrides: dict[str, Any], seed: int):
    from repro.train import load_recipe

    return load_recipe(name).replace(**{**overrides, "seed": seed})


def run_row(ctx: RunContext) -> RowRun:
    from repro.families.ace_rpe.data import Collate, PairDataset, RetrievalTest, read_annotations, tokenizer
    from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES
    from repro.metrics import retrieval
    from repro.train import fit
    from repro.train.trainer import seed_everything

    data = prepare_data(ctx.spec, ctx.scale, ctx.settings)
    root = data["root"]
    settings = ctx.settings
    tok = tokenizer(data.get("tasks", root) / "vocab")  # the tasks' vocabulary holds the captions' words too
    sizes = {
        **settings.get("sizes", {}),
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
        "cls_token_id": tok.cls_token_id,
        "sep_token_id": tok.sep_token_id,
        "mask_token_id": tok.mask_token_id,
    }
    size = sizes.get("image_size", 384)
    max_tokens = int(settings.get("max_tokens", 30))
    collate = Collate(tok, max_tokens)

    seed_everything(ctx.seed)
    pretrained = build_model(ctx.config, sizes, task="pretrain")
    pairs = PairDataset(read_annotations(root / "pretrain.json", "pretrain"), root, size)
    recipe = _recipe(PRETRAIN_RECIPE, settings.get("pretrain_recipe", {}), ctx.seed)
    state = fit(
        pretrained,
        pairs,
        recipe,
        ctx.workdir / "pretrain",
        loss_step=loss_step("pretrain"),
        collate_fn=collate,
        resume=ctx.resume,
        progress=ctx.progress,
    )
    training: dict[str, Any] = {"pretrain": {"steps": state.step, "final_loss": state.final_loss}}
    weights = pretrained.state_dict()

    metrics: dict[str, float] = {}
    extra: dict[str, Any] = {}
    columns = [(c, column_dataset(ctx.spec, c)) for c in ctx.spec.columns if c.metric == "recall"]
    datasets = list(dict.fromkeys(d for _, d in columns))
    for dataset in datasets:
        name = RETRIEVAL_NAMES[dataset]
        seed_everything(ctx.seed)
        model = build_model(ctx.config, sizes, task="retrieval")
        model.load_state_dict({k: v for k, v in weights.items() if k in model.state_dict()}, strict=False)
        train = PairDataset(read_annotations(root / f"{name}_train.json", "train"), root, size)
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
        training[name] = {"steps": state.step, "final_loss": state.final_loss}
        test = RetrievalTest(read_annotations(root / f"{name}_test.json", "test"), root)
        k = int(settings.get("k_test", {}).get(dataset, K_TEST[dataset]))
        i2t, t2i = score_matrices(model, test, tok, size, k, max_tokens=max_tokens)
        result = retrieval.evaluate(i2t, t2i, test.img2txt, test.txt2img)
        extra[f"{name}_r_mean"] = result.aggregate["r_mean"]
        for col, col_dataset in columns:
            if col_dataset == dataset:
                metrics[col.name] = float(result.aggregate[col.key.replace("@mean", "_mean")])
        del model
    run = RowRun(metrics=metrics, split="test (generated)", training=training, extra=extra)
    if "tasks" in data:
        from repro.families.ace_rpe.tasks import run_tasks

        done = run_tasks(ctx, data["tasks"], root, weights, sizes, tok, size, max_tokens)
        run.metrics.update(done["metrics"])
        run.training.update(done["training"])
        run.extra.update(done["extra"])
        run.predictions += done["predictions"]
    return run
