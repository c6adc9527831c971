"""mcan-pa's hooks (see repro.families.base): MCAN and its positional variants on VQA-style data.

At the synthetic and smoke scales the data is generated (`synthetic.py`) in the official VQA v2
layout and prepared by the same code as the real files; the model is trained on train and scored
on val with the VQA soft accuracy (`repro.datasets.vqa_scoring`, the official rules).

At paper scale the model is trained on the recipe's splits of the prepared real data (VQA v2:
train + val + VG, as the paper does for test-dev and test-std). Those splits can only be scored by
the evaluation server, so the run writes predictions for every test2015 question in the server's
format (`results/<paper>/<table>/predictions/<row>.seed<N>.test2015.json`, ready for `repro
submit`; `repro.datasets.vqa_server`) and the record's metrics stay empty until a score comes back.
When the recipe leaves val out of training, val is scored locally and kept in the record's `extra.val`
(never compared with the paper's test-dev numbers).

The models are `build.py`'s, the data `data.py`'s, `repro attention`'s maps `attention.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from repro.datasets import vqa_scoring, vqa_server
from repro.datasets.vqa_features import feature_store
from repro.errors import ReproError
from repro.families.base import Hooks, RowRun, RunContext, train_units
from repro.families.mcan_pa import build
from repro.families.mcan_pa import data as mcan_data
from repro.families.mcan_pa.attention import attention
from repro.families.mcan_pa.config import McanConfig, VlBertConfig
from repro.specs import Spec


def _release(ctx: RunContext) -> bool:
    """Whether the unit follows the paper's protocol on a release's files (paper scale, or `data: official`)."""
    return not ctx.generated or "server" in ctx.data


# --- the synthetic scenes: trained on train, scored on val ---------------------------------------


def _build(ctx: RunContext, scenes: mcan_data.Scenes):
    # through the module at call time: what the fingerprint test replaces is what trains
    return build.build_model(
        ctx.config, scenes.train.num_tokens, scenes.train.num_answers, sizes=ctx.settings.get("sizes")
    )


def _recipe(ctx: RunContext):
    return ctx.recipe(train_splits=("train",))


def _scored(ctx: RunContext, model, state, scenes: mcan_data.Scenes, recipe) -> RowRun:
    """A unit trained on the synthetic scenes, scored on their val split."""
    gold = vqa_scoring.read_annotations(scenes.data["val_annotations"])
    result = vqa_scoring.score(model, scenes.val, scenes.train.answer_vocab, gold, recipe, ctx.progress)
    return RowRun(
        metrics=vqa_scoring.columns(ctx.spec, {None: result.aggregate}),
        split="val",
        training=state.summary(),
        extra={"per_question_type": result.aggregate.get("per_question_type", {})},
    )


def run_row(ctx: RunContext) -> RowRun:
    elsewhere = build.not_at_scale(ctx.config, ctx.scale)
    if elsewhere:
        raise ReproError(f"row {ctx.row.name!r}: {elsewhere}")
    if _release(ctx):
        return _run_release(ctx)
    return train_units([ctx], mcan_data.scenes, _build, _scored, recipe=_recipe)[0]


def run_ensemble(ctxs: list[RunContext]) -> list[RowRun]:
    """A row's seeds trained together (`repro.train.ensemble`) on the synthetic scenes, each scored as `run_row`
    scores it; `ensemble: true` in a generated scale's settings."""
    ctx = ctxs[0]
    if not isinstance(build.as_config(ctx.config), McanConfig):
        raise ReproError(f"row {ctx.row.name!r}: only MCAN rows train their seeds together; run it with --no-ensemble")
    if _release(ctx):
        raise ReproError(f"{ctx.spec.id}: seeds are trained together on the synthetic scenes, not on release files")
    return train_units(ctxs, mcan_data.scenes, _build, _scored, recipe=_recipe)


# --- a release's files: the paper's protocol ------------------------------------------------------


