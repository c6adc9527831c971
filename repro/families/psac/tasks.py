"""One TGIF-QA task's model of a psac row: its inputs (the task's splits, and per seed its recipe and model),
its training for a row's seeds (one alone, several together) and its score on Test; and Table 4's
seconds per epoch, timed at the paper's sizes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from repro.families.base import RunContext, training_split
from repro.families.psac.build import (
    EPOCHS,
    PAPER_NUM_ANSWERS,
    build_model,
    example_batch,
    loss_step,
    paper_sizes,
    predict_step,
    score,
)

RESULT = "result.json"  # a task's score and training, in its folder of the unit's workdir


def stored_task(ctx: RunContext, task: str) -> dict[str, Any] | None:
    """What a task's training stored in the unit's folder (`run_task`), where the unit resumes: the job of one task
    (`RunContext.part`) wrote it before the unit's own job, which scores the row from it. None: not there."""
    import json

    path = ctx.workdir / task / RESULT
    if not ctx.resume or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def run_task(ctxs: list[RunContext], task: str, root: Path, store: Path | None = None) -> list[dict[str, Any]]:
    """Train one task's model on Train for each seed of `ctxs` (several: together, `repro.train.ensemble`) and score
    each on Test; per seed: score, training state, seconds per epoch, also stored in `<workdir>/<task>/result.json`
    (rank 0 writes it) and read back instead of training again where the unit resumes (`stored_task`)."""
    from repro.train import fit, predict
    from repro.train.distributed import is_main_process
    from repro.train.ensemble import fit_ensemble
    from repro.utils import write_json_atomic

    stored = [stored_task(c, task) for c in ctxs]
    if all(s is not None for s in stored):
        return stored
    ctx = ctxs[0]
    data, recipes, models = task_inputs(ctxs, task, root, store)
    workdirs = [c.workdir / task for c in ctxs]
    how = {"loss_step": loss_step(task), "resume": ctx.resume, "progress": ctx.progress, "device": ctx.device}
    train = training_split(ctx, data["Train"])
    if len(ctxs) == 1:
        states = [fit(models[0], train, recipes[0], workdirs[0], **how)]
    else:
        states = fit_ensemble(models, train, recipes, workdirs, **how)
    out = []
    for model, state, recipe in zip(models, states, recipes):
        _, outputs = predict(  # on the model's device, where it trained
            model,
            data["Test"],
            recipe.eval_batch_size or recipe.batch_size,
            predict_step=predict_step,
            progress=ctx.progress,
            num_workers=recipe.num_workers,
        )
        out.append(
            {
                "score": score(task, outputs, data["Test"].targets),
                "steps": state.step,
                "final_loss": state.final_loss,
                "train_seconds_per_epoch": state.wall_time_s / max(1, recipe.epochs),
                "train_questions": len(data["Train"]),
                "test_questions": len(data["Test"]),
            }
        )
    if is_main_process():
        for c, result in zip(ctxs, out):
            write_json_atomic(c.workdir / task / RESULT, result)
    return out


def recipe_overrides(ctx: RunContext, task: str) -> dict[str, Any]:
    """What a task's training changes in the recipe: at paper scale the official code's epochs (build.EPOCHS:
    300 Action/Transition, 100 Count/FrameQA), then the scale's `recipe` and `task_recipe.<task>` settings."""
    official = {} if ctx.generated else {"epochs": EPOCHS[task]}
    return {
        **official,
        **ctx.settings.get("recipe", {}),
        **(ctx.settings.get("task_recipe", {}) or {}).get(task, {}),
    }


