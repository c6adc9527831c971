"""psac's run protocol (see repro.families.base): PSAC on the four TGIF-QA tasks.

A row of Tables 2-6 is four models, one per task column: Action and Transition (5-way multiple
choice, hinge loss), FrameQA (classification, cross-entropy) and Count (regression, MSE; scored as
the MSE of the prediction clipped to 1..10 and rounded). At the synthetic and smoke scales the data
is generated (`synthetic.py`) in the official question-file layout and read by the same reader as
the real files (`repro.datasets.tgif`); each task's model trains on Train and is scored on Test (TGIF-QA
has no validation split; the final epoch is scored, no epoch is chosen on test).

Table 1 (`compute: {task: statistics}`) is `statistics(ctx)`: counts from the real question files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import Hooks, ModelInfo, RowRun, RunContext
from repro.families.psac.config import PSACConfig
from repro.paths import data_dir
from repro.specs import Spec

ARCHS = ("psac",)
TASKS = ("action", "transition", "frameqa", "count")
# Official vocabularies: FrameQA answers of the released code (data/cache/FrameQA_label2ans.pkl holds 1,746
# answers, built from Total_frameqa_question.csv); word tables are frozen GloVe and characters a small table.
PAPER_NUM_ANSWERS = {"frameqa": 1746}
PAPER_NUM_WORDS = 8000  # frozen, so it does not change the trainable count
PAPER_NUM_CHARS = 40  # a-z, 0-9 and specials; the table is left out of the comparison with the official count
# lixiangpengcs/PSAC: the official model's trainable parameters without the word/char tables, by part.
OFFICIAL_VIDEO_ENCODER = 19_514_416
OFFICIAL_QUESTION_PATH = 6_113_282  # question encoder, co-attention and pooling convolution


def official_parameters(task: str) -> int:
    """The released code's trainable parameters for one task, word and character tables excluded."""
    out = PAPER_NUM_ANSWERS.get(task, 1)
    classifier = (512 * 1024 + 1024) + (1024 * out + out) + 2  # weight-normed (dim=None) 512 -> 1024 -> out
    return OFFICIAL_VIDEO_ENCODER + OFFICIAL_QUESTION_PATH + classifier


# --- model --------------------------------------------------------------------------------------


def as_config(config: PSACConfig | dict) -> PSACConfig:
    return as_typed(config, (PSACConfig,))


def paper_sizes(config: PSACConfig | None = None) -> dict[str, Any]:
    """The model's sizes at the paper's settings, with the config's own size fields."""
    from repro.families.psac.model import PAPER_SIZES

    sizes = dict(PAPER_SIZES)
    if config is not None:
        sizes.update(
            frames=config.num_frames,
            heads=config.heads,
            word_dim=config.word_dim,
            char_dim=config.char_dim,
            max_chars=config.max_word_chars,
            max_words=config.max_question_words,
            ds_kernel=config.conv_kernel,
            hidden=config.hidden_size,
            dropout=config.dropout,
            bilstm_hidden=config.bilstm_hidden,
            video_dim=4096 if config.video_features == "c3d" else 2048,
        )
    return sizes


def build_model(
    config: PSACConfig | dict,
    sizes: dict | None = None,
    *,
    task: str | None = None,
    num_words: int = PAPER_NUM_WORDS,
    num_chars: int = PAPER_NUM_CHARS,
    num_answers: int | None = None,
    word_vectors: torch.Tensor | None = None,
) -> nn.Module:
    """The PSAC model of one task (`task` or the config's); `sizes` overrides the paper's sizes."""
    config = as_config(config)
    task = task or config.task or "action"
    if task not in TASKS:
        raise ReproError(f"unknown TGIF-QA task {task!r}; one of {', '.join(TASKS)}")
    full = paper_sizes(config)
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown psac model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    for dim in ("video_dim", "hidden"):
        if full[dim] % full["heads"]:
            raise ReproError(f"psac size {dim}={full[dim]} is not divisible by heads={full['heads']}")
    if config.char_embedding and full["max_chars"] < full["char_kernel"]:
        raise ReproError(f"max_chars {full['max_chars']} is shorter than the character kernel {full['char_kernel']}")
    from repro.families.psac.model import PSAC

    if num_answers is None:
        num_answers = PAPER_NUM_ANSWERS.get(task, 1)
    return PSAC(
        task,
        full,
        video_encoder=config.video_encoder,
        vpsa_layers=config.vpsa_layers,
        char_embedding=config.char_embedding,
        co_attention=config.co_attention,
        num_words=num_words,
        num_chars=num_chars,
        num_answers=num_answers,
        word_vectors=word_vectors,
    )