def _run_release(ctx: RunContext) -> RowRun:
    """The paper's protocol on a release's files (the real ones, or generated in their layout): train on the
    recipe's splits, score what can be scored here, write the server's prediction files."""
    from torch.utils.data import ConcatDataset

    from repro.datasets.vqa import VQA_FILES, find_file, load_split
    from repro.datasets.vqa_dataset import VQADataset
    from repro.train import fit
    from repro.train.trainer import seed_everything

    spec, data, dataset = ctx.spec, ctx.data, ctx.spec.datasets[0]
    prepared, recipe = data["prepared"], ctx.recipe()
    tests = [split for split, _ in vqa_server.TEST_FILES.get(dataset, {("test", "test"): ()})]
    have = {p.name.split(".")[0] for p in prepared.glob("*.questions.npz")}
    missing = [s for s in (*recipe.train_splits, *tests) if s not in have]
    if missing:
        raise ReproError(
            f"{prepared}: the prepared data has no {', '.join(missing)} split; the recipe "
            f"{recipe.name} trains on {', '.join(recipe.train_splits)} (VG needs the MCAN VG files in "
            f"{data['root'] / 'vg-qa'}, then `repro prepare {dataset} --force`)"
        )

    def split_data(split: str):
        questions = VQADataset(prepared, split, feature_store(dataset, split, data["features"]))
        return ctx.limited(mcan_data.questions(ctx.config, questions, ctx.settings.get("sizes")))

    parts = [split_data(split) for split in recipe.train_splits]
    first = _unwrapped(parts[0])
    seed_everything(ctx.seed)
    config = build.as_config(ctx.config)
    if ctx.weights is not None and isinstance(config, VlBertConfig):  # the classifier the file has
        from repro.families.mcan_pa import vlbert_keymap

        official = vlbert_keymap.read_checkpoint(ctx.weights.path)
        if vlbert_keymap.layout_of(official) == "vqa":
            config = config.model_copy(update={"classifier": vlbert_keymap.classifier_of(official)})
    model = build.build_model(
        config,
        first.num_tokens,
        first.num_answers,
        embeddings=getattr(first, "embeddings", None),
        sizes=ctx.settings.get("sizes"),
    )
    start = None
    if ctx.weights is not None:  # `repro run --weights`: the checkpoint's network, evaluated, not trained
        report = _load_weights(ctx, model)
        state = None
    else:
        if isinstance(config, VlBertConfig):
            start = _vlbert_start(ctx, model, config, first)
        state = fit(model, ConcatDataset(parts), recipe, ctx.workdir, resume=ctx.resume, progress=ctx.progress)

    def answers(split: str) -> tuple[list[int], list[str]]:
        return vqa_scoring.predict_answers(model, split_data(split), first.answer_vocab, recipe, ctx.progress)

    run = RowRun(metrics={}, split=spec.split, training=None if state is None else state.summary())
    if state is None:
        run.info["weights_keys"] = report.counts()
    if start is not None:
        run.info["start"] = start
    if dataset == "coco-qa":  # the test answers are public: scored here
        run.metrics, run.split = _cocoqa_columns(spec, prepared, *answers("test")), "test"
        return run
    if "val" not in recipe.train_splits:
        annotations = find_file(data["root"] / dataset, VQA_FILES[dataset]["val"][1])
        if annotations is not None:
            run.extra["val"] = vqa_scoring.vqa_scores(
                *answers("val"), vqa_scoring.read_annotations(annotations)
            ).aggregate

    predicted: dict[str, dict[int, str]] = {}
    run.extra["submit"] = {}
    for (split, released), targets in vqa_server.TEST_FILES[dataset].items():
        predicted[released] = dict(zip(*answers(split)))
        out = ctx.predictions_file(released)
        questions = None if ctx.scale == "paper" else vqa_server.question_file(data["root"], dataset, split)
        run.extra["submit"][str(out)] = vqa_server.write_test_file(out, predicted[released], targets, questions)
        run.predictions.append(str(out))
    if "server" in data:  # generated data: scored as the server scores test-dev and test-std
        dev_ids = {int(q) for q in load_split(prepared, "test-dev")["question_id"]}
        phases = vqa_server.phases(predicted["test2015"], dev_ids, predicted.get("test-dev2015"))
        gold = vqa_scoring.read_annotations(data["server"])
        run.metrics = vqa_scoring.columns(spec, vqa_server.server_scores(phases, gold))
    return run  # at paper scale the server scores test-dev/test-std: `repro submit <target> --predictions <file>`


def _vlbert_start(ctx: RunContext, model, config: VlBertConfig, data) -> dict | None:
    """Where a VL-BERT row starts before its VQA training, as VL-BERT's fine-tuning does: `init: vl-bert-*` loads
    the released pre-training (the key report printed); with the "mlm" classifier on WordPiece ids, the answer
    layer starts from the mean word embedding of each answer's tokens (CLASSIFIER_PRETRAINED). What was loaded,
    for the record."""
    from repro.datasets.wordpiece import bert_vocab_file
    from repro.families.mcan_pa.vlbert import init_answer_classifier
    from repro.weights import render_report

    start = None
    if config.init != "bert":
        from repro.families.mcan_pa import vlbert_keymap

        sizes = build.model_sizes(config, ctx.settings.get("sizes"))
        report, checkpoint = vlbert_keymap.load_start(model, config, sizes)
        render_report(report, show_placed=False)
        start = {**checkpoint.record(), "keys": report.counts()}
    if config.classifier == "mlm" and model.sizes["vocab"]:
        init_answer_classifier(model, list(data.answer_vocab), bert_vocab_file())
    return start


def weights_refusal(config) -> str | None:
    """Why `--weights` cannot evaluate a row: the released layouts are MCAN without PE/PA and VL-BERT without PA."""
    config = build.as_config(config)
    if isinstance(config, VlBertConfig):
        return "VL-BERT's released layouts are VL-BERT without PA" if config.positional else None
    if config.positional or config.position_embedding != "none":
        return "mcan-vqa's released layout is MCAN without PE/PA"
    return None


