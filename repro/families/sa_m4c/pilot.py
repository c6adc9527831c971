"""Pilot runs of the synthetic scale: each row's training curve on held-out scenes that are not the evaluation split.

`python -m repro.families.sa_m4c.pilot SPEC --rows "1 M4C†,7 SA-M4C (ours)" --seeds 0,1 [--heldout-images 500]
[--every 2] [KEY=VALUE ...]` generates the spec's synthetic data with `--heldout-images` more train scenes than the
spec asks for (train scenes are drawn first, so the spec's own train scenes, and their questions, are the first
ones; the answer vocabulary is then counted over the extra scenes' questions too), trains each (row, seed) by the
spec's recipe on the questions of the spec's own train scenes, and scores the questions of the extra scenes with the
TextVQA accuracy every `--every` epochs: all of them, and per kind (spatial, control). The val split, which the
tables are scored on, is never read. One JSON line per (row, seed, evaluation), then one summary per (row, seed):
the last held-out scores, how each moved over the last quarter of the epochs (`repro.pilot.last_quarter`: the net
change, the designs' stopping rule is under half a point, and the range) and the CPU seconds of training and of
the evaluations. `KEY=VALUE` sets `generator.<key>`, `recipe.<key>`, `recipe.schedule.<key>` or `sizes.<key>` for
the pilot, as YAML values.

Pilots choose a scale's settings before the runs that judge claims (the specs and the family README say what each
showed); nothing they print is a result.
"""

from __future__ import annotations

import tempfile
from typing import Any

from repro import pilot
from repro.families.base import pilot_context


def spec_scene(image_id: str, train_images: int) -> bool:
    """Whether a generated train scene is one of the spec's own: ids are `train{k:05d}{seed:04x}`, k counting up
    in the order drawn."""
    return int(image_id[len("train") : len("train") + 5]) < train_images


def heldout_scores(model, dataset, recipe, beam: int) -> dict[str, float]:
    """TextVQA accuracy on `dataset` (the held-out questions), all of them ("All") and per question kind."""
    from repro.families.sa_m4c.scoring import per_kind, split_answers, val_scores

    scores = val_scores(dataset, split_answers(model, dataset, beam, recipe, False))
    out = {"All": sum(s["score"] for s in scores.values()) / max(len(scores), 1)}
    return {k: round(v, 3) for k, v in {**out, **per_kind(dataset, scores)}.items()}


def run_pilot(
    spec_id: str, rows: list[str], seeds: list[int], heldout_images: int, every: int, overrides: list[str], emit
) -> None:
    """`emit` one dict per evaluation of each (row, seed), as it is made, then one summary per (row, seed)."""
    from repro.families import by_paper, implementation
    from repro.specs import resolve

    prepare_data = implementation(by_paper("sa-m4c")).prepare_data  # family.py, loaded by the family table
    spec = resolve(spec_id)
    train_images, enlarged, data = pilot.heldout_data(spec, overrides, "train_images", heldout_images, prepare_data)
    for name in rows:
        for seed in seeds:
            pilot_unit(spec, spec.row(name), seed, enlarged, data, (train_images, every), emit)


def pilot_unit(spec, row, seed: int, settings: dict[str, Any], data: dict, held: tuple, emit) -> None:
    """One (row, seed) trained `every` epochs at a time (a resumed run continues exactly where it stopped), scored
    on the held-out scenes after every stretch; then its summary."""
    from repro.families.sa_m4c.build import as_config, build_model
    from repro.families.sa_m4c.model import decoding_bce
    from repro.families.sa_m4c.splits import read_splits
    from repro.train import fit
    from repro.train.trainer import seed_everything

    train_images, every = held
    with tempfile.TemporaryDirectory() as work:
        ctx = pilot_context(spec, row, seed, settings, work, data)
        config = as_config(ctx.config)
        splits = read_splits(ctx)
        train = splits.train  # the spec's own scenes are trained on, the extra ones scored
        fitted, heldout = (
            train.subset([q for q in train.questions if spec_scene(q["image_id"], train_images) == own])
            for own in (True, False)
        )
        recipe = ctx.recipe(train_splits=("train",))  # the recipe `repro run` trains the row by (family.py)
        seed_everything(seed)
        model = build_model(config, len(splits.vocab), sizes=splits.sizes, bert_weights=splits.bert)
        curve: list[dict[str, Any]] = []
        spent = {"train": 0.0, "evaluate": 0.0}
        for upto in [*range(every, recipe.epochs, every), recipe.epochs]:
            started = pilot.cpu_seconds()
            state = fit(
                model, fitted, recipe.replace(epochs=upto), ctx.workdir, resume=True, progress=False,
                loss_step=decoding_bce,
            )  # fmt: skip
            spent["train"] += pilot.cpu_seconds() - started
            started = pilot.cpu_seconds()
            curve.append(
                {"row": row.name, "seed": seed, "epoch": upto, **heldout_scores(model, heldout, recipe, config.beam)}
            )
            model.train()
            spent["evaluate"] += pilot.cpu_seconds() - started
            emit(curve[-1])
    columns = [k for k in curve[-1] if k not in ("row", "seed", "epoch")]
    epochs = [c["epoch"] for c in curve]
    moves = {k: pilot.last_quarter(epochs, [c[k] for c in curve]) for k in columns}
    emit(
        {
            "summary": True,
            "row": row.name,
            "seed": seed,
            "train_questions": len(fitted),
            "heldout_questions": len(heldout),
            "epochs": recipe.epochs,
            "batch_size": recipe.batch_size,
            "final": {k: curve[-1][k] for k in columns},
            "final_train_loss": state.final_loss,
            "last_quarter_net": {k: round(v[0], 3) for k, v in moves.items()},
            "last_quarter_range": {k: round(v[1], 3) for k, v in moves.items()},
            "cpu_s": {k: round(v, 1) for k, v in spent.items()},
        }
    )


def main(argv: list[str] | None = None) -> int:
    return pilot.images_main("python -m repro.families.sa_m4c.pilot", __doc__, "0", run_pilot, argv)


if __name__ == "__main__":
    raise SystemExit(main())
