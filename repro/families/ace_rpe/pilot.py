"""Pilot runs of the synthetic scale: a row's fine-tuning curve per downstream task on items the table is not
scored on.

`python -m repro.families.ace_rpe.pilot SPEC --rows None,ACE-RPE --seeds 0 [--tasks vqa,nlvr2] [--every 10]
[--task-seed N] [KEY=VALUE ...]` pre-trains each (row, seed) as `repro run` does (read from the store of shared
pre-trainings where it holds them), then fine-tunes it on each of the spec's downstream tasks (VQA, SNLI-VE, NLVR2;
NLVR2 after its text-assignment step) by the scale's `task_recipe`, and scores the task's first evaluation split
(VQA test-dev, SNLI-VE dev, NLVR2 dev) every `--every` epochs. The tasks' files are a fresh draw of the spec's task
generator, seed `--task-seed` (the spec's seed + 1 unless given): the same distribution, other items, so the curve is
never read on the items a table is scored on. One JSON line per (row, seed, task, epoch), then one summary per
(row, seed, task): the last held-out score and how it moved over the last quarter of the epochs, net (last less
first) and range (the designs' stopping rule: under half a point), the CPU-seconds of training and of the
evaluations. `KEY=VALUE` sets `generator.<key>`, `task_generator.<key>`, `sizes.<key>`, `pretrain_recipe.<key>`,
`task_recipe.<key>` or `assign_recipe.<key>` (`task_recipe.schedule.<key>` too), as YAML values.

Pilots choose a scale's settings before the runs that judge claims (the specs and the family README say what each
showed); nothing they print is a result.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from repro import pilot
from repro.errors import ReproError
from repro.families.base import pilot_context

SECTIONS = ("generator", "task_generator", "sizes", "pretrain_recipe", "task_recipe", "assign_recipe")
TASKS = ("vqa", "snli-ve", "nlvr2")
HELD_OUT = {"vqa": "test-dev", "snli-ve": "dev", "nlvr2": "dev"}  # the split each curve is read on


def pilot_settings(spec, overrides: list[str], task_seed: int | None) -> dict[str, Any]:
    """The spec's synthetic settings with `overrides`, its task generator drawing with `task_seed` (default: its
    seed + 1), so that the pilot's items are not the table's."""
    if "synthetic" not in spec.scales:
        raise ReproError(f"pilot: {spec.id} has no synthetic scale")
    settings, _ = pilot.apply_overrides(spec.scales["synthetic"], overrides, SECTIONS)
    generator = settings.get("task_generator")
    if not generator:
        raise ReproError(f"pilot: {spec.id} has no task_generator at its synthetic scale (no downstream task)")
    seed = int(generator.get("seed", 0)) + 1 if task_seed is None else task_seed
    if seed == int(generator.get("seed", 0)):
        raise ReproError(f"pilot: --task-seed {seed} is the spec's own: its dev items are the ones the table scores")
    return {**settings, "task_generator": {**generator, "seed": seed}}


def heldout_score(task: str, model, held) -> float:
    """`model`'s score on the held-out split: VQA accuracy on test-dev as the server scores it, else accuracy."""
    from repro.families.ace_rpe import tasks

    if task != "vqa":
        return tasks.evaluate_accuracy(model, held)
    from repro.datasets import vqa_server

    predicted = tasks.evaluate_vqa(model, held["questions"])["predictions"]
    gold = held["gold"]
    answers = {q: predicted[q] for q in gold}
    annotations = {q: {"answers": [{"answer": a} for a in got]} for q, got in gold.items()}
    return float(vqa_server.server_scores({"test-dev": answers}, annotations)["test-dev"]["overall"])


def heldout_data(task: str, files, start):
    """What `heldout_score` reads for `task`: the classification split's items, or VQA's test questions with the
    test-dev answers of the generated gold file."""
    from repro.families.ace_rpe import tasks

    if task != "vqa":
        return tasks.classify_eval_data(files, task, HELD_OUT[task], start.collate.tok, start.size, start.max_tokens)
    from repro.families.ace_rpe.tasks_data import read_json_list

    questions = tasks.vqa_eval_data(files, "test", start.collate.tok, start.size, start.max_tokens)
    entries = read_json_list(files.json["vqa_test_answers.json"], {"question_id": int, "answer": list, "split": str})
    return {
        "questions": questions,
        "gold": {g["question_id"]: g["answer"] for g in entries if g["split"] == "test-dev"},
    }


