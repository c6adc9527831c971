"""Pilot runs of the synthetic scale: each row's training curve on held-out scenes that are not the evaluation split.

`python -m repro.families.mcan_pa.pilot SPEC --rows "MCAN,MCAN+PA (ours)" --seeds 0,1 [--heldout-images 500]
[--every 2] [KEY=VALUE ...]` generates the spec's synthetic data with `--heldout-images` more train scenes than the
spec asks for (train scenes are drawn first, so the spec's own train scenes, and their questions, are the first
ones), trains each row's seeds together (`repro.train.ensemble`; a VL-BERT row one seed after another) by the
spec's recipe on the questions of the spec's own train scenes, and scores the questions of the extra scenes with
the VQA score every `--every` epochs: All, Y/N, Num, Other and each question type. The val split, which the tables
are scored on, is never read. One JSON line per (row, seed, epoch), then one summary per (row, seed): the last
held-out scores and, per column, the largest change over the last quarter of the epochs (the designs' stopping
rule: under half a point), and the CPU-seconds of its training and of its evaluations. `KEY=VALUE` sets
`generator.<key>`, `recipe.<key>`, `recipe.schedule.<key>` or `sizes.<key>` (`sizes.<arch>.<key>` where the spec
gives sizes per arch) for the pilot, as YAML values.

Pilots choose a scale's settings before the runs that judge claims (the specs and the family README say what each
showed); nothing they print is a result.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from repro import pilot
from repro.families.base import pilot_context

COLUMNS = {"All": "overall", "Y/N": "yes/no", "Num": "number", "Other": "other"}


def quarter_change(values: list[float]) -> float:
    """The largest change of a curve over the last quarter of its evaluations: max |v_t - v_T| over the evaluations
    from the one that starts the last quarter to the last one (T)."""
    if not values:
        return float("nan")
    start = len(values) - max(1, -(-len(values) // 4)) - 1
    tail = values[max(start, 0) :]
    return max(abs(v - tail[-1]) for v in tail)


def heldout_scores(model, dataset, answer_vocab, gold, recipe) -> dict[str, Any]:
    """The VQA columns and per-question-type scores of `model` on `dataset` (the held-out questions)."""
    from repro.datasets import vqa_scoring

    ids, predicted = vqa_scoring.predict_answers(model, dataset, answer_vocab, recipe, False)
    aggregate = vqa_scoring.vqa_scores(ids, predicted, gold).aggregate
    out = {name: float(aggregate[key]) for name, key in COLUMNS.items() if key in aggregate}
    return {**out, "per_question_type": aggregate.get("per_question_type", {})}


def run_pilot(
    spec_id: str, rows: list[str], seeds: list[int], heldout_images: int, every: int, overrides: list[str], emit
) -> None:
    """`emit` one dict per evaluation of each (row, seed), as it is made, then one summary per (row, seed)."""
    from repro.datasets import vqa_scoring
    from repro.families.mcan_pa import data as mcan_data
    from repro.specs import resolve

    spec = resolve(spec_id)
    train_images, enlarged, data = pilot.heldout_data(
        spec, overrides, "train_images", heldout_images, mcan_data.prepare_data
    )
    gold = vqa_scoring.read_annotations(data["train_annotations"])
    for name in rows:
        pilot_row(spec, spec.row(name), seeds, enlarged, data, (train_images, gold, every), emit)


def pilot_row(spec, row, seeds: list[int], settings: dict[str, Any], data: dict, held: tuple, emit) -> None:
    """One row's seeds trained together `every` epochs at a time (a resumed run continues exactly where it stopped),
    each scored on the held-out scenes after every stretch; then one summary per seed."""
    from torch.utils.data import Subset

    from repro.families.mcan_pa import build
    from repro.families.mcan_pa import data as mcan_data
    from repro.families.mcan_pa.config import McanConfig
    from repro.train import fit
    from repro.train.ensemble import fit_ensemble
    from repro.train.trainer import seed_everything

    train_images, gold, every = held
    with tempfile.TemporaryDirectory() as work:
        ctxs = [pilot_context(spec, row, seed, settings, Path(work) / f"seed{seed}", data) for seed in seeds]
        train = mcan_data.scenes(ctxs[0]).train
        # image ids count up from 1 over the train scenes in the order drawn: the spec's own come first
        images = [int(i) for i in train.image_ids]
        fitted = Subset(train, [i for i, image in enumerate(images) if image <= train_images])
        heldout = Subset(train, [i for i, image in enumerate(images) if image > train_images])
        recipes = [c.recipe(train_splits=("train",)) for c in ctxs]
        models = []
        for ctx in ctxs:
            seed_everything(ctx.seed)
            models.append(
                build.build_model(ctx.config, train.num_tokens, train.num_answers, sizes=settings.get("sizes"))
            )
        together = isinstance(build.as_config(row.config), McanConfig) and len(models) > 1
        curves: list[list[dict[str, Any]]] = [[] for _ in seeds]
        spent = {"train": 0.0, "evaluate": 0.0}
        epochs = recipes[0].epochs
        for upto in [*range(every, epochs, every), epochs]:
            started = pilot.cpu_seconds()
            stretch = [r.replace(epochs=upto) for r in recipes]
            if together:
                fit_ensemble(models, fitted, stretch, [c.workdir for c in ctxs], resume=True, progress=False)
            else:
                for model, recipe, ctx in zip(models, stretch, ctxs):
                    fit(model, fitted, recipe, ctx.workdir, resume=True, progress=False)
            spent["train"] += pilot.cpu_seconds() - started
            started = pilot.cpu_seconds()
            for k, model in enumerate(models):
                scores = heldout_scores(model, heldout, train.answer_vocab, gold, recipes[k])
                model.train()
                curves[k].append({"row": row.name, "seed": seeds[k], "epoch": upto, **scores})
                emit(curves[k][-1])
            spent["evaluate"] += pilot.cpu_seconds() - started
    for seed, curve in zip(seeds, curves):
        shown = [c for c in COLUMNS if c in curve[-1]]
        emit(
            {
                "summary": True,
                "row": row.name,
                "seed": seed,
                "together": len(seeds) if together else 1,
                "train_questions": len(fitted),
                "heldout_questions": len(heldout),
                "epochs": epochs,
                "batch_size": recipes[0].batch_size,
                "final": {c: curve[-1][c] for c in shown},
                "last_quarter_change": {c: round(quarter_change([p[c] for p in curve]), 3) for c in shown},
                "cpu_s_per_seed": {k: round(v / len(seeds), 1) for k, v in spent.items()},
            }
        )


def main(argv: list[str] | None = None) -> int:
    return pilot.images_main("python -m repro.families.mcan_pa.pilot", __doc__, "0,1", run_pilot, argv)


if __name__ == "__main__":
    raise SystemExit(main())
