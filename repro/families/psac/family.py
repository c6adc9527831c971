"""psac's run protocol (see repro.families.base): PSAC on the four TGIF-QA tasks.

A row of Tables 2-6 is four models, one per task column: Action and Transition (5-way multiple
choice, hinge loss), FrameQA (classification, cross-entropy) and Count (regression, MSE; scored as
the MSE of the prediction clipped to 1..10 and rounded). At the synthetic and smoke scales the data
is generated (`synthetic.py`) in the official question-file layout and read by the same reader as
the real files (`repro.datasets.tgif`); each task's model trains on Train and is scored on Test (TGIF-QA
has no validation split; the final epoch is scored, no epoch is chosen on test).

Table 1 (`compute: {task: statistics}`) is `statistics.py`: counts from the real question files.

Here: the hooks and the row's protocol. The models are `build.py`'s, one task's training and scoring
and Table 4's timing `tasks.py`'s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.families.base import Hooks, Resources, RowRun, RunContext, default_resources, share_of_hours
from repro.families.psac.build import (
    ARCHS,
    TASKS,
    as_config,
    build_model,
    describe,
    example_batch,
    gpu_hours,
    paper_data,
)
from repro.families.psac.config import for_scale
from repro.families.psac.statistics import statistics
from repro.families.psac.synthetic import GeneratorConfig, generate
from repro.families.psac.tasks import column_step, epoch_seconds, run_task
from repro.paths import data_dir
from repro.specs import Spec
from repro.train.stage_plan import write_stages

# --- data ---------------------------------------------------------------------------------------


def synthetic_root(settings: dict[str, Any]) -> Path:
    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return data_dir() / "synthetic" / f"tgif-qa-{cfg.key()}"


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Path]:
    """Once per run: {"root": the question files}, generated with their frame features at the synthetic and
    smoke scales; at paper scale the TGIF-QA folder, checked for the Train and Test files of the spec's tasks before
    any unit starts (a row's frame store is its own: `frame_store`)."""
    if scale == "paper":
        from repro.datasets.tgif import file_name, tgif_dir
        from repro.families.psac.build import refuse_control_at_paper_scale

        refuse_control_at_paper_scale(spec)
        from repro.families.psac.data import GLOVE_FILE, glove_file

        tasks = [c.key for c in spec.columns if c.key in TASKS and c.metric in ("accuracy", "mse")]
        absent = [
            file_name(s, t) for t in tasks for s in ("Train", "Test") if not (tgif_dir() / file_name(s, t)).is_file()
        ]
        if absent:
            raise ReproError(
                f"{spec.id}: paper scale needs the TGIF-QA question files {', '.join(absent)} in {tgif_dir()}; "
                f"run `repro download tgif-qa` (or set REPRO_TGIF_DIR to the folder that has them)"
            )
        dims = sorted({as_config(r.config).word_dim for r in spec.runnable_rows if r.config is not None})
        absent = [GLOVE_FILE.format(dim=d) for d in dims if glove_file(d) is None]
        if absent:
            raise ReproError(
                f"{spec.id}: paper scale needs GloVe 6B's {', '.join(absent)} (the frozen word table) in "
                f"{data_dir() / 'glove-6b'}; run `repro download glove-6b`"
            )
        return {"root": tgif_dir()}
    from repro.data.generated import generating

    root = synthetic_root(settings)
    with generating(root):  # one process writes it; others wait, then find it
        generate(root, GeneratorConfig.from_mapping(settings.get("generator")))
    return {"root": root}


def frame_store(ctx: RunContext) -> Path | None:
    """The prepared frame store of the row's `video_features` at paper scale, checked (the generated scales
    keep their features beside the question files: None)."""
    if ctx.generated:
        return None
    from repro.datasets.prepare import feature_store_dir
    from repro.datasets.tgif import tgif_dir
    from repro.datasets.tgif_features import FEATURE_FILES, WHERE

    kind = as_config(ctx.config).video_features
    store = feature_store_dir("tgif-qa") / f"{kind}.store"
    if not (store / "meta.json").is_file():
        raise ReproError(
            f"{ctx.spec.id}: no frame store {store}; put {FEATURE_FILES[kind][0]} (from {WHERE}) in "
            f"{data_dir() / 'tgif-qa-features'} and the question files in {tgif_dir()}, then run "
            f"repro prepare tgif-qa"
        )
    return store


# --- one (row, seed) ----------------------------------------------------------------------------


def run_row(ctx: RunContext) -> RowRun:
    return run_ensemble([ctx])[0]


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds, each task's model trained for every seed together (`repro.train.ensemble`; one seed: alone,
    `repro.train.fit`), scored as a lone run scores it; `ensemble: true` in a generated scale's settings. An unset
    `network` is decided by the scale (`config.for_scale`: official at paper scale, paper at the generated ones)."""
    ctxs = [replace(c, config=for_scale(c.config, c.scale)) for c in ctxs]
    ctx = ctxs[0]
    timed_columns = [c.name for c in ctx.spec.columns if c.metric == "time" and c.key in TASKS]
    if timed_columns and ctx.generated and "timing" not in ctx.settings:
        raise ReproError(f"{ctx.spec.id}: scale {ctx.scale} has no timing settings for {', '.join(timed_columns)}")
    root, store = ctx.data["root"], frame_store(ctx)  # the question files prepared once per run; the row's frames
    metrics: list[dict[str, float]] = [{} for _ in ctxs]
    per_task: list[dict[str, Any]] = [{} for _ in ctxs]
    trained = [c.key for c in ctx.spec.columns if c.key in TASKS and c.metric in ("accuracy", "mse")]
    trained = [t for t in trained if ctx.part is None or t == ctx.part]  # a job of one task: the others are others'
    stages = [(task, stage_weight(ctx, task, root)) for task in trained]
    for c in ctxs:  # what `repro run`'s progress counts: each task's share of the unit
        write_stages(c.workdir, stages)
    for col in ctx.spec.columns:
        if col.key not in trained or col.metric not in ("accuracy", "mse"):
            continue
        for k, result in enumerate(run_task(ctxs, col.key, root, store)):
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
        if not c.generated:  # the network the scale decided, beside the row's config in the record
            training["model"] = c.config.model_dump(mode="json")
        extra = {"epoch_time": timed} if timed else {}
        split = "test (generated)" if c.generated else "test"
        runs.append(RowRun(metrics=m, split=split, training=training, extra=extra))
    return runs


def stage_weight(ctx: RunContext, task: str, root: Path) -> float:
    """A task's planned optimisation steps in the unit (its recipe's epochs x its Train questions, counted in the
    question file, over the batch): its share of the unit's work for `repro run`'s progress."""
    from repro.datasets.tgif import file_name
    from repro.families.psac.tasks import recipe_overrides

    recipe = ctx.recipe(overrides=recipe_overrides(ctx, task), loss="per-task")
    try:
        with open(Path(root) / file_name("train", task), "rb") as handle:
            questions = max(0, sum(1 for _ in handle) - 1)  # less the header line
    except OSError:
        questions = 1
    if ctx.limit:
        questions = min(questions, ctx.limit)
    return float(recipe.epochs * -(-max(questions, 1) // recipe.batch_size))


def parts(spec: Spec, row, scale: str) -> dict[str, Resources]:
    """At paper scale a row's tasks train as jobs of their own on a cluster (300 epochs of Action and Transition,
    100 of FrameQA and Count: some 100 GPU-hours together, one job requeued every day otherwise), each asking for
    its task's GPU-hours; the unit's own job then scores the row from what they stored."""
    if scale != "paper" or row.config is None:
        return {}
    tasks = [c.key for c in spec.columns if c.key in TASKS and c.metric in ("accuracy", "mse")]
    if len(tasks) < 2:
        return {}
    config = as_config(row.config)
    return {t: default_resources(scale, gpu_hours(config.model_copy(update={"task": t}))) for t in tasks}


def convert_weights(path: Path, layout: str, option: str | None = None):
    """`repro weights convert`: a state dict the official code saved into this project's official network."""
    from repro.families.psac.keymap import convert_checkpoint

    return convert_checkpoint(path, layout, option)