def example_batch(
    batch_size: int = 1,
    sizes: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    task: str = "action",
    num_words: int = PAPER_NUM_WORDS,
    num_chars: int = PAPER_NUM_CHARS,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """A batch in the data interface's format: full-length questions and words."""
    s = paper_sizes()
    s.update(sizes or {})
    g = torch.Generator().manual_seed(seed)
    c = 5 if task in ("action", "transition") else 1
    batch = {
        "video": torch.randn(batch_size, s["frames"], s["video_dim"], generator=g),
        "words": torch.randint(2, num_words, (batch_size, c, s["max_words"]), generator=g),
        "chars": torch.randint(2, num_chars, (batch_size, c, s["max_words"], s["max_chars"]), generator=g),
        "question_id": torch.arange(batch_size),
    }
    return {k: v.to(device) for k, v in batch.items()}


def _trainable(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters() if p.requires_grad)


def parts(model: nn.Module) -> list[tuple[str, int]]:
    """Trainable parameters by part; the character table apart (the official count leaves tables out)."""
    q = model.question_encoder
    char_table = _trainable(getattr(q, "char_emb", None))
    return [
        ("video_encoder", _trainable(model.video_encoder)),
        ("char_table", char_table),
        ("question_encoder", _trainable(q) - char_table),
        ("video_proj", _trainable(model.video_proj)),
        ("co_attention", _trainable(model.co_attention)),
        ("head", _trainable(model.head)),
    ]


def describe(config: PSACConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """One model per task at the paper's sizes and the official vocabularies (see PAPER_NUM_ANSWERS)."""
    config = as_config(config)
    tasks = (config.task,) if config.task else TASKS
    out = []
    for task in tasks:
        torch.manual_seed(0)
        model = build_model(config, task=task)
        total = sum(p.numel() for p in model.parameters())  # with the frozen word table
        out.append(
            ModelInfo(
                name=f"psac-{task}",
                task=task,
                trainable_params=_trainable(model),
                total_params=total,
                flops_per_sample=None,
                modules=parts(model),
            )
        )
    return out


def gpu_hours(config: PSACConfig | dict) -> float | None:
    """Table 4's seconds per epoch (PSAC or Bi-LSTM) times the official epochs (300 MC, 100 others), all tasks."""
    config = as_config(config)
    per_epoch = (
        {"action": 337, "transition": 870, "frameqa": 143, "count": 83}
        if config.video_encoder == "bilstm"
        else {"action": 269, "transition": 698, "frameqa": 122, "count": 74}
    )
    epochs = {"action": 300, "transition": 300, "frameqa": 100, "count": 100}
    tasks = (config.task,) if config.task else TASKS
    return sum(per_epoch[t] * epochs[t] for t in tasks) / 3600


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(task: str):
    """The loss of one batch for a task: hinge (Action, Trans.), cross-entropy (FrameQA), MSE (Count)."""
    if task not in TASKS:
        raise ReproError(f"unknown TGIF-QA task {task!r}")

    def step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = model(batch).float()
        target = batch["target"]
        if task in ("action", "transition"):
            return F.multi_margin_loss(out, target, margin=1.0)  # max(0, 1 - s_p + s_n), Sec. 3.5
        if task == "frameqa":
            return F.cross_entropy(out, target, ignore_index=-100)  # Eq. 16
        return F.mse_loss(out, target.float())  # Eq. 17

    return step


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Candidate scores (B, 5), answer logits (B, A), or the raw count as (B, 1)."""
    out = model(batch)
    return out.unsqueeze(-1) if out.dim() == 1 else out


def score(task: str, outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Accuracy in % (Action, Trans., FrameQA) or the MSE of the clipped, rounded count."""
    from repro.families.psac.model import count_prediction

    if task == "count":
        return float(((count_prediction(outputs.view(-1)) - targets.float()) ** 2).mean())
    return float((outputs.argmax(dim=-1) == targets).float().mean() * 100)


# --- data ---------------------------------------------------------------------------------------


def synthetic_root(settings: dict[str, Any]) -> Path:
    from repro.families.psac.synthetic import GeneratorConfig

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return data_dir() / "synthetic" / f"tgif-qa-{cfg.key()}"


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any], config: PSACConfig | None = None) -> dict[str, Path]:
    """{"root": question files, "store": frame store or None}; generated at the synthetic and smoke scales."""
    if scale == "paper":
        from repro.datasets.prepare import feature_store_dir
        from repro.datasets.tgif import tgif_dir
        from repro.datasets.tgif_features import FEATURE_FILES, WHERE

        kind = config.video_features if config is not None else "resnet"
        store = feature_store_dir("tgif-qa") / f"{kind}.store"
        if not (store / "meta.json").is_file():
            raise ReproError(
                f"{spec.id}: no frame store {store}; put {FEATURE_FILES[kind][0]} (from {WHERE}) in "
                f"{data_dir() / 'tgif-qa-features'} and the question files in {tgif_dir()}, then run "
                f"repro prepare tgif-qa"
            )
        return {"root": tgif_dir(), "store": store}
    from repro.families.psac.synthetic import GeneratorConfig, generate

    root = synthetic_root(settings)
    generate(root, GeneratorConfig.from_mapping(settings.get("generator")))
    return {"root": root, "store": None}