def pilot_task(ctx, task: str, start, files, every: int, emit) -> None:
    """One (row, seed, task): fine-tune from the pre-trained weights, scored on the held-out split every `every`
    epochs, then its summary."""
    import torch

    from repro.families.ace_rpe import tasks
    from repro.families.ace_rpe.build import TASK_RECIPES, loss_step
    from repro.families.ace_rpe.tasks_data import TaskCollate
    from repro.train import fit

    collate = TaskCollate(start.tok, start.max_tokens)
    (model,) = tasks.task_models([ctx], task, start.sizes, start.weights)
    assigned = None
    if task == "nlvr2":  # ALBEF's text-assignment step first, as `repro run` does
        assigned = tasks.text_assignment(ctx, model, files, start.weights[0], collate, start.size)
    train = tasks.train_data(files, task, start.size)
    held = heldout_data(task, files, start)
    recipe = ctx.recipe(name=TASK_RECIPES[task], overrides=ctx.settings.get("task_recipe", {}))
    steps_per_epoch = -(-len(train) // recipe.batch_size)
    curve: list[dict[str, Any]] = []
    spent = {"evaluation": 0.0}
    started = pilot.cpu_seconds()

    def evaluate(step: int) -> None:  # every `every` epochs, and after the last one
        epoch, within = divmod(step, steps_per_epoch)
        if within or (epoch % every and epoch != recipe.epochs):
            return
        before = pilot.cpu_seconds()
        score = heldout_score(task, model, held)
        model.train()
        spent["evaluation"] += pilot.cpu_seconds() - before
        curve.append(
            {"row": ctx.row.name, "seed": ctx.seed, "task": task, "epoch": epoch, "step": step, "score": score}
        )
        emit(curve[-1])

    state = fit(
        model,
        train,
        recipe,
        Path(ctx.workdir) / task,
        progress=False,
        collate_fn=collate,
        on_step=evaluate,
        loss_step=loss_step(task),
    )
    epochs, scores = [c["epoch"] for c in curve], [c["score"] for c in curve]
    net, spread = pilot.last_quarter(epochs, scores)
    emit(
        {
            "summary": True,
            "row": ctx.row.name,
            "seed": ctx.seed,
            "task": task,
            "split": HELD_OUT[task],
            "train_items": len(train),
            "epochs": recipe.epochs,
            "steps": state.step,
            "final_loss": state.final_loss,
            "assign_steps": assigned["steps"] if assigned else None,
            "final": curve[-1]["score"] if curve else None,
            "last_quarter_net": net,
            "last_quarter_change": spread,
            "last_quarter_gain": pilot.last_quarter_gain(epochs, scores),  # Table 2's stopping rule: under 0.5
            "cpu_s": round(pilot.cpu_seconds() - started - spent["evaluation"], 1),
            "eval_cpu_s": round(spent["evaluation"], 1),
            "threads": torch.get_num_threads(),
        }
    )


def run_pilot(
    spec_id: str,
    rows: list[str],
    seeds: list[int],
    task_names: list[str],
    every: int,
    task_seed: int | None,
    overrides: list[str],
    emit,
) -> None:
    """`emit` one dict per evaluation, as it is made, and one summary per (row, seed, task)."""
    from repro import families
    from repro.families.ace_rpe.columns import spec_heads
    from repro.families.ace_rpe.pretraining import pretrained
    from repro.families.ace_rpe.sources import generated_task_files
    from repro.specs import resolve

    spec = resolve(spec_id)
    heads = [t for t in spec_heads(spec) if t in TASKS]
    unknown = [t for t in task_names if t not in heads]
    if unknown:
        raise ReproError(f"pilot: {spec.id} has no task {', '.join(unknown)} (its tasks: {', '.join(heads) or 'none'})")
    settings = pilot_settings(spec, overrides, task_seed)
    data = families.for_row(spec.row(rows[0])).prepare_data(spec, "synthetic", settings)  # the family table's
    files = generated_task_files(data["tasks"], data["root"])
    for name in rows:
        row = spec.row(name)
        for seed in seeds:
            with tempfile.TemporaryDirectory() as work:
                ctx = pilot_context(spec, row, seed, settings, work, data)
                start = pretrained([ctx])  # from the store where a run (or a pilot) put it
                for task in task_names or heads:
                    pilot_task(ctx, task, start, files, every, emit)


def main(argv: list[str] | None = None) -> int:
    parser = pilot.parser("python -m repro.families.ace_rpe.pilot", __doc__, seeds="0")
    parser.add_argument("--tasks", default="", help="comma-separated: vqa, snli-ve, nlvr2 (default: the spec's)")
    parser.add_argument("--task-seed", type=int, default=None)
    parser.set_defaults(every=10)

    def run(args) -> None:
        rows = pilot.names(args.rows)
        if not rows:
            raise ReproError("pilot: --rows names at least one row")
        tasks = pilot.names(args.tasks)
        run_pilot(
            args.spec,
            rows,
            pilot.seed_list(args.seeds),
            tasks,
            args.every,
            args.task_seed,
            args.overrides,
            pilot.print_line,
        )

    return pilot.run_main(parser, argv, run, threads=1)


if __name__ == "__main__":
    raise SystemExit(main())
