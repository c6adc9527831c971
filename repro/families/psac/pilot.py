"""Pilot runs of the synthetic scale: a row's training curve per task on held-out train videos, never on Test.

`python -m repro.families.psac.pilot SPEC --rows "w/ 1 VPSA" --seeds 0,1 --tasks action,count [--heldout 500]
[--every 2] [KEY=VALUE ...]` generates the spec's synthetic data with `--heldout` more train videos than the spec asks
for (the generator draws train videos first, and Count's from a stream of their own in the same order, so the
spec's own train videos are the first ones drawn), trains each (row, seed, task) by the spec's recipe on the
questions of the spec's own train videos, and scores the questions of the extra videos every `--every` epochs with
the task's metric (accuracy, or Count's MSE). The Test files, which the tables are scored on, are never read. One
JSON line per evaluation, and a summary per (row, seed, task): the held-out metric at the last epoch and how it moved
over the last quarter of the epochs (its net change: the designs' stopping rule is under half a point, or 0.02 of
Count's MSE; and its range), with the CPU seconds of training and of the held-out evaluations.

`--reference conv3|bag` trains a reference model in place of each row's PSAC (same split, recipe and loss; the
rows then only name the recipe): `conv3`, a width-3 convolution over the frames (it sees neighbouring frames, so
their order), mean over frames, the answer MLP; `bag`, the same without the convolution's neighbours (a per-frame
layer: blind to frame order). They ask whether a task is learnable from ordered frames at all at the scale's size,
budget and optimiser, apart from what PSAC's modules can learn (Count only: the question is ignored).

`KEY=VALUE` sets `generator.<key>`, `recipe.<key>`, `sizes.<key>`, `task_recipe.<task>.<key>` or `model.<key>` (the
row's model config) for the pilot (YAML values). Pilots choose a scale's settings before the runs that judge claims
(the family README and the specs say what each pilot showed); nothing they print is a result.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from repro import pilot
from repro.errors import ReproError
from repro.families.base import pilot_context

SECTIONS = ("generator", "recipe", "sizes", "task_recipe", "model")
REFERENCES = ("conv3", "bag")


def reference_model(name: str, video_dim: int, hidden: int):
    """A reference Count model of `video` alone: `conv3` (frames and their neighbours, a width-3 convolution) or
    `bag` (each frame alone, width 1), ReLU, the mean over frames, a 2-layer answer MLP; (B,) counts."""
    from torch import nn

    if name not in REFERENCES:
        raise ReproError(f"pilot: unknown reference {name!r}; one of {', '.join(REFERENCES)}")
    width = 3 if name == "conv3" else 1

    class Reference(nn.Module):
        def __init__(self):
            super().__init__()
            self.frames = nn.Conv1d(video_dim, video_dim, width, padding=width // 2)
            self.head = nn.Sequential(nn.Linear(video_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

        def forward(self, batch):
            v = self.frames(batch["video"].transpose(1, 2)).relu().mean(2)
            return self.head(v).squeeze(-1)

    return Reference()


def video_index(key: int, videos: int) -> int:
    """The generator's video number of a question's key: the other tasks' videos are keys 0..videos-1, Count's
    videos follow them (key videos + i is Count's i-th video)."""
    return key if key < videos else key - videos


def run_pilot(
    spec_id: str,
    rows: list[str],
    seeds: list[int],
    tasks: list[str],
    heldout: int,
    every: int,
    overrides: list[str],
    emit,
    reference: str | None = None,
) -> None:
    """`emit` one dict per evaluation, as it is made, and one summary per (row, seed, task) (`"summary": true`)."""
    from repro.families import by_paper, implementation
    from repro.families.psac.build import TASKS
    from repro.specs import resolve

    prepare_data = implementation(by_paper("psac")).prepare_data  # family.py, loaded by the family table

    spec = resolve(spec_id)
    settings, model = pilot.apply_overrides(spec.scales["synthetic"], overrides, SECTIONS)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ReproError(f"pilot: unknown task {unknown[0]!r}; one of {', '.join(TASKS)}")
    if reference is not None and (reference not in REFERENCES or tasks != ["count"]):
        raise ReproError(f"pilot: --reference is one of {', '.join(REFERENCES)}, with --tasks count alone")
    enlarged = pilot.with_heldout(settings, "train_videos", heldout)
    data = prepare_data(spec, "synthetic", enlarged)
    for name in rows:
        for seed in seeds:
            for task in tasks:
                pilot_unit(spec, spec.row(name), model, seed, task, enlarged, data, heldout, every, emit, reference)


def pilot_unit(spec, row, model_overrides, seed, task, settings, data, heldout, every, emit, reference=None) -> None:
    """One (row, seed, task): its held-out curve, then its summary."""
    import torch
    from torch.utils.data import Subset

    from repro.families.psac.build import loss_step, predict_step, score
    from repro.families.psac.config import PSACConfig, for_scale
    from repro.families.psac.tasks import task_inputs
    from repro.train import fit, predict

    generator = settings["generator"]
    train_videos = int(generator["train_videos"]) - heldout  # the spec's own
    videos = int(generator["train_videos"]) + int(generator["test_videos"])
    config = PSACConfig.model_validate({**row.config.model_dump(exclude_unset=True), **model_overrides})
    with tempfile.TemporaryDirectory() as work:
        ctx = pilot_context(spec, row, seed, settings, work, data, config=for_scale(config, "synthetic"))
        split, recipes, models = task_inputs([ctx], task, data["root"])
        train, recipe, net = split["Train"], recipes[0], models[0]
        if reference is not None:  # initialised from the seed alone, whatever the row
            torch.manual_seed(seed)
            sizes = {**settings.get("sizes", {})}
            net = reference_model(reference, int(sizes.get("video_dim", 32)), int(sizes.get("classifier_hidden", 64)))
        index = [video_index(int(k), videos) for k in train.keys]
        fit_idx = [i for i, v in enumerate(index) if v < train_videos]
        held_idx = [i for i, v in enumerate(index) if v >= train_videos]
        held = Subset(train, held_idx)
        targets = train.targets[held_idx]
        steps_per_epoch = -(-len(fit_idx) // recipe.batch_size)
        curve: list[dict[str, Any]] = []
        started, evaluating = time.process_time(), [0.0]

        def evaluate(step: int) -> None:
            if step % steps_per_epoch or (step // steps_per_epoch) % every:
                return
            tick = time.process_time()
            _, outputs = predict(net, held, recipe.eval_batch_size or 256, predict_step=predict_step, progress=False)
            net.train()
            evaluating[0] += time.process_time() - tick
            curve.append(
                {
                    "row": row.name,
                    "seed": seed,
                    "task": task,
                    "epoch": step // steps_per_epoch,
                    "score": round(score(task, outputs, targets), 4),
                    "cpu_s": round(time.process_time() - started, 2),
                }
            )
            if task == "count":  # the regressed number before clipping and rounding: progress the score hides
                curve[-1]["raw_mse"] = round(float(((outputs.view(-1) - targets.float()) ** 2).mean()), 4)
            emit(curve[-1])

        state = fit(
            net, Subset(train, fit_idx), recipe, Path(work), progress=False, on_step=evaluate, loss_step=loss_step(task)
        )
    net_change, spread = pilot.last_quarter([c["epoch"] for c in curve], [c["score"] for c in curve])
    total = time.process_time() - started
    emit(
        {
            "summary": True,
            "row": row.name,
            "seed": seed,
            "task": task,
            "network": ctx.config.network,
            "reference": reference,
            "train_questions": len(fit_idx),
            "heldout_questions": len(held_idx),
            "epochs": recipe.epochs,
            "batch_size": recipe.batch_size,
            "lr": recipe.schedule["base_lr"],
            "final": curve[-1]["score"] if curve else None,
            "final_train_loss": state.final_loss,
            "best": (min if task == "count" else max)(c["score"] for c in curve) if curve else None,
            "last_quarter_net": round(net_change, 4),
            "last_quarter_range": round(spread, 4),
            "cpu_s_train": round(total - evaluating[0], 2),
            "cpu_s_eval": round(evaluating[0], 2),
            "threads": torch.get_num_threads(),
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = pilot.parser("python -m repro.families.psac.pilot", __doc__, seeds="0")
    parser.add_argument("--tasks", default="action,transition,frameqa,count")
    parser.add_argument("--heldout", type=int, default=500, help="train videos held out (scored, never trained on)")
    parser.add_argument("--reference", default=None, help="conv3 | bag: a reference Count model in place of PSAC")

    def run(args) -> None:
        if args.heldout < 1:
            raise ReproError("pilot: --heldout must be at least 1")
        seeds, rows, tasks = pilot.seed_list(args.seeds), pilot.names(args.rows), pilot.names(args.tasks)
        run_pilot(
            args.spec, rows, seeds, tasks, args.heldout, args.every, args.overrides, pilot.print_line, args.reference
        )

    return pilot.run_main(parser, argv, run, threads=1)


if __name__ == "__main__":
    sys.exit(main())
