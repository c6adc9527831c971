"""Pilot runs of the synthetic scale: a row's training curve on a held-out split that is not the evaluation split.

`python -m repro.families.dsganet.pilot SPEC --rows 2,3 --seeds 0,1 [--heldout-images 500] [KEY=VALUE ...]`
generates the spec's synthetic data with `--heldout-images` more train scenes than the spec asks for, trains each
(row, seed) by the spec's recipe on the questions of the spec's own train scenes (the generator draws train scenes
first, so these are the scenes a table run trains on) and scores the questions of the extra scenes after every
`--every` epochs with the VQA score (Overall, Rel., per question type). The val split, which the tables are
scored on, is never read. One JSON line per (row, seed, epoch), and a summary per (row, seed): the held-out Overall
at the last epoch and how it moved over the last quarter of the epochs: its net change (the stopping rule of the
designs: under half a point) and its range. `KEY=VALUE` changes `generator.<key>`, `recipe.<key>`,
`recipe.schedule.<key>` or `sizes.<key>` for the pilot (YAML values), as `repro run` overrides do; `--cpu-threads`
sets torch's threads.

Pilots choose a scale's settings before the runs that judge claims (the family README and the specs say what
each pilot showed); nothing they print is a result.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro import pilot
from repro.errors import ReproError
from repro.families.base import pilot_context


def heldout_scores(model, dataset, indices, answer_vocab, gold, recipe, rel_ids: set[int]) -> dict[str, Any]:
    """VQA score (Overall, Rel. over the questions `rel_ids`, per question type) and exact-match accuracy (Acc.) of
    `model` on the questions `indices` of `dataset`."""
    from torch.utils.data import Subset

    from repro.datasets import vqa_scoring
    from repro.families.dsganet import rel

    ids, predicted = vqa_scoring.predict_answers(model, Subset(dataset, indices), answer_vocab, recipe, False)
    result = vqa_scoring.vqa_scores(ids, predicted, gold)
    rel_score, _ = rel.rel_accuracy(result.per_item, rel_ids)
    exact = sum(p == gold[q]["multiple_choice_answer"] for p, q in zip(predicted, ids, strict=True))
    return {
        "Overall": result.aggregate["overall"],
        "Rel.": rel_score,
        "Acc.": 100.0 * exact / len(ids),  # exact match, Table VIII's column (family.score's `exact`)
        "per_question_type": result.aggregate.get("per_question_type", {}),
    }


def run_pilot(
    spec_id: str, rows: list[str], seeds: list[int], heldout_images: int, every: int, overrides: list[str], emit
) -> None:
    """`emit` one dict per evaluation, as it is made, and one summary per (row, seed) (`"summary": true`)."""
    from repro.datasets import vqa_scoring
    from repro.families.dsganet import data as dsg_data
    from repro.families.dsganet import rel
    from repro.specs import resolve

    spec = resolve(spec_id)
    train_images, enlarged, data = pilot.heldout_data(
        spec, overrides, "train_images", heldout_images, dsg_data.prepare_data
    )
    if not rows:  # no rows: only the data, generated once before pilots run side by side
        return
    held = Heldout(
        train_images,
        vqa_scoring.read_annotations(data["train_annotations"]),
        rel.rel_questions(data["train_questions"], rel.REL_PHRASES),
        every,
    )
    for name in rows:
        for seed in seeds:
            pilot_unit(spec, spec.row(name), seed, enlarged, data, held, emit)


@dataclass(frozen=True)
class Heldout:
    train_images: int  # the spec's train scenes; scenes after them are held out
    gold: dict  # the train split's annotations by question id
    rel_ids: set[int]  # its Rel. questions
    every: int  # epochs between evaluations


def pilot_unit(spec, row, seed: int, settings: dict[str, Any], data: dict, held: Heldout, emit) -> None:
    """One (row, seed): its held-out curve, then its summary."""
    import torch
    from torch.utils.data import Subset

    from repro.families.dsganet import build
    from repro.families.dsganet import data as dsg_data
    from repro.train import fit
    from repro.train.trainer import seed_everything

    with tempfile.TemporaryDirectory() as work:
        ctx = pilot_context(spec, row, seed, settings, work, data)
        train = dsg_data.splits(ctx).train
        # image ids count up from 1 over the train scenes in the order drawn: the spec's own come first
        fit_idx = [i for i, image in enumerate(train.image_ids) if int(image) <= held.train_images]
        held_idx = [i for i, image in enumerate(train.image_ids) if int(image) > held.train_images]
        recipe = ctx.recipe(train_splits=("train",))
        steps_per_epoch = -(-len(fit_idx) // recipe.batch_size)
        seed_everything(seed)
        model = build.build_model(ctx.config, train.num_tokens, train.num_answers, sizes=settings.get("sizes"))
        curve: list[dict[str, Any]] = []
        started = time.process_time()

        def evaluate(step: int) -> None:
            if step % steps_per_epoch or (step // steps_per_epoch) % held.every:
                return
            scores = heldout_scores(model, train, held_idx, train.answer_vocab, held.gold, recipe, held.rel_ids)
            model.train()
            curve.append(
                {
                    "row": row.name,
                    "seed": seed,
                    "epoch": step // steps_per_epoch,
                    "step": step,
                    "cpu_s": round(time.process_time() - started, 2),
                    **scores,
                }
            )
            emit(curve[-1])

        fit(model, Subset(train, fit_idx), recipe, Path(work), progress=False, on_step=evaluate)
    net, spread = pilot.last_quarter([c["epoch"] for c in curve], [c["Overall"] for c in curve])
    emit(
        {
            "summary": True,
            "row": row.name,
            "seed": seed,
            "train_questions": len(fit_idx),
            "heldout_questions": len(held_idx),
            "epochs": recipe.epochs,
            "batch_size": recipe.batch_size,
            "final": {k: curve[-1][k] for k in ("Overall", "Rel.", "Acc.")} if curve else None,
            "last_quarter_net": net,
            "last_quarter_change": spread,
            "cpu_s": round(time.process_time() - started, 2),
            "threads": torch.get_num_threads(),
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = pilot.parser("python -m repro.families.dsganet.pilot", __doc__, seeds="0,1")
    parser.add_argument("--heldout-images", type=int, default=500)

    def run(args) -> None:
        if args.heldout_images < 1:
            raise ReproError("pilot: --heldout-images must be at least 1")
        seeds, rows = pilot.seed_list(args.seeds), pilot.names(args.rows)
        run_pilot(args.spec, rows, seeds, args.heldout_images, args.every, args.overrides, pilot.print_line)

    return pilot.run_main(parser, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
