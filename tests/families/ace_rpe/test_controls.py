"""ace-rpe's positive control: ACE-RPE against no cross-modal position embedding (the two rows differ in that alone)
on a generated SNLI-VE task that only the distance between the two named objects decides, under a design fixed
before its runs, with no paper scale."""

from __future__ import annotations

import pytest

from repro.errors import ReproError
from repro.families.ace_rpe.build import paper_data
from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig
from repro.specs import load_all, resolve
from tests.families.controls import assert_a_control

CONTROLS = sorted(s.id for s in load_all() if s.paper == "ace-rpe" and s.table.startswith("Control"))


def test_the_relation_control_is_among_the_controls():
    assert "ace-rpe-control-relation" in CONTROLS


@pytest.mark.parametrize("ident", CONTROLS)
def test_a_control_compares_its_mechanism_with_its_ablation_alone(ident):
    assert assert_a_control(resolve(ident)) == {"position_embedding"}


@pytest.mark.parametrize("ident", CONTROLS)
def test_a_control_asks_only_the_relation_and_has_no_paper_scale(ident):
    spec = resolve(ident)
    for scale in ("synthetic", "smoke"):
        task = TaskGeneratorConfig.from_mapping(spec.scales[scale]["task_generator"])
        assert task.ve_relation_only and task.ve_distance  # no neutral statement; next to / far from
    assert [c.dataset for c in spec.columns] == ["snli-ve", "snli-ve"]
    with pytest.raises(ReproError, match="positive control"):
        paper_data(spec, spec.rows[0])


@pytest.mark.parametrize("ident", CONTROLS)
def test_each_scale_of_a_control_generates_its_statements(ident, tmp_path):
    from repro.families.ace_rpe.synthetic_tasks import generate_tasks

    for scale in ("synthetic", "smoke"):
        task = TaskGeneratorConfig.from_mapping(resolve(ident).scales[scale]["task_generator"])
        task.check()  # a 2 x 2 grid has no far cells: drawing a "far" scene there never ends
        if scale == "smoke":
            root = generate_tasks(tmp_path / scale, task, images=False)
            assert (root / "ve_test.json").is_file()
