"""sa-m4c's run protocol (see repro.families.base): M4C and SA-M4C on TextVQA-style data.

At the smoke scale the data is generated (`synthetic.py`) in the official TextVQA 0.5.1 and Rosetta
OCR json layouts and read by the same reader as the real files (`data.py`); the model is trained on
train and scored on val with the TextVQA accuracy (`repro.metrics.textvqa`). At paper scale the run
needs the prepared real data and says which file is missing and how to get it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families import as_typed
from repro.families.base import Hooks, ModelInfo, RowRun, RunContext, train_together
from repro.families.sa_m4c.config import CONFIGS, M4CConfig, SAM4CConfig
from repro.specs import Spec

ARCHS = ("m4c", "sa-m4c")
PAPER_NUM_ANSWERS = 5000  # fixed_answer_vocab_textvqa_5k.txt (Sec. 5.1)
# Config fields that are model sizes (the rest choose the structure, data or decoding).
CONFIG_SIZES = (
    "hidden_size",
    "heads",
    "ff_size",
    "dropout",
    "text_bert_layers",
    "max_question_tokens",
    "max_objects",
    "max_ocr_tokens",
    "decode_steps",
)
# Paper-scale cost of one training run, an estimate (the paper gives no training time): the recipe's
# updates x batch x 3 (forward and backward) x the forward FLOPs per sample that `repro model` measures
# (12.5 G for a 4-layer MMT without fc7, 2.6 G per further layer, 2.5 G for the two fc7 layers), at an
# assumed sustained 25 TFLOP/s of one GPU in mixed precision.
TRAIN_UPDATES, TRAIN_BATCH = 36_000, 96
GFLOPS_4_LAYERS, GFLOPS_PER_LAYER, GFLOPS_FC7 = 12.5, 2.6, 2.5
SUSTAINED_TFLOPS = 25.0


def as_config(config: M4CConfig | SAM4CConfig | dict) -> M4CConfig | SAM4CConfig:
    return as_typed(config, CONFIGS)


def model_sizes(config: M4CConfig | SAM4CConfig, sizes: dict | None = None) -> dict[str, Any]:
    """The paper's sizes with the config's size fields, then `sizes` overrides (smoke and synthetic scales)."""
    from repro.families.sa_m4c.model import PAPER_SIZES

    full = dict(PAPER_SIZES)
    full.update({k: getattr(config, k) for k in CONFIG_SIZES})
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    if full["hidden_size"] % full["heads"]:
        raise ReproError(f"model size hidden_size={full['hidden_size']} is not divisible by heads={full['heads']}")
    return full


def build_model(
    config: M4CConfig | SAM4CConfig | dict,
    num_answers: int = PAPER_NUM_ANSWERS,
    sizes: dict | None = None,
    bert_weights: Path | None = None,
) -> nn.Module:
    """The model a row names. M4C's fine-tuned fc7 layers come with the ResNet-101 detector features of
    the released M4C; the ResNeXt-152 features of the released SA-M4C code are used as they are (so the
    improved M4C and SA-M4C have the same parameters, Sec. 5.1)."""
    from repro.families.sa_m4c.model import M4C, layer_stack, load_text_bert

    config = as_config(config)
    s = model_sizes(config, sizes)
    if num_answers < 5:
        raise ReproError(f"the answer vocabulary needs <pad> <s> </s> <unk> and one word at least, got {num_answers}")
    model = M4C(
        s,
        num_answers,
        layer_stack(config),
        fc7=config.det_backbone == "resnet-101",
        context=getattr(config, "context", 13),
        top_k=getattr(config, "top_k", None),
        relation_bias=getattr(config, "relation_bias", False),
    )
    if bert_weights is not None:
        load_text_bert(model.text_bert, bert_weights)
    return model


def example_batch(batch_size: int = 1, sizes: dict | None = None, *, seed: int = 0) -> dict[str, torch.Tensor]:
    """A full batch in the data interface's format: every question token, object and OCR token present."""
    from repro.families.sa_m4c.model import PAPER_SIZES
    from repro.families.sa_m4c.relations import spatial_relations

    s = {**PAPER_SIZES, **(sizes or {})}
    g = torch.Generator().manual_seed(seed)
    b, n_obj, n_ocr = batch_size, s["max_objects"], s["max_ocr_tokens"]

    def boxes(n):
        xy = torch.rand(b, n, 2, generator=g) * 0.8
        return torch.cat([xy, xy + 0.02 + torch.rand(b, n, 2, generator=g) * 0.18], dim=-1)

    obj_boxes, ocr_boxes = boxes(n_obj), boxes(n_ocr)
    relations = torch.stack(
        [torch.from_numpy(spatial_relations(torch.cat([obj_boxes[i], ocr_boxes[i]]).numpy())) for i in range(b)]
    )
    prev = torch.randint(0, 10, (b, s["decode_steps"]), generator=g)
    return {
        "question_ids": torch.randint(1, min(1000, s["bert_vocab"]), (b, s["max_question_tokens"]), generator=g),
        "question_mask": torch.ones(b, s["max_question_tokens"], dtype=torch.bool),
        "obj_features": torch.rand(b, n_obj, s["obj_dim"], generator=g),
        "obj_boxes": obj_boxes,
        "obj_mask": torch.ones(b, n_obj, dtype=torch.bool),
        "ocr_fasttext": torch.randn(b, n_ocr, s["fasttext_dim"], generator=g),
        "ocr_phoc": torch.rand(b, n_ocr, s["phoc_dim"], generator=g),
        "ocr_features": torch.rand(b, n_ocr, s["ocr_app_dim"], generator=g),
        "ocr_boxes": ocr_boxes,
        "ocr_mask": torch.ones(b, n_ocr, dtype=torch.bool),
        "relations": relations,
        "prev_inds": prev,
        "question_id": torch.arange(b),
    }


