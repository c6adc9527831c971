"""DSGANet's positive controls: each compares the mechanism's row with its ablation (the two differ in that mechanism
alone) on a generated task, under a design fixed before its runs, and has no paper scale."""

from __future__ import annotations

import pytest

from repro.errors import ReproError
from repro.families.dsganet.build import paper_data
from repro.families.dsganet.synthetic import GeneratorConfig
from repro.specs import load_all, resolve
from tests.families.controls import assert_a_control

CONTROLS = sorted(s.id for s in load_all() if s.paper == "dsganet" and s.table.startswith("Control"))
TABLES = ("dsganet-table6-relations", "dsganet-table7-ablation", "dsganet-table8-gqa-ablation")


@pytest.mark.parametrize("ident", CONTROLS)
def test_a_control_compares_its_mechanism_with_its_ablation_alone(ident):
    assert len(assert_a_control(resolve(ident))) == 1, "the two rows differ in more than the mechanism"


@pytest.mark.parametrize("ident", CONTROLS)
def test_a_control_asks_only_its_task_and_has_no_paper_scale(ident):
    spec = resolve(ident)
    settings = spec.scales["synthetic"]["generator"]
    GeneratorConfig.from_mapping(settings)  # a valid mix
    assert settings.get("templates"), "a control's task names its templates"
    with pytest.raises(ReproError, match="positive control"):
        paper_data(spec, spec.rows[0])


def test_every_control_a_table_names_exists_and_is_a_dsganet_control():
    named = {c.control for t in TABLES for c in resolve(t).claims if c.control}
    assert named <= set(CONTROLS)
