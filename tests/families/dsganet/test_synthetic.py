"""DSGANet synthetic scenes: VQA v2 layout, depth extras in both stores, depth-determined answers, a smoke row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from repro.data.store import FeatureStore
from repro.families.dsganet import rel
from repro.families.dsganet.synthetic import GeneratorConfig, Scene, SceneObject, _behind, _which_closer, generate

CFG = GeneratorConfig(
    seed=3, train_images=12, val_images=6, questions_per_image=6, feature_dim=8, grid_rows=2, grid_cols=3
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("dsg") / "raw", CFG)


def test_layout_and_depth_extras(generated):
    questions = json.loads(generated["train_questions"].read_text())["questions"]
    annotations = json.loads(generated["train_annotations"].read_text())["annotations"]
    assert len(questions) == len(annotations) > 0
    assert all(len(a["answers"]) == 10 for a in annotations)
    objects, grids = FeatureStore.open(generated["train_features"]), FeatureStore.open(generated["train_grid_features"])
    assert set(objects.extras) == set(grids.extras) == {"depth_hist", "depth_peak", "depth_mean", "depth_mode"}
    item = objects.get(int(objects.image_ids[0]))
    n = item["count"]
    assert item["depth_hist"].shape == (CFG.max_objects, 16)
    assert np.allclose(item["depth_hist"][:n].sum(1), 1.0, atol=1e-2)
    assert (item["depth_peak"][:n] == item["depth_hist"][:n].argmax(1)).all()
    assert ((item["depth_mean"][:n] // 16) == item["depth_peak"][:n]).all()  # the mean lies in the peak bin
    cell = grids.get(int(grids.image_ids[0]))
    assert cell["count"] == 6 and cell["features"].shape == (6, 8)


def test_depth_questions_follow_depth():
    rng = np.random.default_rng(0)
    near = SceneObject("cube", "red", (0, 0, 100, 100), 30.0)
    far = SceneObject("cone", "blue", (50, 0, 150, 100), 150.0)
    scene = Scene(320, 240, [near, far])
    question, answer, *_ = _which_closer(rng, scene, CFG)
    assert answer == "cube" and "closer to the camera" in question
    made = _behind(np.random.default_rng(1), Scene(320, 240, [near, far]), CFG)
    assert made is not None and (made[0], made[1]) in {("What is behind the red cube?", "cone")}


def test_a_task_of_some_templates_asks_only_those_and_all_ten_is_the_default(tmp_path):
    import dataclasses

    from repro.errors import ReproError
    from repro.families.dsganet.synthetic import TEMPLATES

    depth_only = dataclasses.replace(CFG, templates=("which_closer", "is_closer", "closest"))
    paths = generate(tmp_path / "depth", depth_only)
    asked = [q["question"] for q in json.loads(paths["train_questions"].read_text())["questions"]]
    assert asked and all("closer to the camera" in q or "closest object" in q for q in asked), asked
    everything = generate(tmp_path / "all", dataclasses.replace(CFG, templates=tuple(TEMPLATES)))
    default = generate(tmp_path / "default", CFG)
    assert everything["train_questions"].read_text() == default["train_questions"].read_text()
    with pytest.raises(ReproError, match="unknown template"):
        GeneratorConfig.from_mapping({"templates": ["closer"]})


def test_rel_subset(generated):
    subset = rel.rel_questions(generated["val_questions"])
    questions = json.loads(generated["val_questions"].read_text())["questions"]
    for q in questions:
        words = q["question"].lower()
        assert (q["question_id"] in subset) == any(w in words for w in ("behind", "in front of", "left of"))


def test_smoke_row_runs(tmp_path, monkeypatch):
    from repro import families
    from repro.families.base import RunContext, with_data
    from repro.specs import resolve

    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    spec = resolve("dsganet-table6-relations")
    row = spec.row("4")
    ctx = RunContext(
        spec=spec,
        row=row,
        config=row.config,
        scale="smoke",
        settings=spec.scales["smoke"],
        seed=0,
        workdir=tmp_path / "run",
        progress=False,
    )
    run = families.for_row(row).run_row(with_data(ctx))  # the data prepared once, as the launcher does
    assert set(run.metrics) == {"Overall", "Rel."} and run.split == "val"
    assert 0.0 <= run.metrics["Overall"] <= 100.0 and run.info["rel_questions"] > 0
