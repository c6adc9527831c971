"""sa-m4c's run protocol (see repro.families.base): M4C and SA-M4C on TextVQA-style data.

At the smoke scale the data is generated (`synthetic.py`) in the official TextVQA 0.5.1 and Rosetta
OCR json layouts and read by the same reader as the real files (`data.py`, `splits.py`); the model
(`build.py`) is trained on train and scored on val with the TextVQA accuracy (`repro.metrics.textvqa`)
and the Section 6 subset columns (`subsets.py`). At paper scale the run needs the prepared real data
(`prepare.py`) and says which file is missing and how to get it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from torch import nn

from repro.errors import ReproError
from repro.families.base import Hooks, RowRun, RunContext, share_of_hours, train_units
from repro.families.sa_m4c.build import ARCHS, as_config, build_model, describe, example_batch, gpu_hours, paper_data
from repro.families.sa_m4c.config import DATA_EVAL_FIELDS
from repro.families.sa_m4c.model import decoding_bce
from repro.families.sa_m4c.scoring import per_kind, split_answers, val_scores
from repro.families.sa_m4c.splits import Splits, read_splits
from repro.families.sa_m4c.synthetic import GeneratorConfig
from repro.specs import Row, Spec

# --- training and prediction steps ---------------------------------------------------------------


def train_recipe(ctx: RunContext):
    """The spec's recipe with the scale's overrides, on the train split; M4C's decoding loss is the only one."""
    recipe = ctx.recipe(train_splits=("train",))
    if recipe.loss != "decoding-bce":
        raise ReproError(f"sa-m4c trains with the decoding-bce loss, not {recipe.loss!r}")
    return recipe