def describe(config: M4CConfig | SAM4CConfig | dict, spec: Spec | None = None) -> list[ModelInfo]:
    """Parameters (and FLOPs of one teacher-forced pass) at the paper's sizes, answer vocabulary 5,000."""

    config = as_config(config)
    torch.manual_seed(0)
    return [ModelInfo.measure(build_model(config), config.arch, "textvqa", example_batch(1))]


def gpu_hours(config: M4CConfig | SAM4CConfig | dict) -> float | None:
    from repro.families.sa_m4c.model import layer_stack

    config = as_config(config)
    gflops = GFLOPS_4_LAYERS + GFLOPS_PER_LAYER * (len(layer_stack(config)) - 4)
    gflops += GFLOPS_FC7 if config.det_backbone == "resnet-101" else 0.0
    return TRAIN_UPDATES * TRAIN_BATCH * 3 * gflops * 1e9 / (SUSTAINED_TFLOPS * 1e12) / 3600


# --- training and prediction steps ---------------------------------------------------------------


def loss_step(loss_name: str):
    """M4C's decoding loss (`decoding-bce`): BCE-with-logits over vocabulary ‖ OCR at every step, masked
    after the answer's </s>, summed and divided by the number of valid steps (mmf's M4CDecodingBCEWithMaskLoss)."""
    import torch.nn.functional as F

    if loss_name != "decoding-bce":
        raise ReproError(f"sa-m4c trains with the decoding-bce loss, not {loss_name!r}")

    def step(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        scores = model(batch).float()
        losses = F.binary_cross_entropy_with_logits(scores, batch["targets"], reduction="none")
        mask = batch["step_mask"]
        return (losses * mask.unsqueeze(-1)).sum() / mask.sum().clamp(min=1)

    return step


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor], beam: int = 1) -> torch.Tensor:
    """The decoded indices into vocabulary ‖ OCR, [B, steps] (as floats, the trainer's output type)."""
    return model.decode(batch, beam).float()


# --- data ---------------------------------------------------------------------------------------


def prepare_data(spec: Spec, scale: str, settings: dict[str, Any], config=None) -> dict[str, Path]:
    """The row's data: generated at the smoke and synthetic scales, the prepared real data at paper scale
    (of `config`'s OCR system and detector, or of every row's when None)."""
    if scale == "paper":
        from repro.families.sa_m4c.prepare import paper_data

        return paper_data(spec, config)
    from repro.families.sa_m4c.synthetic import GeneratorConfig, generate
    from repro.paths import data_dir

    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return generate(data_dir() / "synthetic" / f"textvqa-{cfg.key()}", cfg)


def _generated_inputs(ctx: RunContext, data: dict[str, Path], config) -> dict[str, Any]:
    """Where each split's questions, OCR tokens and features are in generated data, and the vocabularies."""
    from transformers import BertTokenizerFast

    from repro.families.sa_m4c.data import (
        OCR_FILES,
        QUESTIONS_FILE,
        STVQA_OCR_FILES,
        WordVectors,
        read_answer_vocab,
        read_questions,
        read_stvqa,
    )

    root = data["root"]
    stvqa = ctx.spec.datasets[0] == "st-vqa"
    splits = {}
    for split in ("train", "val", "test"):
        splits[split] = {
            "questions": read_stvqa(root, split)
            if stvqa
            else read_questions(root / QUESTIONS_FILE.format(split=split)),
            "ocr": root
            / (STVQA_OCR_FILES[split].format(ocr=config.ocr) if stvqa else OCR_FILES[config.ocr].format(split=split)),
            "objects": root / f"{split}.objects.store",
            "regions": root / f"{split}.ocr.store",
        }
    return {
        "splits": splits,
        "tokenizer": BertTokenizerFast(vocab_file=str(data["bert_vocab"]), do_lower_case=True),
        "vocab": read_answer_vocab(data["answer_vocab"]),
        "words": WordVectors(data["words"]),
        "sizes": ctx.settings.get("sizes", {}),
    }


