"""What `repro run`'s progress counts for an ace-rpe unit at the generated scales: its training stages in the order
they run (pre-training, each retrieval fine-tuning, then the downstream heads as `tasks.run_tasks` trains them,
NLVR2's text assignment before NLVR2), each weighted by its planned optimisation steps (epochs x batches of its
training file), written as the unit's stage plan (`repro.train.stage_plan`). Without it the monitor takes the stage
in progress for the whole unit, and the ETA jumps at each stage. At paper scale a unit reads millions of pairs, so
it writes none (the monitor falls back to the stage in progress).
"""

from __future__ import annotations

import math
from pathlib import Path

from repro.families.ace_rpe.build import FINETUNE_RECIPES, PRETRAIN_RECIPE, TASK_RECIPES
from repro.families.ace_rpe.columns import recall_datasets, spec_heads
from repro.families.ace_rpe.data import PairDataset, read_annotations, read_entries
from repro.families.ace_rpe.sources import TASK_FILES, generated_task_files, synthetic_sources
from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES
from repro.families.base import RunContext
from repro.train.stage_plan import write_stages


def planned_stages(ctx: RunContext, data: dict[str, Path]) -> list[tuple[str, float]]:
    """(the stage's folder under the unit's workdir, its planned steps) for each stage of `ctx`'s unit, on the
    generated files `data` (`family.prepare_data`'s); [] at paper scale."""
    from repro.families.ace_rpe.tasks import recipe_overrides

    if not ctx.generated:
        return []
    sources = synthetic_sources(data["root"], recall_datasets(ctx.spec))
    pairs = sum(_pairs(path, "pretrain", ctx.limit) for path, _ in sources.pretrain)
    recipe = ctx.recipe(name=PRETRAIN_RECIPE, overrides=ctx.settings.get("pretrain_recipe", {}))
    stages = [("pretrain", _steps(recipe, pairs))]
    for dataset in recall_datasets(ctx.spec):
        pairs = _pairs(sources.retrieval[dataset][0], "train", ctx.limit)
        stages.append((RETRIEVAL_NAMES[dataset], _steps(ctx.recipe(name=FINETUNE_RECIPES[dataset]), pairs)))
    if "tasks" not in data:
        return stages
    files = generated_task_files(data["tasks"], data["root"])
    for task in spec_heads(ctx.spec):
        if task == "nlvr2":
            pairs = sum(_pairs(path, "pretrain", None) for path, _ in files.assign)
            recipe = ctx.recipe(
                name=TASK_RECIPES["nlvr2-assign"], overrides=recipe_overrides(ctx.settings, "assign_recipe")
            )
            stages.append(("nlvr2_assign", _steps(recipe, pairs)))
        items = len(read_entries(files.json[TASK_FILES[task][0]]))  # ALBEF's train_file
        recipe = ctx.recipe(name=TASK_RECIPES[task], overrides=recipe_overrides(ctx.settings, "task_recipe"))
        stages.append((task, _steps(recipe, items)))
    return stages


def write_plan(ctxs: list[RunContext], stages: list[tuple[str, float]]) -> None:
    """`stages` (`planned_stages`) written into each seed's workdir; nothing where there are none (paper scale)."""
    for ctx in ctxs if stages else []:
        write_stages(Path(ctx.workdir), stages)


def _steps(recipe, items: int) -> float:
    """The optimisation steps `repro.train` plans for `items` at `recipe` (epochs x batches, capped by max_steps)."""
    steps = recipe.epochs * math.ceil(max(items, 1) / recipe.batch_size)
    return float(min(steps, recipe.max_steps or steps))


def _pairs(path: Path, kind: str, limit: int | None) -> int:
    """The (image, caption) items of an ALBEF json file's first `limit` entries, as the stage's `PairDataset` holds."""
    return len(PairDataset(read_annotations(path, kind)[:limit], path.parent, 0))
