"""ace-rpe's run protocol (see repro.families.base): ALBEF with cross-modal position embeddings, retrieval.

A row is pre-trained once (ITC, ITM, MLM, MIM, and L_ace for the +Lace rows), then fine-tuned and
evaluated for each retrieval data set among the spec's columns (Flickr30K, MS-COCO), as ALBEF does:
ITC similarity for all pairs, the top k of each query re-scored by the ITM head (k = 128 for
Flickr30K, 256 for COCO; at most the gallery), TR/IR R@1/5/10 by `repro.metrics.retrieval`.
At the smoke (and synthetic) scale the data is generated (`synthetic.py`) in ALBEF's json layout and
read by the same code as the real files (`data.py`); at paper scale the json files, the BERT
vocabulary and the user's images are read from the data folder. The downstream columns (VQA v2,
SNLI-VE, NLVR2, RefCOCO+ grounding) are fine-tuned from the row's pre-trained weights after that,
on generated files or, at paper scale, on ALBEF's (`tasks.py`, `sources.paper_task_files`).

Here: the hooks and the row's protocol. The models are `build.py`'s, what the columns ask for
`columns.py`'s, the files `sources.py`'s, the pre-training `pretraining.py`'s, the downstream heads'
runs `tasks.py`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.families.ace_rpe.build import (
    ARCHS,
    FINETUNE_RECIPES,
    K_TEST,
    build_model,
    data_notes,
    describe,
    gpu_hours,
    memory_stage,
    paper_data,
    resources,
    stages,
)
from repro.families.ace_rpe.columns import column_dataset, has_tasks, recall_datasets, spec_heads
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.keymap import transfer
from repro.families.ace_rpe.pretraining import pretrained
from repro.families.ace_rpe.progress import planned_stages, write_plan
from repro.families.ace_rpe.released import evaluation_hours
from repro.families.ace_rpe.retrieval import score_matrices
from repro.families.ace_rpe.sources import (
    paper_sources,
    paper_task_files,
    read_split,
    synthetic_root,
    tasks_root,
)
from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES
from repro.families.ace_rpe.tasks import run_tasks
from repro.families.base import Hooks, RowRun, RunContext
from repro.paths import data_dir
from repro.specs import Spec

# --- data ---------------------------------------------------------------------------------------


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Once per run: the generated data at the smoke and synthetic scales, {"root": retrieval and pre-training
    files, "tasks": the downstream files where the spec has such columns and the scale a `task_generator`};
    at paper scale the files every row needs, checked (the downstream heads' json files, question file and
    refer annotations too; each head checks its first images when it starts)."""
    if scale == "paper":
        # the files every row needs; a row that pre-trains checks its corpus when it starts (run_row)
        sources = paper_sources(ALBEFConfig(arch="albef", init="albef"), recall_datasets(spec))
        paper_task_files(spec_heads(spec))
        return {"root": data_dir(), "vocab": sources.vocab}
    from repro.data.generated import generating
    from repro.families.ace_rpe.synthetic import GeneratorConfig, generate

    root = synthetic_root(settings)
    with generating(root):  # one process writes it; others wait, then find it
        generate(root, GeneratorConfig.from_mapping(settings.get("generator")))
    if not has_tasks(spec) or "task_generator" not in settings:
        return {"root": root}  # a generated scale without `task_generator` fills the retrieval columns only
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig, generate_tasks

    tasks = tasks_root(settings)
    with generating(tasks):
        generate_tasks(tasks, TaskGeneratorConfig.from_mapping(settings.get("task_generator")))
    return {"root": root, "tasks": tasks}


# --- one (row, seed) ----------------------------------------------------------------------------


