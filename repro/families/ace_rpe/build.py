"""ace-rpe's models: ALBEF with the row's cross-modal position embedding, for retrieval, pre-training and
the downstream tasks, at ALBEF's sizes unless overridden; what `repro model` and the paper-scale plan
say about them (parameters by part, stages with estimated GPU-hours, cluster resources, data notes);
and the training step they share.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.ace_rpe.columns import downstream_names, has_tasks, recall_datasets, spec_heads, spec_tasks
from repro.families.ace_rpe.config import CONFIGS, ALBEFConfig
from repro.families.ace_rpe.sources import RELEASED
from repro.families.base import DataNeed, ModelInfo, Resources, default_resources
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("albef",)
K_TEST = {"flickr30k": 128, "coco-retrieval": 256}  # ALBEF's configs/Retrieval_{flickr,coco}.yaml
PRETRAIN_RECIPE = "ace-rpe/pretrain"
FINETUNE_RECIPES = {"flickr30k": "ace-rpe/retrieval-flickr30k", "coco-retrieval": "ace-rpe/retrieval-coco"}
TASK_RECIPES = {  # the downstream heads (`tasks.py`)
    "vqa": "ace-rpe/vqa",
    "snli-ve": "ace-rpe/snli-ve",
    "nlvr2": "ace-rpe/nlvr2",
    "nlvr2-assign": "ace-rpe/nlvr2-assign",
    "grounding": "ace-rpe/grounding",
}


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


def stages(config: ALBEFConfig | dict, spec: Spec, precision: str | None = None) -> list[tuple[str, str, float | None]]:
    """Pre-training, then one retrieval fine-tuning per data set of the spec's recall columns, with
    their estimated A100 GPU-hours (`cost.py`: the paper gives no times) at `precision` (None: each stage's
    recipe's, fp32)."""
    from repro.families import load_recipe
    from repro.families.ace_rpe import cost

    def hours(flops: float, recipe) -> float:
        return cost.gpu_hours(flops, precision or recipe.precision)

    config = as_config(config)
    sizes = paper_sizes(config)
    pre = load_recipe(PRETRAIN_RECIPE)
    flops = pre.epochs * cost.PAIRS[config.pretrain] * cost.pretrain_flops_per_pair(sizes, config.mim_loss)
    out = [
        (
            "pre-train",
            f"{PRETRAIN_RECIPE}: {pre.epochs} epochs of {cost.PAIRS[config.pretrain] / 1e6:.1f}M pairs "
            f"({config.pretrain}), batch {pre.batch_size}, 256 px",
            hours(flops, pre),
        )
        if config.init == "pretrain"
        else ("load", f"ALBEF's {RELEASED[config.pretrain]} (`repro download albef-checkpoints`)", 0.0)
    ]
    for dataset in recall_datasets(spec):
        recipe = load_recipe(FINETUNE_RECIPES[dataset])
        flops = recipe.epochs * cost.PAIRS[dataset] * cost.finetune_flops_per_pair(sizes)
        what = f"{recipe.name}: {recipe.epochs} epochs, batch {recipe.batch_size}, 384 px; test k = {K_TEST[dataset]}"
        out.append((f"fine-tune {dataset}", what, hours(flops, recipe)))
    for task in spec_tasks(spec):  # the downstream heads, fine-tuned and evaluated (`cost.head_flops`)
        if task == "retrieval":
            continue
        for name in (["nlvr2-assign"] if task == "nlvr2" else []) + [task]:
            recipe = load_recipe(TASK_RECIPES[name])
            what = f"{recipe.name}: {recipe.epochs} epochs, batch {recipe.batch_size}"
            what += ", 256 px" if name == "nlvr2-assign" else ", 384 px"
            what += {"vqa": "; test2015 ranked with k = 128", "grounding": "; Grad-CAM on val, testA, testB"}.get(
                name, ""
            )
            out.append((f"fine-tune {name}", what, hours(cost.head_flops(name, sizes, recipe.epochs), recipe)))
    return out


def gpu_hours(config: ALBEFConfig | dict, precision: str | None = None) -> float | None:
    """Pre-training and both retrieval fine-tunings (see `stages`) at `precision` (None: the recipes', fp32)."""
    from repro.families.ace_rpe import cost

    config = as_config(config)
    sizes = paper_sizes(config)
    flops = 30 * cost.PAIRS[config.pretrain] * cost.pretrain_flops_per_pair(sizes, config.mim_loss)
    flops += (10 * cost.PAIRS["flickr30k"] + 5 * cost.PAIRS["coco-retrieval"]) * cost.finetune_flops_per_pair(sizes)
    return cost.gpu_hours(flops, precision)


def memory_stage(config: ALBEFConfig | dict, spec: Spec):
    """The stage whose training holds the most per GPU, for the plan's memory estimate: pre-training (the model with
    its MLM and MIM heads, 256 px, recipe ace-rpe/pretrain: batch 512 over the unit's 8 GPUs); a row that starts
    from ALBEF's checkpoint (`init: albef`) from its retrieval fine-tuning at 384 px. (recipe, build, example)."""
    from repro.families.ace_rpe import cost

    config = as_config(config)
    pretrain = config.init == "pretrain"
    recipe, task, size = (PRETRAIN_RECIPE, "pretrain", 256) if pretrain else (FINETUNE_RECIPES["flickr30k"], None, 384)

    def example(n: int) -> dict[str, torch.Tensor]:
        tokens = cost.TEXT_TOKENS
        batch = {
            "image": torch.zeros(n, 3, size, size),
            "input_ids": torch.full((n, tokens), 1000, dtype=torch.long),
            "attention_mask": torch.ones(n, tokens, dtype=torch.long),
        }
        return batch if pretrain else {**batch, "idx": torch.arange(n)}

    return recipe, lambda: build_model(config, sizes={"image_size": size}, task=task), example


def resources(config: ALBEFConfig | dict, scale: str) -> Resources:
    """Paper scale: one node of 8 A100s, as the paper pre-trains (Sec. 4.1: batch 512 on 8 NVIDIA A100), for the
    unit's GPU-hours spread over them with a quarter to spare, and the host memory its processes hold
    (`host_memory_gb`)."""
    if scale != "paper":
        return default_resources(scale, None)
    hours = gpu_hours(config)
    return Resources(
        gpus=8,
        cpus=64,
        mem_gb=host_memory_gb(config, gpus=8),
        hours=24.0 if hours is None else max(1.0, round(1.25 * hours / 8)),
    )


PROCESS_GB = 4.0  # a rank's Python, torch and CUDA libraries and context on the host, about
ENTRY_BYTES = 450  # one pre-training pair as the json reader holds it: a dict of two strings (image path, caption)


def host_memory_gb(config: ALBEFConfig | dict, gpus: int) -> int:
    """Host memory of a paper-scale unit, from the model's and the data's sizes: per rank its process (PROCESS_GB),
    the pre-training model's weights twice (the model and a checkpoint's state on its way to or from disk), the
    pre-training pairs' entries in the main process and in each loader worker (a forked worker's copy is
    written to as Python counts references), and the batches the workers prefetch (2 each, 256 px images);
    a quarter to spare, in multiples of 16 GB."""
    from repro.families import load_recipe
    from repro.families.ace_rpe import cost

    config = as_config(config)
    recipe = load_recipe(PRETRAIN_RECIPE)
    workers, per_gpu = recipe.num_workers, recipe.batch_size // gpus
    weights = _weight_bytes(config.model_dump_json(exclude_defaults=True))
    entries = cost.PAIRS[config.pretrain] * ENTRY_BYTES
    prefetched = workers * 2 * per_gpu * 3 * 256 * 256 * 4
    per_rank = PROCESS_GB * 2**30 + 2 * weights + (1 + workers) * entries + prefetched
    total = 1.25 * gpus * per_rank / 2**30
    return int(16 * math.ceil(total / 16))


@functools.cache
def _weight_bytes(config_json: str) -> int:
    """Bytes of the pre-training model's parameters and buffers (momentum copies and queues included), built on
    the meta device."""
    with torch.device("meta"):
        model = build_model(as_config(json.loads(config_json)), sizes={"image_size": 256}, task="pretrain")
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def data_notes(spec: Spec) -> list[str]:
    """Where the paper scale reads what no catalog entry downloads: the images; what it does not run."""
    root = data_dir()
    notes = []
    if has_tasks(spec):
        notes.append(
            f"downstream heads ({', '.join(downstream_names(spec))}): ALBEF's json files (`repro download albef-data`) "
            f"name their images relative to: COCO {root / 'coco-images'} (VQA's train2014/, val2014/, test2015/; "
            f"RefCOCO+'s train2014/), Visual Genome {root / 'vg-images'} (vg_qa.json), Flickr30K "
            f"{root / 'flickr30k' / 'flickr30k-images'} (SNLI-VE: <id>.jpg), NLVR2 {root / 'nlvr2'} (nlvr_*.json); "
            f"VQA's test set is every test2015 question of `repro download vqa2` (ALBEF's vqa_test.json holds "
            f"test-dev only), its test-dev and test-std scores come from the server (`repro submit vqa2-test-dev`); "
            f"NLVR2's text-assignment step reads the 4M pre-training json files; RefCOCO+'s refer annotations "
            f"from `repro download refcoco-plus` ({root / 'refcoco-plus' / 'refcoco+'})"
        )
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


def paper_data(spec: Spec, row) -> list[DataNeed]:
    """What a paper-scale row reads, in the order `sources.paper_sources` and `sources.paper_task_files` check
    it: BERT's vocabulary (and weights), DeiT-B/16 where the row pre-trains (ALBEF's checkpoint where it starts
    from it), ALBEF's json files, the images of each retrieval data set, then what each downstream head reads
    (VQA v2's test2015 questions, COCO, Visual Genome, Flickr30K, NLVR2's images, RefCOCO+'s refer annotations),
    each ready when the first image its json file names is in place. A positive control (`table: "Control: ..."`)
    asks a generated task: it has no paper scale."""
    from repro.families.ace_rpe.sources import DEIT_FILE, IMAGE_FOLDERS, PRETRAIN_FILES

    if spec.table.startswith("Control"):
        raise ReproError(
            f"{spec.id} is a positive control of the synthetic scale (its task is generated): run --scale synthetic"
        )
    from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES

    config = as_config(row.config)
    root = data_dir()
    bert = root / "bert-base-uncased"
    albef = root / "albef-data" / "data"
    needs = [DataNeed("bert-base-uncased", ready=(bert / "vocab.txt").is_file)]
    if config.init == "pretrain":
        needs += [
            DataNeed("deit-b16", ready=(root / "deit-b16" / DEIT_FILE).is_file),
            DataNeed("bert-base-uncased", ready=(bert / "pytorch_model.bin").is_file),
        ]
    else:
        checkpoint = root / "albef-checkpoints" / RELEASED[config.pretrain]
        needs.append(DataNeed("albef-checkpoints", ready=checkpoint.is_file))
    files = [albef / name for name in ([] if config.init == "albef" else PRETRAIN_FILES[config.pretrain])]
    for dataset in recall_datasets(spec):
        files += [albef / f"{RETRIEVAL_NAMES[dataset]}_{part}.json" for part in ("train", "test")]
    heads = task_data(spec)
    files += [albef / name for name, _ in heads["albef-data"]]
    names = {f.name for f in files}
    splits = {  # what ALBEF's json files hold, by the recipes' split names
        "pretrain": any(n in names for pairs in PRETRAIN_FILES.values() for n in pairs),
        "train": any(n.endswith("_train.json") for n in names),
        "val": "vqa_val.json" in names,
        "vg": "vg_qa.json" in names,
    }
    held = tuple(split for split, there in splits.items() if there)
    needs.append(DataNeed("albef-data", ready=lambda: all(f.is_file() for f in files), splits=held))
    images = {"flickr30k": ("flickr30k-images",), "coco-images": ("train2014", "val2014")}
    for dataset in recall_datasets(spec):
        folder = IMAGE_FOLDERS[dataset]
        needs.append(DataNeed(folder, ready=lambda f=folder: all((root / f / s).is_dir() for s in images[f])))
    for dataset, checks in heads.items():
        if dataset != "albef-data":
            needs.append(DataNeed(dataset, ready=lambda c=checks: all(check() for _, check in c)))
    return needs


def task_data(spec: Spec) -> dict[str, list[tuple[str, Any]]]:
    """What the spec's downstream heads read at paper scale, by catalog entry, in the order the run checks it:
    {dataset: [(what, ready)]}; "albef-data" lists json names (ready: the file is there), the others the first
    image a json file names (ready: the image is there) or a file (the test2015 questions, the refer files)."""
    from repro.datasets.vqa_server import question_file
    from repro.families.ace_rpe.sources import PRETRAIN_FILES, REFER_FOLDER, TASK_FILES, TASK_IMAGES

    root = data_dir()
    albef = root / "albef-data" / "data"
    out: dict[str, list[tuple[str, Any]]] = {}

    def add(dataset: str, what: str, ready) -> None:
        out.setdefault(dataset, []).append((what, ready))

    def first_image(name: str, folder: str, key=None):
        def ready() -> bool:
            try:
                entries = json.loads((albef / name).read_text())
                entry = entries[0]
                image = key(entry) if key else entry["image"]
            except (OSError, ValueError, LookupError, TypeError):
                return False
            return (root / folder / image).is_file()

        return ready

    heads = spec_heads(spec)
    for head in heads:
        for name in TASK_FILES[head]:
            add("albef-data", name, (albef / name).is_file)
        if head == "nlvr2":
            for name in PRETRAIN_FILES["4m"]:
                add("albef-data", name, (albef / name).is_file)
    if "vqa" in heads:
        add("vqa2", "test2015 questions", question_file(root, "vqa2", "test").is_file)
        for name in ("vqa_train.json", "vqa_val.json"):
            add("coco-images", name, first_image(name, TASK_IMAGES["vqa"]))
        add("coco-images", "test2015", (root / TASK_IMAGES["vqa"] / "test2015").is_dir)
        add("vg-images", "vg_qa.json", first_image("vg_qa.json", TASK_IMAGES["vg"]))
    if "snli-ve" in heads:
        add(
            "flickr30k",
            "ve_train.json",
            first_image("ve_train.json", TASK_IMAGES["snli-ve"], lambda e: f"{e['image']}.jpg"),
        )
    if "nlvr2" in heads:
        add("nlvr2", "nlvr_train.json", first_image("nlvr_train.json", TASK_IMAGES["nlvr2"], lambda e: e["images"][0]))
    if "grounding" in heads:
        for name in ("refs(unc).p", "instances.json"):
            add("refcoco-plus", name, (root / REFER_FOLDER / name).is_file)
        add("coco-images", "refcoco+_train.json", first_image("refcoco+_train.json", TASK_IMAGES["grounding"]))
    out.setdefault("albef-data", [])
    return out