def _load_weights(ctx: RunContext, model):
    """A checkpoint into the row's model (keymap.py for mcan-vqa, vlbert_keymap.py for VL-BERT's VQA layout): the
    strict load, the key report printed; the model on the unit's device, in eval mode. The checkpoint's token (or
    WordPiece) and answer tables must be the prepared data's."""
    from repro.families.mcan_pa import keymap, vlbert_keymap
    from repro.train.distributed import DistEnv, device_for
    from repro.weights import render_report

    config = build.as_config(ctx.config)
    path = ctx.weights.path
    refusal = weights_refusal(config)
    if refusal:
        raise ReproError(f"row {ctx.row.name!r}: {refusal}")
    if isinstance(config, VlBertConfig):
        official = vlbert_keymap.read_checkpoint(path)
        if vlbert_keymap.layout_of(official) != "vqa":
            raise ReproError(
                f"{path}: VL-BERT's pre-training has no VQA classifier to evaluate; a row starts from it with "
                "`init: vl-bert-base`"
            )
        report = vlbert_keymap.load_vlbert(model, official, str(path))
    else:
        report = keymap.load_mcan(model, keymap.read_checkpoint(path), str(path))
    render_report(report, show_placed=False)
    model.to(device_for(DistEnv())).eval()
    return report


# VQA v2's question counts: what an epoch of Table VI reads at least (train + val) and what the release
# protocol predicts (test2015 and test-dev2015)
TRAIN_VAL_QUESTIONS = 443_757 + 214_354
TEST_QUESTIONS = 447_793 + 107_394


def evaluation_hours(config, spec: Spec) -> float | None:
    """`repro run --weights`: GPU-hours of predicting the test files, from Table VI's epoch time per question
    (an epoch over at least train + val) with a forward pass a third of a training step."""
    hours = build.gpu_hours(config)
    if hours is None or spec.datasets[0] not in vqa_server.TEST_FILES:
        return None
    return hours / build.EPOCHS * TEST_QUESTIONS / TRAIN_VAL_QUESTIONS / 3


def _unwrapped(dataset):
    return dataset.dataset if hasattr(dataset, "indices") else dataset


def _cocoqa_columns(spec: Spec, prepared: Path, ids: list[int], predicted: list[str]) -> dict[str, float]:
    """Table I's columns on COCO-QA test: exact-match accuracy, overall and per type, and WUPS@t (`key` = t)."""
    from repro.datasets.vqa import load_split
    from repro.metrics import accuracy, wups

    test = load_split(prepared, "test")
    by_id = {int(q): (str(a), str(t)) for q, a, t in zip(test["question_id"], test["answer"], test["answer_type"])}
    gold, types = [by_id[q][0] for q in ids], [by_id[q][1] for q in ids]
    acc = accuracy.evaluate(gold, predicted, ids, types).aggregate
    out = {}
    for col in spec.columns:
        if col.metric == "accuracy":
            value = acc["accuracy"] if col.key == "overall" else acc["per_type"].get(col.key)
        elif col.metric == "wups":
            value = wups.evaluate(gold, predicted, threshold=float(col.key)).aggregate[wups.key_for(float(col.key))]
        else:
            continue
        if value is not None:
            out[col.name] = float(value)
    return out


def convert_weights(path: Path, layout: str, option: str | None = None):
    """`repro weights convert`: a checkpoint in an official layout into this project's model (keymap.py for
    mcan-vqa, vlbert_keymap.py for VL-BERT)."""
    from repro.families.mcan_pa import keymap, vlbert_keymap

    module = vlbert_keymap if layout in vlbert_keymap.LAYOUTS else keymap
    return module.convert_checkpoint(path, layout, option)


HOOKS = Hooks(
    archs=build.ARCHS,
    build_model=build.build_model,
    describe=build.describe,
    gpu_hours=build.gpu_hours,
    prepare_data=mcan_data.prepare_data,
    run_row=run_row,
    run_ensemble=run_ensemble,
    # rows of one config share a training per seed at the generated scales (repro.shared_training): the positive
    # controls' MCAN row is one training for all four controls (they share generator, schedule and seeds)
    evaluation_fields=frozenset(),
    synthetic_jobs=2,  # -j 2 over two threads: 1.31x faster (bench_synthetic --parallel-only, 2026-11-28)
    supports_limit=True,  # --limit N: the first N questions of each split at paper scale
    limited_hours=build.limited_hours,
    supports_weights=True,  # --weights: an mcan-vqa checkpoint (MCAN rows) or a VL-BERT VQA one, evaluated
    weights_refusal=weights_refusal,
    evaluation_hours=evaluation_hours,
    generator_settings=mcan_data.generator_settings,
    attention=attention,
    example_batch=build.example_batch,
    paper_data=build.paper_data,
    not_at_scale=build.not_at_scale,
    weight_layouts=("mcan-vqa", "vl-bert"),
    convert_weights=convert_weights,
)