COMPUTE_TASKS = {"statistics": statistics}  # `compute: {task: ...}` rows -> what runs them

# Train QA pairs of each task (Table 1 as printed; the released Action and Count files have 4 fewer)
TRAIN_QUESTIONS = {"action": 20_475, "transition": 52_704, "frameqa": 39_392, "count": 26_843}


def limited_hours(config, limit: int, precision: str | None = None) -> float | None:
    """`--limit N`: each task's GPU-hours (`gpu_hours`: seconds per epoch times the official epochs) times the
    share of its Train questions a run on the first N trains on; the epochs stay the same."""
    config = as_config(config)
    tasks = (config.task,) if config.task else TASKS
    hours = [
        share_of_hours(gpu_hours(config.model_copy(update={"task": t})), limit / TRAIN_QUESTIONS[t]) for t in tasks
    ]
    return None if any(h is None for h in hours) else sum(hours)


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    parts=parts,
    prepare_data=prepare_data,
    generator_settings=lambda settings: GeneratorConfig,  # what `generator.<key>=` overrides are checked on
    run_row=run_row,
    run_ensemble=run_ensemble,
    synthetic_jobs=2,  # -j 2 over two threads: 1.23x faster (bench_synthetic --parallel-only, 2026-11-28)
    compute_tasks=COMPUTE_TASKS,
    example_batch=example_batch,
    paper_data=paper_data,
    weight_layouts=("psac",),  # the official train.py's model.state_dict() (keymap.py); nothing is released
    convert_weights=convert_weights,
    supports_limit=True,  # --limit N: the first N questions of each task's Train and Test at paper scale
    limited_hours=limited_hours,
    timed_step=column_step,  # Table 4's claims on s/epoch: the two rows' steps interleaved (repro.timing)
)
