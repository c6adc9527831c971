"""Plans derived from what runs: every split a paper-scale row's recipes train on (`train_splits`) has its data step
in the plan, for every spec; mcan-pa Table V's plan lists Visual Genome's QA, which its recipe trains on."""

from __future__ import annotations

import pytest

from repro import families
from repro.errors import ReproError
from repro.run import make_plan
from repro.specs import load_all as all_specs
from tests.test_plan_truth import empty_data  # noqa: F401  (the fixture)


def _recipes(spec, step) -> list:
    """The recipes a row trains by: the spec's, else each stage's (a stage's `what` starts with its recipe)."""
    if spec.recipe:
        return [families.load_recipe(spec.recipe)]
    out = []
    for _, what, _ in step.stages:
        try:
            out.append(families.load_recipe(what.split(":")[0]))
        except ReproError:  # a stage that trains nothing (ALBEF's checkpoint loaded)
            continue
    return out


@pytest.mark.slow  # a plan of every spec
def test_every_split_a_recipe_trains_on_has_its_data_step_in_the_plan(empty_data):  # noqa: F811
    checked = 0
    for spec in all_specs():
        if not any(r.model for r in spec.rows):
            continue
        plan = make_plan(spec, "paper")
        listed = {need.dataset for need in plan.needs}
        for step in plan.steps:
            if step.kind != "train" or not step.ready or step.unsupported:
                continue
            needs = families.for_row(step.row).paper_data(spec, step.row)
            held = {split for need in needs for split in need.splits}
            assert {n.dataset for n in needs if n.splits} <= listed, (spec.id, step.row.name)
            for recipe in _recipes(spec, step):
                missing = set(recipe.train_splits) - held
                assert not missing, f"{spec.id} {step.row.name!r}: {recipe.name} trains on {sorted(missing)} unlisted"
                checked += 1
    assert checked > 50  # every family's paper-scale rows, not a few


def test_table_v_lists_visual_genome_which_its_recipe_trains_on(empty_data):  # noqa: F811
    spec = next(s for s in all_specs() if s.id == "mcan-pa-table5-ablation")
    assert "vg-qa" not in spec.datasets and "vg" in families.load_recipe(spec.recipe).train_splits
    plan = make_plan(spec, "paper", ["MCAN"])
    assert [n.dataset for n in plan.needs][:2] == ["glove-840b", "vg-qa"]  # before `repro prepare vqa2` reads it
    assert "`repro download vg-qa`" in plan.data[1] and any("vg-qa" in c for c in plan.steps[0].missing)


@pytest.mark.parametrize("ident", ["mcan-pa-table1-cocoqa"])
def test_a_recipe_without_visual_genome_lists_none(empty_data, ident):  # noqa: F811
    spec = next(s for s in all_specs() if s.id == ident)
    plan = make_plan(spec, "paper")
    assert "vg-qa" not in {n.dataset for n in plan.needs}