def run_row(ctx: RunContext) -> RowRun:
    """Pre-train the row, then fine-tune and evaluate it on each retrieval data set of the spec and each downstream
    head. At paper scale this runs as one process or as every rank of a torchrun job (the trainer's DDP); the sizes
    are ALBEF's unless the settings (an override) give others, pre-training at 256 px, fine-tuning at 384."""
    if ctx.weights is not None:  # `repro run --weights`: ALBEF's fine-tuned checkpoints evaluated, not trained
        from repro.families.ace_rpe.released import run_weights

        return run_weights(ctx)
    return run_ensemble([ctx])[0]


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """`run_row` for a row's seeds in one process (`ensemble: true`, the generated scales): each stage's seeds
    trained together where ALBEF's step maps over them (`stages.py` says which), each seed scored as its lone run
    is; one seed: `run_row`'s own path."""
    from repro.families.ace_rpe.data import PairDataset, RetrievalTest
    from repro.families.ace_rpe.stages import train_stage
    from repro.metrics import retrieval
    from repro.train.trainer import seed_everything

    ctx = ctxs[0]
    settings = ctx.settings
    datasets = recall_datasets(ctx.spec)
    data: dict[str, Path] = ctx.data or {}  # `prepare_data`'s, once per run (paper scale: the row's own sources)
    stages = planned_stages(ctx, data)  # what `repro run`'s progress counts: each stage's share of the unit
    write_plan(ctxs, stages)
    start = pretrained(ctxs)
    if not any(done["pretrain"]["steps"] and not done["pretrain"].get("reused") for done in start.training):
        write_plan(ctxs, stages[1:])  # read from the store or released weights: no pre-training to count
    sources, tok, sizes, size, collate = start.sources, start.tok, start.sizes, start.size, start.collate
    max_tokens, weights, training = start.max_tokens, start.weights, start.training
    metrics: list[dict[str, float]] = [{} for _ in ctxs]
    extra: list[dict[str, Any]] = [{} for _ in ctxs]
    columns = [(c, column_dataset(ctx.spec, c)) for c in ctx.spec.columns if c.metric == "recall"]
    for dataset in datasets:
        name = RETRIEVAL_NAMES[dataset]
        train_json, test_json, image_root = sources.retrieval[dataset]
        models = []
        for c, own in zip(ctxs, weights):
            seed_everything(c.seed)
            models.append(build_model(c.config, sizes, task="retrieval"))
            transfer(own, models[-1])
        crop = 0.5 if sources.augment else None
        train = PairDataset(read_split(train_json, "train", image_root, ctx.limit), image_root, size, crop_scale=crop)
        recipes = [c.recipe(name=FINETUNE_RECIPES[dataset]) for c in ctxs]
        for done, stage in zip(training, train_stage(ctxs, models, train, recipes, name, collate)):
            done[name] = stage
        test = RetrievalTest(read_split(test_json, "test", image_root, ctx.limit), image_root)
        k = int(settings.get("k_test", {}).get(dataset, K_TEST[dataset]))
        for model, scores, more in zip(models, metrics, extra):
            i2t, t2i = score_matrices(model, test, tok, size, k, max_tokens=max_tokens)
            result = retrieval.evaluate(i2t, t2i, test.img2txt, test.txt2img)
            more[f"{name}_r_mean"] = result.aggregate["r_mean"]
            for col, col_dataset in columns:
                if col_dataset == dataset:
                    scores[col.name] = float(result.aggregate[col.key.replace("@mean", "_mean")])
        del models
    split = "test" if ctx.scale == "paper" else "test (generated)"
    runs = [RowRun(metrics=m, split=split, training=t, extra=e) for m, t, e in zip(metrics, training, extra)]
    done = None
    if ctx.scale == "paper" and has_tasks(ctx.spec):  # ALBEF's files; text assignment at the pre-training size
        files = paper_task_files(spec_heads(ctx.spec), ctx.limit)
        done = run_tasks(ctxs, files, None, weights, sizes, tok, size, max_tokens, assign_size=start.pretrain_size)
    elif "tasks" in data:
        done = run_tasks(ctxs, data["tasks"], data["root"], weights, sizes, tok, size, max_tokens)
    for run, got in zip(runs, done or []):
        run.metrics.update(got["metrics"])
        run.training.update(got["training"])
        run.extra.update(got["extra"])
        run.predictions += got["predictions"]
    return runs


def convert_weights(path: Path, layout: str, option: str | None = None):
    """`repro weights convert`: a released checkpoint in an official layout into this project's model (keymap.py)."""
    from repro.families.ace_rpe.keymap import convert_checkpoint

    return convert_checkpoint(path, layout, option)


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    run_row=run_row,
    run_ensemble=run_ensemble,  # a row's seeds in one process (`ensemble: true`), stages together where they map
    synthetic_jobs=2,  # -j 2 over two threads: 1.30x faster (bench_synthetic --parallel-only, 2026-11-28)
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale
    stages=stages,
    memory_stage=memory_stage,
    data_notes=data_notes,
    paper_data=paper_data,
    resources=resources,
    weight_layouts=("albef",),
    convert_weights=convert_weights,
    supports_weights=True,  # --weights: ALBEF's retrieval and VQA checkpoints, one per data set (released.py)
    evaluation_hours=evaluation_hours,
)