# --- one (row, seed) ----------------------------------------------------------------------------


def run_task(ctxs: list[RunContext], task: str, root: Path, store: Path | None = None) -> list[dict[str, Any]]:
    """Train one task's model on Train for each seed of `ctxs` (several: together, `repro.train.ensemble`) and score
    each on Test; per seed: score, training state, seconds per epoch."""
    from repro.train import fit, predict
    from repro.train.ensemble import fit_ensemble

    ctx = ctxs[0]
    data, recipes, models = task_inputs(ctxs, task, root, store)
    workdirs = [c.workdir / task for c in ctxs]
    how = {"loss_step": loss_step(task), "resume": ctx.resume, "progress": ctx.progress}
    if len(ctxs) == 1:
        states = [fit(models[0], data["Train"], recipes[0], workdirs[0], **how)]
    else:
        states = fit_ensemble(models, data["Train"], recipes, workdirs, **how)
    out = []
    for model, state, recipe in zip(models, states, recipes):
        _, outputs = predict(
            model,
            data["Test"],
            recipe.eval_batch_size or recipe.batch_size,
            predict_step=predict_step,
            progress=ctx.progress,
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
    return out


def task_inputs(ctxs: list[RunContext], task: str, root: Path, store: Path | None = None):
    """A task's splits, and per seed its recipe and its model built after seeding (its own stand-in word vectors)."""
    from repro.families import load_recipe
    from repro.families.psac.data import load_task
    from repro.train.trainer import seed_everything

    ctx = ctxs[0]
    sizes = ctx.settings.get("sizes") or {}
    full = paper_sizes(ctx.config)
    full.update(sizes)
    vocab, data = load_task(root, task, full, store=store)
    overrides = {**ctx.settings.get("recipe", {}), **(ctx.settings.get("task_recipe", {}) or {}).get(task, {})}
    recipes = [load_recipe(c.spec.recipe).replace(**{**overrides, "seed": c.seed, "loss": "per-task"}) for c in ctxs]
    models = []
    for c in ctxs:
        seed_everything(c.seed)
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


def epoch_seconds(ctx: RunContext, task: str) -> dict[str, Any]:
    """Table 4's s/epoch of one task's model, measured at the timing sizes (the paper's unless the scale's
    `timing.sizes` says otherwise): the median of `timing.steps` optimisation steps of the recipe (after
    `timing.warmup`) on a batch of the recipe's paper batch size, times the steps of one epoch over
    `timing.train_questions[task]` questions (the real train split). Random inputs of the paper's shapes:
    step time does not depend on the values."""
    from repro.families import load_recipe
    from repro.nn.measure import train_step_time
    from repro.train.trainer import build_optimizer

    timing = ctx.settings["timing"]
    recipe = load_recipe(ctx.spec.recipe)  # the paper's recipe: batch 32, Adamax, clipping 0.25
    batch_size = int(timing.get("batch_size", recipe.batch_size))
    sizes = timing.get("sizes") or {}
    torch.manual_seed(ctx.seed)
    model = build_model(ctx.config, sizes, task=task)
    batch = example_batch(batch_size, sizes, seed=ctx.seed, task=task)
    g = torch.Generator().manual_seed(ctx.seed)
    if task in ("action", "transition"):
        batch["target"] = torch.randint(0, 5, (batch_size,), generator=g)
    elif task == "frameqa":
        batch["target"] = torch.randint(0, PAPER_NUM_ANSWERS["frameqa"], (batch_size,), generator=g)
    else:
        batch["target"] = torch.randint(1, 11, (batch_size,), generator=g).float()
    optimizer = build_optimizer(recipe, [p for p in model.parameters() if p.requires_grad])
    step = train_step_time(
        model,
        batch,
        loss_step(task),
        optimizer,
        steps=int(timing.get("steps", 3)),
        warmup=int(timing.get("warmup", 1)),
        grad_clip=recipe.grad_clip,
    )
    questions = int(timing["train_questions"][task])
    steps_per_epoch = math.ceil(questions / batch_size)
    return {
        "seconds_per_step": step,
        "steps_per_epoch": steps_per_epoch,
        "seconds_per_epoch": step * steps_per_epoch,
        "batch_size": batch_size,
        "train_questions": questions,
        "timed_steps": int(timing.get("steps", 3)),
        "threads": torch.get_num_threads(),
    }


def run_row(ctx: RunContext) -> RowRun:
    return run_ensemble([ctx])[0]


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds, each task's model trained for every seed together (`repro.train.ensemble`; one seed: alone,
    `repro.train.fit`), scored as a lone run scores it; `ensemble: true` in a generated scale's settings."""
    ctx = ctxs[0]
    timed_columns = [c.name for c in ctx.spec.columns if c.metric == "time" and c.key in TASKS]
    if timed_columns and ctx.generated and "timing" not in ctx.settings:
        raise ReproError(f"{ctx.spec.id}: scale {ctx.scale} has no timing settings for {', '.join(timed_columns)}")
    data = prepare_data(ctx.spec, ctx.scale, ctx.settings, as_config(ctx.config))
    metrics: list[dict[str, float]] = [{} for _ in ctxs]
    per_task: list[dict[str, Any]] = [{} for _ in ctxs]
    for col in ctx.spec.columns:
        if col.key not in TASKS or col.metric not in ("accuracy", "mse"):
            continue
        for k, result in enumerate(run_task(ctxs, col.key, data["root"], data["store"])):
            per_task[k][col.key] = result
            metrics[k][col.name] = result["score"]
    runs = []
    for c, m, tasks in zip(ctxs, metrics, per_task):
        timed: dict[str, Any] = {}
        for col in c.spec.columns:  # Table 4: seconds per training epoch at the paper's sizes
            if col.metric != "time" or col.key not in TASKS:
                continue
            if "timing" in c.settings:  # generated scales: timed steps at the paper's sizes, extrapolated
                timed[col.key] = epoch_seconds(c, col.key)
                m[col.name] = timed[col.key]["seconds_per_epoch"]
            elif col.key in tasks:  # paper scale: the training run's own epochs
                m[col.name] = tasks[col.key]["train_seconds_per_epoch"]
        training = {"steps": sum(t["steps"] for t in tasks.values()), "per_task": tasks}
        extra = {"epoch_time": timed} if timed else {}
        runs.append(RowRun(metrics=m, split="test (generated)", training=training, extra=extra))
    return runs


