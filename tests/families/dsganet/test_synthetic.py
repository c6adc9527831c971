"""DSGANet synthetic scenes: VQA v2 layout, depth extras in both stores, depth-determined answers, a smoke row."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

from repro.data.store import FeatureStore
from repro.families.dsganet import rel
from repro.families.dsganet.synthetic import (
    PLURALS,
    GeneratorConfig,
    Scene,
    SceneObject,
    _behind,
    _which_closer,
    generate,
)
from tests.generated_digest import generated_digest

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

    depth_only = dataclasses.replace(CFG, templates=("which_closer", "is_closer", "closest"))
    paths = generate(tmp_path / "depth", depth_only)
    asked = [q["question"] for q in json.loads(paths["train_questions"].read_text())["questions"]]
    assert asked and all("closer to the camera" in q or "closest object" in q for q in asked), asked
    ten = CFG.asked()  # the default makers, named
    everything = generate(tmp_path / "all", dataclasses.replace(CFG, templates=ten))
    default = generate(tmp_path / "default", CFG)
    assert everything["train_questions"].read_text() == default["train_questions"].read_text()
    weighed_alike = generate(tmp_path / "same", dataclasses.replace(CFG, template_weights=(1.0,) * 10))
    # weights draw another way, even equal ones (never the default)
    assert generated_digest(weighed_alike) != generated_digest(default)
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


# --- task mixes (templates, template_weights) ---------------------------------------------------------------------


def test_the_default_task_writes_the_same_bytes_as_before_mixes_existed(tmp_path):
    # the digest of CFG's files as the generator wrote them before `template_weights` and `right_of` were added
    digest = generated_digest(generate(tmp_path / "raw", CFG))
    assert digest == "971ee96ab31981e679aca987f8a59f3fc1f8b5765d817371cf7271d3fb52a80c"


def _oracle(scene: Scene, question: str, cfg: GeneratorConfig) -> str:
    """The answer to a generated question, recomputed from the scene by its wording alone."""
    import re

    by_name = {o.name: o for o in scene.objects}
    if m := re.fullmatch(r"What color is the (\w+)\?", question):
        (obj,) = [o for o in scene.objects if o.cls == m[1]]
        return obj.colour
    if m := re.fullmatch(r"How many (\w+) are there\?", question):
        cls = next(c for c, p in PLURALS.items() if p == m[1])
        return str(sum(o.cls == cls for o in scene.objects))
    if m := re.fullmatch(r"Is there a (\w+ \w+)\?", question):
        return "yes" if m[1] in by_name else "no"
    if m := re.fullmatch(r"Which is closer to the camera, the (\w+ \w+) or the (\w+ \w+)\?", question):
        a, b = by_name[m[1]], by_name[m[2]]
        assert abs(a.depth - b.depth) >= cfg.min_depth_gap
        return (a if a.depth < b.depth else b).cls
    if m := re.fullmatch(r"Is the (\w+ \w+) closer to the camera than the (\w+ \w+)\?", question):
        a, b = by_name[m[1]], by_name[m[2]]
        assert abs(a.depth - b.depth) >= cfg.min_depth_gap
        return "yes" if a.depth < b.depth else "no"
    if question == "What is the closest object?":
        first, second = sorted(scene.objects, key=lambda o: o.depth)[:2]
        assert second.depth - first.depth >= cfg.min_depth_gap
        return first.cls
    if m := re.fullmatch(r"What is (behind|in front of) the (\w+ \w+)\?", question):
        a, sign = by_name[m[2]], 1 if m[1] == "behind" else -1
        overlap = [o for o in scene.objects if o is not a and min(a.box[2], o.box[2]) > max(a.box[0], o.box[0])]
        gaps = sorted((sign * (o.depth - a.depth), o.cls) for o in overlap if sign * (o.depth - a.depth) > 0)
        assert gaps[0][0] >= cfg.min_depth_gap
        return gaps[0][1]
    if m := re.fullmatch(r"How many objects are behind the (\w+ \w+)\?", question):
        a = by_name[m[1]]
        return str(sum(o.depth > a.depth for o in scene.objects if o is not a))
    if m := re.fullmatch(r"What is (left|right) of the (\w+ \w+)\?", question):
        a, sign = by_name[m[2]], 1 if m[1] == "left" else -1
        gaps = sorted(
            (sign * (a.centre_x - o.centre_x), o.cls) for o in scene.objects if sign * (a.centre_x - o.centre_x) > 0
        )
        assert len(gaps) == 1 or gaps[1][0] - gaps[0][0] >= 0.05 * scene.width
        return gaps[0][1]
    raise AssertionError(f"a question no template asks: {question!r}")


MIX = GeneratorConfig.from_mapping(
    {
        "templates": ["what_colour", "how_many", "is_there", "which_closer", "is_closer", "closest", "behind"]
        + ["in_front", "count_behind", "left_of", "right_of"],
        "template_weights": [1, 0.5, 0.5, 3, 0.5, 2, 3, 3, 0.5, 2.5, 2.5],
    }
)


def test_every_question_of_a_weighted_mix_has_the_answer_its_scene_gives():
    from repro.families.dsganet.synthetic import make_questions, make_scene

    rng = np.random.default_rng(7)
    kinds = collections.Counter()
    for _ in range(400):
        scene = make_scene(rng, MIX)
        for question, answer, answer_type, question_type in make_questions(rng, scene, 4, MIX):
            assert _oracle(scene, question, MIX) == answer, question
            assert question.lower().startswith(question_type)
            assert answer_type == ("yes/no" if answer in ("yes", "no") else "number" if answer.isdigit() else "other")
            kinds[question_type] += 1
    assert kinds["what is right of the"] > 0 and kinds["what is left of the"] > 0  # both 2-D relations asked
    assert kinds["which is"] > 2 * kinds["what color is the"]  # weight 3 against 1 (each applies to most scenes)


def test_weights_set_the_share_of_each_template():
    import dataclasses

    from repro.families.dsganet.synthetic import make_questions, make_scene

    # how_many and is_there apply to every scene: drawn 3 : 1, their shares follow
    cfg = dataclasses.replace(CFG, templates=("how_many", "is_there"), template_weights=(3.0, 1.0))
    rng = np.random.default_rng(0)
    firsts = collections.Counter(make_questions(rng, make_scene(rng, cfg), 1, cfg)[0][3] for _ in range(2000))
    assert abs(firsts["how many"] / 2000 - 0.75) < 0.04, firsts
    only = dataclasses.replace(CFG, templates=("how_many", "right_of"), template_weights=(0.0, 1.0))
    asked = [
        q for q, *_ in make_questions(np.random.default_rng(1), make_scene(np.random.default_rng(2), only), 3, only)
    ]
    assert asked and all(q.startswith("What is right of the") for q in asked)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"template_weights": [1.0, 2.0]}, "2 weights for 10 templates"),
        ({"templates": ["closest", "behind"], "template_weights": [1.0]}, "1 weights for 2 templates"),
        ({"templates": ["closest", "behind"], "template_weights": [1.0, -1.0]}, "template_weights: .* 0 or more"),
        ({"templates": ["closest", "behind"], "template_weights": [0.0, 0.0]}, ">= 0 with a positive sum"),
        ({"templates": ["closest", "closest"]}, "named twice"),
    ],
)
def test_a_wrong_mix_is_one_line_naming_it(settings, message):
    from repro.errors import ReproError

    with pytest.raises(ReproError, match=message):
        GeneratorConfig.from_mapping(settings)


def test_right_of_is_asked_only_where_named():
    from repro.families.dsganet.synthetic import MAKERS, TEMPLATES

    assert "right_of" in TEMPLATES and all(m.__name__ != "_right_of" for m in MAKERS) and len(MAKERS) == 10
    assert rel.rel_questions  # "right of" is a Rel. phrase
    assert "right of" in rel.REL_PHRASES


def test_generated_splits_are_held_as_ready_items_equal_to_the_stores(tmp_path, monkeypatch):
    import torch

    from repro.families.base import RunContext, with_data
    from repro.families.dsganet import data as dsg_data
    from repro.specs import resolve

    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    spec = resolve("dsganet-table7-ablation")
    for name in ("3", "8"):  # objects and grids
        row = spec.row(name)
        ctx = RunContext(spec, row, row.config, "smoke", spec.scales["smoke"], 0, tmp_path / name, progress=False)
        ctx = with_data(ctx)
        splits = dsg_data.splits(ctx)
        assert isinstance(splits.train, dsg_data.ReadyItems) and isinstance(splits.val, dsg_data.ReadyItems)
        fresh = splits.val.split  # the store-backed split, read again
        assert len(splits.val) == len(fresh) > 0 and splits.val.answer_vocab == fresh.answer_vocab
        assert list(splits.train.image_ids) == list(splits.train.split.image_ids)
        for i in range(len(fresh)):
            kept, read = splits.val[i], fresh[i]
            assert kept.keys() == read.keys()
            assert all(torch.equal(kept[k], read[k]) if torch.is_tensor(read[k]) else kept[k] == read[k] for k in read)