# --- data ---------------------------------------------------------------------------------------


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The run's data: generated at the smoke and synthetic scales, the prepared real data of every row
    at paper scale (`prepare.paper_data`; each row reads its own OCR system and detector's part)."""
    if scale == "paper":
        from repro.families.sa_m4c.prepare import paper_data

        return paper_data(spec)
    from repro.data.generated import generating
    from repro.families.sa_m4c.synthetic import GeneratorConfig, generate
    from repro.paths import data_dir

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    root = data_dir() / "synthetic" / f"textvqa-{cfg.key()}"
    with generating(root):  # one process writes it; others wait, then find it
        return generate(root, cfg)


# --- one (row, seed) ----------------------------------------------------------------------------


def build(ctx: RunContext, data: Splits) -> nn.Module:
    return build_model(ctx.config, len(data.vocab), sizes=data.sizes, bert_weights=data.bert)


def run_row(ctx: RunContext) -> RowRun:
    """Train on train, score val (the spec's columns), write the test answers for the server; with `ctx.weights`
    (`repro run --weights`) the row's network is read from the checkpoint instead, and scored the same way."""
    if ctx.weights is not None:
        return _run_weights(ctx)
    return train_units([ctx], read_splits, build, score, recipe=train_recipe, loss_step=decoding_bce)[0]


WEIGHTS_LAYOUT = {"m4c": "mmf", "sa-m4c": "sam-textvqa"}  # the official layout each arch's released weights use


def _run_weights(ctx: RunContext) -> RowRun:
    """No training: the network the checkpoint's own code defines (keymap.py: mmf's input LayerNorm eps,
    sam-textvqa's share3 spatial mixing) at the data's sizes, the strict load with its key report printed, then
    val scored and the test answers written as a trained unit's are."""
    from repro.families.sa_m4c.keymap import build_official, load_m4c, read_checkpoint, sizes_from_state
    from repro.families.sa_m4c.model import layer_stack
    from repro.families.sa_m4c.prepare import evaluated_on
    from repro.train.distributed import DistEnv, device_for
    from repro.weights import render_report

    config = as_config(ctx.config)
    layout, path = WEIGHTS_LAYOUT[config.arch], ctx.weights.path
    data = read_splits(dataclasses.replace(ctx, config=evaluated_on(ctx.spec, config)))
    official = read_checkpoint(path, layout)
    sizes, answers, kinds = sizes_from_state(official, layout, base=data.sizes)
    if answers != len(data.vocab):
        raise ReproError(
            f"{path}: {answers} answers in its classifier, the prepared answer vocabulary has {len(data.vocab)}"
        )
    if kinds != layer_stack(config):
        raise ReproError(
            f"{path}: MMT layers {'+'.join(kinds)} are not row {ctx.row.name!r}'s {'+'.join(layer_stack(config))}"
        )
    model = build_official(sizes, answers, kinds, layout)
    report = load_m4c(model, official, layout, str(path))
    render_report(report, show_placed=False)
    model.to(device_for(DistEnv())).eval()
    run = score(ctx, model, None, data, train_recipe(ctx))
    run.info["weights_keys"] = report.counts()
    return run


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds trained together (`repro.train.ensemble`) at a generated scale, each scored and its test
    answers written as `run_row` does; `ensemble: true` in the scale's settings."""
    return train_units(ctxs, read_splits, build, score, recipe=train_recipe, loss_step=decoding_bce)


def score(ctx: RunContext, model: nn.Module, state, data: Splits, recipe) -> RowRun:
    """A trained unit: its val scores (kept in its workdir), the spec's columns, and its test answers written (under
    torchrun every rank scores its share of each split, and rank 0 alone writes the files)."""
    from repro.train.distributed import is_main_process
    from repro.utils import write_json_atomic

    config = as_config(ctx.config)
    scores = val_scores(data.val, split_answers(model, data.val, config.beam, recipe, ctx.progress))
    if is_main_process():
        write_json_atomic(ctx.workdir / VAL_SCORES, {str(q): v for q, v in scores.items()})
    baseline = None if config.arch == "m4c" or ctx.weights is not None else (lambda: _baseline_scores(ctx, data))
    metrics = _columns(ctx, data.val, scores, baseline)
    run = RowRun(metrics=metrics, split="val", training=None if state is None else state.summary())
    by_kind = per_kind(data.val, scores)
    if by_kind:
        run.extra["per_question_kind"] = by_kind
    test = split_answers(model, data.test, config.beam, recipe, ctx.progress)
    run.predictions.append(str(_write_test_predictions(ctx, test)))
    return run


VAL_SCORES = "val_scores.json"


def _write_test_predictions(ctx: RunContext, answers: dict[int, tuple[str, bool]]) -> Path:
    """Test answers as [{question_id, answer}]: the EvalAI TextVQA format and the ST-VQA Task 3 upload
    format alike, ready for `repro submit textvqa-test` / `repro submit stvqa-test`."""
    from repro.train.distributed import is_main_process
    from repro.utils import write_json_atomic

    out = ctx.predictions_file("test")
    if is_main_process():
        write_json_atomic(out, [{"question_id": q, "answer": a} for q, (a, _) in sorted(answers.items())])
    return out


def _columns(ctx: RunContext, val, scores: dict[int, dict[str, Any]], baseline) -> dict[str, float]:
    """The spec's columns from the val scores: accuracy overall, and the Section 6 subset columns."""
    from repro.families.sa_m4c.subsets import subset_columns
    from repro.metrics import anls

    out: dict[str, float] = {}
    for col in ctx.spec.columns:
        if (col.split or ctx.spec.split) != "val":
            continue
        if col.metric == "textvqa" and col.key == "overall":
            out[col.name] = sum(v["score"] for v in scores.values()) / len(scores)
        elif col.metric == "anls":
            qs = val.questions
            raw = [q.get("answers_raw", q["answers"]) for q in qs]
            out[col.name] = anls.evaluate(raw, [scores[q["question_id"]]["answer"] for q in qs]).aggregate["anls"]
    keys = {col.key for col in ctx.spec.columns}
    if any(k and k.startswith("d_spa") for k in keys):
        out.update(subset_columns(ctx.spec, val, scores, baseline))
    return out


def after(spec: Spec, row: Row) -> tuple[str, ...]:
    """Section 6's gain columns compare a row with the spec's M4C row on the same subset: the SA-M4C unit reads the
    val scores the M4C unit of its seed stored (`_baseline_scores`), so on a cluster its job waits for that one."""
    if row.config is None or as_config(row.config).arch == "m4c":
        return ()
    if not any(c.key and c.key.endswith("-gain-over-m4c") for c in spec.columns):
        return ()
    baseline = next((r for r in spec.rows if r.config is not None and as_config(r.config).arch == "m4c"), None)
    return () if baseline is None else (baseline.name,)


def _baseline_scores(ctx: RunContext, data: Splits) -> dict[int, dict[str, Any]]:
    """The val scores of the spec's M4C row, same seed: stored by its own unit, else trained here."""
    import json

    from repro.train import fit
    from repro.train.trainer import seed_everything

    baseline = next((r for r in ctx.spec.rows if r.config is not None and r.config.arch == "m4c"), None)
    if baseline is None:
        raise ReproError(f"{ctx.spec.id}: a gain over M4C needs an M4C row in the spec")
    stored = ctx.workdir_of(baseline) / VAL_SCORES
    if stored.is_file():
        return {int(q): v for q, v in json.loads(stored.read_text()).items()}
    config = as_config(baseline.config)
    recipe = train_recipe(ctx)
    seed_everything(ctx.seed)
    model = build_model(config, len(data.vocab), sizes=data.sizes, bert_weights=data.bert)
    workdir = ctx.workdir / "baseline"
    fit(model, data.train, recipe, workdir, loss_step=decoding_bce, resume=ctx.resume, progress=ctx.progress)
    return val_scores(data.val, split_answers(model, data.val, config.beam, recipe, False))


# --- compute rows (Section 6 subsets) ------------------------------------------------------------

SUBSET_OCR = "google"  # the OCR tokens that decide D_spa+ocr: the paper's final models read Google OCR


def statistics(ctx: RunContext) -> RowRun:
    """`compute: {task: statistics, subsets: [...]}`: the sizes of D_spa and D_spa+ocr on val."""
    from repro.families.sa_m4c.data import OCR_FILES, QUESTIONS_FILE, read_ocr, read_questions
    from repro.families.sa_m4c.subsets import SUBSETS, subset_ids

    unknown = sorted(set(ctx.row.compute.get("subsets", SUBSETS)) - set(SUBSETS))
    if unknown:
        raise ReproError(f"{ctx.spec.id}: unknown subset(s) {', '.join(unknown)}; known: {', '.join(SUBSETS)}")
    split = ctx.row.compute.get("split", "val")
    if ctx.generated:
        root = (ctx.data or prepare_data(ctx.spec, ctx.scale, ctx.settings))["root"]
    else:
        from repro.families.sa_m4c.prepare import raw_dir

        root = raw_dir()
    questions = read_questions(root / QUESTIONS_FILE.format(split=split))
    ocr = read_ocr(root / OCR_FILES[SUBSET_OCR].format(split=split))
    ids = subset_ids(questions, lambda k: ocr.get(questions[k]["image_id"], ([], None))[0])
    metrics = {c.name: float(len(ids[c.key])) for c in ctx.spec.columns if c.metric == "count" and c.key in ids}
    return RowRun(metrics=metrics, split=split, info={"questions": len(questions)})


COMPUTE_TASKS = {"statistics": statistics}  # `compute: {task: ...}` rows -> what runs them


def convert_weights(path: Path, layout: str, option: str | None = None):
    """`repro weights convert`: a released checkpoint in an official layout into this project's model (keymap.py)."""
    from repro.families.sa_m4c.keymap import convert_checkpoint

    return convert_checkpoint(path, layout, option)


# TextVQA 0.5.1's val and test questions: what `--weights` scores and answers
EVAL_QUESTIONS = 5_000 + 5_734


def evaluation_hours(config, spec: Spec) -> float | None:
    """`repro run --weights`: GPU-hours of decoding val and test, from the training estimate (`gpu_hours`: the
    recipe's samples x 3 passes) per forward pass, one pass of the MMT per decoding step."""
    from repro.families.sa_m4c.build import TRAIN_BATCH, TRAIN_UPDATES

    hours = gpu_hours(config)
    if hours is None:
        return None
    steps = as_config(config).decode_steps
    return hours / (TRAIN_UPDATES * TRAIN_BATCH * 3) * EVAL_QUESTIONS * steps


TRAIN_QUESTIONS = 34_602  # TextVQA 0.5.1's train questions


def limited_hours(config, limit: int, precision: str | None = None) -> float | None:
    """`--limit N`: the training estimate (`gpu_hours`: the recipe's epochs over the train questions) times the
    share of the train questions a run on the first N trains on; the epochs stay the same."""
    return share_of_hours(gpu_hours(config, precision), limit / TRAIN_QUESTIONS)


HOOKS = Hooks(
    archs=ARCHS,
    build_model=build_model,
    describe=describe,
    gpu_hours=gpu_hours,
    prepare_data=prepare_data,
    generator_settings=lambda settings: GeneratorConfig,  # what `generator.<key>=` overrides are checked on
    run_row=run_row,
    run_ensemble=run_ensemble,
    synthetic_jobs=2,  # -j 2 over two threads: 1.20x faster (bench_synthetic --parallel-only, 2026-11-28)
    # rows that differ only in features, ST-VQA or beam (Table 1's rows 10 and 13 are rows 8 and 11 decoded with
    # beam 5) share one training per seed at the generated scales, where those features and data are the same
    evaluation_fields=DATA_EVAL_FIELDS,
    compute_tasks=COMPUTE_TASKS,
    example_batch=example_batch,
    paper_data=paper_data,
    after=after,
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale (splits.datasets)
    limited_hours=limited_hours,
    supports_weights=True,  # --weights: an mmf M4C or sam-textvqa SA-M4C checkpoint, scored on val, test answered
    evaluation_hours=evaluation_hours,
    weight_layouts=("mmf", "sam-textvqa"),
    convert_weights=convert_weights,
)