def task_inputs(ctxs: list[RunContext], task: str, root: Path, store: Path | None = None):
    """A task's splits, and per seed its recipe and its model built after seeding: the frozen word table GloVe 6B at
    paper scale (as the official code), at the generated scales a random stand-in of its own."""
    from repro.families.psac.data import glove_table, load_task
    from repro.train.trainer import seed_everything

    ctx = ctxs[0]
    sizes = ctx.settings.get("sizes") or {}
    full = paper_sizes(ctx.config)
    full.update(sizes)
    vocab, data = load_task(root, task, full, store=store, limit=ctx.limit)
    recipes = [c.recipe(overrides=recipe_overrides(ctx, task), loss="per-task") for c in ctxs]
    glove = None if ctx.generated else glove_table(vocab.words, full["word_dim"])
    models = []
    for c in ctxs:
        seed_everything(c.seed)
        if glove is not None:
            vectors = glove.clone()
        else:
            g = torch.Generator().manual_seed(c.seed)
            vectors = torch.randn(len(vocab.words), full["word_dim"], generator=g)  # frozen stand-in for GloVe
            vectors[0] = 0
        models.append(
            build_model(
                c.config,
                sizes,
                task=task,
                num_words=len(vocab.words),
                num_chars=len(vocab.chars),
                num_answers=max(1, len(vocab.answers)),
                word_vectors=vectors,
            )
        )
    return data, recipes, models


def timed_step(ctx: RunContext, task: str):
    """One optimisation step of the recipe (the paper's: batch 32, Adamax, clipping 0.25; `timing.batch_size`
    overrides the batch) of one task's model at the timing sizes (the paper's unless the scale's `timing.sizes`
    says otherwise), on random inputs of the paper's shapes (step time does not depend on the values), on the
    unit's device (`ctx.device`, the trainer's choice when unset): a repro.nn.paired_timing.TimedStep whose
    `info` has the batch size and the steps of one epoch over `timing.train_questions[task]` (the real train
    split)."""
    from repro.families.psac.config import for_scale
    from repro.nn.paired_timing import TimedStep
    from repro.train.distributed import DistEnv, device_for
    from repro.train.trainer import build_optimizer

    timing = ctx.settings.get("timing") or {}
    recipe = ctx.recipe(overrides={})
    batch_size = int(timing.get("batch_size", recipe.batch_size))
    sizes = timing.get("sizes") or {}
    torch.manual_seed(ctx.seed)
    model = build_model(for_scale(ctx.config, ctx.scale), sizes, task=task)
    batch = example_batch(batch_size, sizes, seed=ctx.seed, task=task)
    g = torch.Generator().manual_seed(ctx.seed)
    if task in ("action", "transition"):
        batch["target"] = torch.randint(0, 5, (batch_size,), generator=g)
    elif task == "frameqa":
        batch["target"] = torch.randint(0, PAPER_NUM_ANSWERS["frameqa"], (batch_size,), generator=g)
    else:
        batch["target"] = torch.randint(1, 11, (batch_size,), generator=g).float()
    device = device_for(DistEnv(), ctx.device)
    model.to(device)
    batch = {k: v.to(device) for k, v in batch.items()}
    optimizer = build_optimizer(recipe, [p for p in model.parameters() if p.requires_grad])
    questions = timing.get("train_questions", {}).get(task)
    info = {"batch_size": batch_size, "train_questions": questions}
    if questions is not None:
        info["steps_per_epoch"] = math.ceil(int(questions) / batch_size)
    return TimedStep(model, batch, loss_step(task), optimizer, recipe.grad_clip, info)


def column_step(ctx: RunContext, column):
    """`Hooks.timed_step`: a time column's step is that of the task its key names."""
    return timed_step(ctx, column.key)


def epoch_seconds(ctx: RunContext, task: str) -> dict[str, Any]:
    """Table 4's s/epoch of one task's model alone (`timed_step`): the median of `timing.steps` steps after
    `timing.warmup`, times the steps of one epoch. CUDA synchronised around every step. A claim on these
    columns is judged from `repro run ID --timing`'s interleaved ratios (repro.timing), not from these."""
    from repro.nn.measure import train_step_time

    timing = ctx.settings["timing"]
    step = timed_step(ctx, task)
    seconds = train_step_time(
        step.model,
        step.batch,
        step.loss_fn,
        step.optimizer,
        steps=int(timing.get("steps", 3)),
        warmup=int(timing.get("warmup", 1)),
        grad_clip=step.grad_clip,
    )
    questions = int(timing["train_questions"][task])
    steps_per_epoch = step.info["steps_per_epoch"]
    return {
        "seconds_per_step": seconds,
        "steps_per_epoch": steps_per_epoch,
        "seconds_per_epoch": seconds * steps_per_epoch,
        "batch_size": step.info["batch_size"],
        "train_questions": questions,
        "timed_steps": int(timing.get("steps", 3)),
        "threads": torch.get_num_threads(),
    }
