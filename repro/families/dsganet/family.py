"""dsganet's hooks (see repro.families.base): DSGANet on VQA-style data.

At the synthetic and smoke scales the data is generated (`synthetic.py`): scenes whose objects have a
depth as well as a box, in the official VQA v2 layout with one feature store of object regions and one
of grid cells per split, each with the depth extras DSGANet reads (`depth_hist`, `depth_peak`, and the
scalar readings `depth_mean`, `depth_mode`). The model is trained on train and scored on val with the
VQA soft accuracy (`overall`) and the accuracy on the relational subset (`rel`, the "Rel." column).

At paper scale the val-scored VQA v2 ablations (Tables VI and VII, object rows) train on the prepared VQA v2
data and its object feature store with depth added (`repro prepare depth`), BERT reading the questions in
WordPiece (`repro.datasets.wordpiece`). Test-server tables (IV), GQA (V, VIII) and grid rows at paper scale say
what is missing and stop (see the family README).

The model is `build.py`'s, the data `data.py`'s, the "Rel." subset `rel.py`'s, Tables II and III
`statistics.py`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.datasets import vqa_scoring
from repro.families.base import Hooks, RowRun, RunContext, train_units
from repro.families.dsganet import build, rel
from repro.families.dsganet import data as dsg_data
from repro.families.dsganet.statistics import statistics
from repro.families.dsganet.synthetic import GeneratorConfig

# --- one (row, seed) ----------------------------------------------------------------------------


def _build(ctx: RunContext, splits: dsg_data.Splits):
    return build.build_model(
        ctx.config, splits.train.num_tokens, splits.train.num_answers, sizes=ctx.settings.get("sizes")
    )


def _recipe(ctx: RunContext):
    return ctx.recipe(train_splits=("train",))


def _scored(ctx: RunContext, model, state, splits: dsg_data.Splits, recipe) -> RowRun:
    """A trained unit scored on the val split: the spec's columns, per answer and question type, Rel."""
    phrases, phrase_source = rel.rel_phrases(ctx.scale)
    data = splits.data
    scores = score(
        model,
        ctx.limited(splits.val),
        splits.train.answer_vocab,
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
    phrases: tuple[str, ...] = rel.REL_PHRASES,
) -> dict[str, Any]:
    """VQA accuracy on a split (overall, per answer type, per question type) and on its Rel. subset (`rel`);
    `accuracy`-metric columns of GQA-like specs read `exact`, the share of answers equal to the most common one."""
    ids, predicted = vqa_scoring.predict_answers(model, data, answer_vocab, recipe, progress)
    gold = vqa_scoring.read_annotations(annotations)
    result = vqa_scoring.vqa_scores(ids, predicted, gold)
    out = dict(result.aggregate)
    out["rel"], out["rel_count"] = rel.rel_accuracy(result.per_item, rel.rel_questions(questions, phrases))
    exact = sum(p == gold[q]["multiple_choice_answer"] for p, q in zip(predicted, ids, strict=True))
    out["exact"] = 100.0 * exact / len(ids)
    return out


def run_row(ctx: RunContext) -> RowRun:
    return train_units([ctx], dsg_data.splits, _build, _scored, recipe=_recipe)[0]


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds trained together (`repro.train.ensemble`) at a generated scale, each scored as `run_row`
    scores it; `ensemble: true` in the scale's settings."""
    return train_units(ctxs, dsg_data.splits, _build, _scored, recipe=_recipe)


COMPUTE_TASKS = {"statistics": statistics}  # `compute: {task: ...}` rows -> what runs them


HOOKS = Hooks(
    archs=build.ARCHS,
    build_model=build.build_model,
    describe=build.describe,
    gpu_hours=build.gpu_hours,
    prepare_data=dsg_data.prepare_data,
    generator_settings=lambda settings: GeneratorConfig,  # what `generator.<key>=` overrides are checked on
    run_row=run_row,
    run_ensemble=run_ensemble,
    synthetic_jobs=2,  # -j 2 over two threads: 1.38x faster (bench_synthetic --parallel-only, 2026-11-28)
    compute_tasks=COMPUTE_TASKS,
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale
    limited_hours=build.limited_hours,
    example_batch=build.example_batch,
    paper_data=build.paper_data,
)