# --- Table 1 ------------------------------------------------------------------------------------


def statistics(ctx: RunContext) -> RowRun:
    """Table 1 from the question files present: QA pairs and distinct GIFs per task for the row's split.

    A GIF column is filled with the count of distinct `question` strings, the one definition that
    reproduces the printed GIF numbers (see README); the distinct gif_name / key / vid_id counts are kept
    in the record's `info`. Cells whose file is missing stay empty and are listed in `info.missing`.
    """
    from repro.datasets.tgif import statistics as tgif_statistics
    from repro.datasets.tgif import tgif_dir

    split = str((ctx.row.compute or {}).get("split", "all"))
    split = {"all": "total"}.get(split, split)
    stats = tgif_statistics(tgif_dir())
    metrics: dict[str, float] = {}
    info: dict[str, Any] = {
        "source": stats["root"],
        "gif_definition": "distinct question strings",
        "missing": [],
        "distinct": {},
    }
    for col in ctx.spec.columns:
        task, _, what = col.key.partition("/")
        cell = stats["cells"][task][split]
        if not cell["present"]:
            info["missing"].append(f"{col.name}: {cell['file']} is not in {stats['root']}")
            continue
        if what == "qa-pairs":
            metrics[col.name] = float(cell["qa_pairs"])
        else:
            metrics[col.name] = float(cell["distinct"]["question"])
            info["distinct"][col.name] = cell["distinct"]
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
    example_batch=example_batch,
)