def _datasets(ctx: RunContext, config, inputs: dict[str, Any]) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(split -> TextVQADataset, answer vocabulary, model sizes); the feature sizes come from the data."""
    from repro.data.store import FeatureStore
    from repro.families.sa_m4c.data import Features, TextVQADataset, read_ocr

    tokenizer, vocab, words = inputs["tokenizer"], inputs["vocab"], inputs["words"]
    sets, sizes = {}, None
    for split, where in inputs["splits"].items():
        objects, regions = FeatureStore.open(where["objects"]), FeatureStore.open(where["regions"])
        if sizes is None:
            derived = {"bert_vocab": len(tokenizer), "fasttext_dim": words.dim}
            derived.update(obj_dim=objects.dim, ocr_app_dim=regions.dim)
            sizes = model_sizes(config, {**inputs["sizes"], **derived})
        sets[split] = TextVQADataset(
            where["questions"],
            Features(objects, regions, read_ocr(where["ocr"]), words),
            tokenizer,
            vocab,
            sizes,
            graph=getattr(config, "graph", "spatial"),
            seed=ctx.seed,
            overlap_iou=getattr(config, "overlap_iou", 0.5),
            distance_threshold=getattr(config, "distance_threshold", 0.5),
        )
    return sets, vocab, sizes


# --- one (row, seed) ----------------------------------------------------------------------------


def _recipe(ctx: RunContext):
    from repro.families import load_recipe

    return load_recipe(ctx.spec.recipe).replace(
        **{**ctx.settings.get("recipe", {}), "seed": ctx.seed, "train_splits": ("train",)}
    )


def _train(ctx: RunContext, config, sets, vocab, sizes, workdir: Path, bert_weights: Path | None = None):
    from repro.train import fit
    from repro.train.trainer import seed_everything

    recipe = _recipe(ctx)
    seed_everything(ctx.seed)
    model = build_model(config, len(vocab), sizes=sizes, bert_weights=bert_weights)
    state = fit(
        model,
        sets["train"],
        recipe,
        workdir,
        loss_step=loss_step(recipe.loss),
        resume=ctx.resume,
        progress=ctx.progress,
    )
    return model, state, recipe


def _answers(model, dataset, beam: int, recipe, progress: bool) -> dict[int, tuple[str, bool]]:
    """{question_id: (answer, copied from an OCR token)} of a split."""
    from repro.train import predict

    ids, indices = predict(
        model,
        dataset,
        recipe.eval_batch_size or recipe.batch_size,
        predict_step=lambda m, b: predict_step(m, b, beam),
        progress=progress,
    )
    index = {q["question_id"]: k for k, q in enumerate(dataset.questions)}
    return {int(q): dataset.answer_of(index[int(q)], row.long().tolist()) for q, row in zip(ids.tolist(), indices)}


def _val_scores(dataset, answers: dict[int, tuple[str, bool]]) -> dict[int, dict[str, Any]]:
    """Per val question: answer, copied, TextVQA score (percent)."""
    from repro.metrics import textvqa

    out = {}
    for q in dataset.questions:
        answer, copied = answers[q["question_id"]]
        out[q["question_id"]] = {
            "answer": answer,
            "copied": copied,
            "score": 100 * textvqa.score_one(answer, q["answers"]),
        }
    return out


def run_row(ctx: RunContext) -> RowRun:
    """Train on train, score val (the spec's columns), write the test answers for the server."""
    config, sets, vocab, sizes, bert = _inputs(ctx)
    model, state, recipe = _train(ctx, config, sets, vocab, sizes, ctx.workdir, bert)
    return _scored_run(ctx, config, model, state, recipe, sets, vocab, sizes, bert)


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds trained together (`repro.train.ensemble`) at a generated scale, each scored and its test
    answers written as `run_row` does; `ensemble: true` in the scale's settings."""
    ctx = ctxs[0]
    config, sets, vocab, sizes, bert = _inputs(ctx)
    recipes = [_recipe(c) for c in ctxs]
    models, states = train_together(
        ctxs, lambda c: build_model(config, len(vocab), sizes=sizes), sets["train"], recipes, loss_step(recipes[0].loss)
    )
    return [
        _scored_run(c, config, m, state, r, sets, vocab, sizes, bert)
        for c, m, state, r in zip(ctxs, models, states, recipes)
    ]


def _inputs(ctx: RunContext):
    """The row's config, its train/val/test sets, answer vocabulary, model sizes and BERT weights (paper scale)."""
    config = as_config(ctx.config)
    data = prepare_data(ctx.spec, ctx.scale, ctx.settings, config)
    if ctx.generated:
        inputs, bert = _generated_inputs(ctx, data, config), None
    else:
        from repro.families.sa_m4c.prepare import paper_inputs

        inputs, bert = paper_inputs(config, data), data["bert"]
    sets, vocab, sizes = _datasets(ctx, config, inputs)
    return config, sets, vocab, sizes, bert


def _scored_run(ctx: RunContext, config, model, state, recipe, sets, vocab, sizes, bert) -> RowRun:
    """A trained unit: its val scores (kept in its workdir), the spec's columns, and its test answers written."""
    from repro.utils import write_json_atomic

    scores = _val_scores(sets["val"], _answers(model, sets["val"], config.beam, recipe, ctx.progress))
    write_json_atomic(ctx.workdir / VAL_SCORES, {str(q): v for q, v in scores.items()})
    baseline = None if config.arch == "m4c" else (lambda: _baseline_scores(ctx, sets, vocab, sizes, bert))
    metrics = _columns(ctx, sets["val"], scores, baseline)
    run = RowRun(metrics=metrics, split="val", training=state.summary())
    by_kind = _per_kind(sets["val"], scores)
    if by_kind:
        run.extra["per_question_kind"] = by_kind
    test = _answers(model, sets["test"], config.beam, recipe, ctx.progress)
    run.predictions.append(str(_write_test_predictions(ctx, test)))
    return run


VAL_SCORES = "val_scores.json"


def _per_kind(val, scores: dict[int, dict[str, Any]]) -> dict[str, float]:
    """Accuracy per kind of generated question (spatial, control); empty for real data, which has no kinds."""
    kinds: dict[str, list[float]] = {}
    for q in val.questions:
        if "question_kind" in q:
            kinds.setdefault(str(q["question_kind"]), []).append(scores[q["question_id"]]["score"])
    return {kind: sum(v) / len(v) for kind, v in sorted(kinds.items())}


def _write_test_predictions(ctx: RunContext, answers: dict[int, tuple[str, bool]]) -> Path:
    """Test answers as [{question_id, answer}]: the EvalAI TextVQA format and the ST-VQA Task 3 upload
    format alike, ready for `repro submit textvqa-test` / `repro submit stvqa-test`."""
    from repro.paths import results_dir
    from repro.utils import write_json_atomic

    spec = ctx.spec
    name = f"{ctx.row.slug}.{ctx.scale}.seed{ctx.seed}.test.json"
    out = (ctx.results_root or results_dir()) / spec.paper / spec.id / "predictions" / name  # a variant's own folder
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


def _baseline_scores(ctx: RunContext, sets, vocab, sizes, bert: Path | None) -> dict[int, dict[str, Any]]:
    """The val scores of the spec's M4C row, same seed: stored by its own unit, else trained here."""
    import json

    baseline = next((r for r in ctx.spec.rows if r.config is not None and r.config.arch == "m4c"), None)
    if baseline is None:
        raise ReproError(f"{ctx.spec.id}: a gain over M4C needs an M4C row in the spec")
    stored = ctx.workdir.parent.parent / baseline.slug / f"seed{ctx.seed}" / VAL_SCORES
    if stored.is_file():
        return {int(q): v for q, v in json.loads(stored.read_text()).items()}
    config = as_config(baseline.config)
    model, _, recipe = _train(ctx, config, sets, vocab, sizes, ctx.workdir / "baseline", bert)
    return _val_scores(sets["val"], _answers(model, sets["val"], config.beam, recipe, False))


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
        root = prepare_data(ctx.spec, ctx.scale, ctx.settings)["root"]
    else:
        from repro.families.sa_m4c.prepare import raw_dir

        root = raw_dir()
    questions = read_questions(root / QUESTIONS_FILE.format(split=split))
    ocr = read_ocr(root / OCR_FILES[SUBSET_OCR].format(split=split))
    ids = subset_ids(questions, lambda k: ocr.get(questions[k]["image_id"], ([], None))[0])
    metrics = {c.name: float(len(ids[c.key])) for c in ctx.spec.columns if c.metric == "count" and c.key in ids}
    return RowRun(metrics=metrics, split=split, info={"questions": len(questions)})


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
