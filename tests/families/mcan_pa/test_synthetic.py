"""The synthetic scene generator: deterministic, official formats, answers that follow the boxes."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from repro.data.store import FeatureStore
from repro.errors import ReproError
from repro.families.mcan_pa import synthetic
from repro.families.mcan_pa.official import OfficialConfig
from repro.families.mcan_pa.synthetic import CLASSES, GeneratorConfig, Scene, SceneObject, generate

SMALL = GeneratorConfig(seed=3, train_images=40, val_images=10, questions_per_image=6)


def _digest(paths) -> str:
    h = hashlib.sha256()
    for key in sorted(paths):
        p = paths[key]
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file():
                h.update(f.read_bytes())
    return h.hexdigest()


def test_same_seed_same_files_other_seed_other_files(tmp_path):
    a = generate(tmp_path / "a", SMALL)
    b = generate(tmp_path / "b", SMALL)
    c = generate(tmp_path / "c", GeneratorConfig(**{**SMALL.__dict__, "seed": 4}))
    assert _digest(a) == _digest(b) != _digest(c)


def test_official_vqa_v2_layout(tmp_path):
    paths = generate(tmp_path, SMALL)
    questions = json.loads(paths["train_questions"].read_text())
    annotations = json.loads(paths["train_annotations"].read_text())
    assert paths["train_questions"].name == "v2_OpenEnded_mscoco_train2014_questions.json"
    assert questions["data_subtype"] == "train2014" and questions["task_type"] == "Open-Ended"
    assert len(questions["questions"]) == len(annotations["annotations"]) > 0
    ann = annotations["annotations"][0]
    assert set(ann) == {"question_id", "image_id", "question_type", "answer_type", "multiple_choice_answer", "answers"}
    assert len(ann["answers"]) == 10 and ann["answer_type"] in {"yes/no", "number", "other"}
    ids = [q["question_id"] for q in questions["questions"]]
    val_ids = [q["question_id"] for q in json.loads(paths["val_questions"].read_text())["questions"]]
    assert not set(ids) & set(val_ids)


def _scene():
    #   red cube at left-top, blue cone in the middle-bottom with a green ring resting on it, red sphere right-top
    objects = [
        SceneObject("cube", "red", (10, 10, 60, 60)),
        SceneObject("cone", "blue", (200, 300, 260, 380)),
        SceneObject("ring", "green", (205, 250, 255, 300)),
        SceneObject("sphere", "red", (500, 20, 560, 80)),
    ]
    return Scene(width=640, height=480, objects=objects, stacked=(2, 1))


class _Always:
    """A stand-in random generator that always picks the first option and never flips a coin."""

    def integers(self, low, high=None):
        return 0

    def choice(self, options, size=None, replace=True):
        return np.arange(size) if size else options[0]

    def random(self):
        return 0.0


def test_question_answers_follow_the_boxes():
    scene = _scene()
    rng = _Always()
    assert synthetic._left_of(rng, scene) == ("What is left of the blue cone?", "cube", "other", "what is")
    assert synthetic._is_left_of(rng, scene) == ("Is the red cube left of the blue cone?", "yes", "yes/no", "is the")
    assert synthetic._count_top(rng, scene) == ("How many cubes are at the top?", "1", "number", "how many")
    assert synthetic._on_top(rng, scene) == ("What is on the blue cone?", "ring", "other", "what is on the")
    assert synthetic._what_colour(rng, scene) == ("What color is the cube?", "red", "other", "what color is the")


class _Late(_Always):
    def random(self):
        return 0.9


def test_word_order_decides_the_answer():
    """ "What is on the X?" asks for the upper object, "What is the X on?" for the lower one."""
    scene = _scene()
    assert synthetic._on_top(_Late(), scene) == ("What is the green ring on?", "cone", "other", "what is the")
    upper, lower = scene.stacked
    assert scene.objects[upper].box[3] == scene.objects[lower].box[1]  # resting on it, touching


def test_ambiguous_left_neighbour_is_not_asked():
    scene = Scene(
        640,
        480,
        [
            SceneObject("cube", "red", (300, 10, 340, 50)),
            SceneObject("cone", "blue", (100, 10, 140, 50)),
            SceneObject("ring", "gray", (105, 200, 145, 240)),
        ],
        None,
    )
    assert synthetic._left_neighbour(scene, 0) is None  # two objects almost equally near on the left


def test_features_carry_no_position(tmp_path):
    """Two objects of the same class and colour differ only by noise, wherever they are."""
    cfg = GeneratorConfig(seed=2, train_images=60, val_images=1, feature_noise=0.0)
    paths = generate(tmp_path, cfg)
    store = FeatureStore.open(paths["train_features"])
    rows = np.concatenate([store.get(i)["features"][: store.get(i)["count"]] for i in store.image_ids])
    distinct = np.unique(np.round(rows.astype(np.float32), 2), axis=0)
    assert len(distinct) <= len(CLASSES) * 6  # one feature vector per (class, colour), never per position


def _centre_x_r2(tmp_path, position_noise) -> float:
    """R² on held-out scenes of the best linear read-out of an object's centre x from its region feature."""
    cfg = GeneratorConfig(seed=2, train_images=200, val_images=80, position_noise=position_noise)
    paths = generate(tmp_path, cfg)
    parts = {}
    for split in ("train", "val"):
        store = FeatureStore.open(paths[f"{split}_features"])
        items = [store.get(i) for i in store.image_ids]
        x = np.concatenate([it["features"][: it["count"]] for it in items]).astype(np.float64)
        boxes = [it["boxes"][: it["count"]] for it in items]
        y = np.concatenate([(b[:, 0] + b[:, 2]) / 2 / it["width"] for b, it in zip(boxes, items, strict=True)])
        parts[split] = (np.hstack([x, np.ones((len(x), 1), dtype=x.dtype)]), y)
    weights, *_ = np.linalg.lstsq(*parts["train"], rcond=None)
    x, y = parts["val"]
    return 1 - float(((x @ weights - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def test_position_noise_puts_a_readable_position_in_the_features(tmp_path):
    """With `position_noise` every row can learn where an object is from its features alone; without it none can."""
    assert _centre_x_r2(tmp_path / "with", 0.05) > 0.8
    assert _centre_x_r2(tmp_path / "without", None) < 0.1


def test_position_noise_keeps_the_scenes_and_questions(tmp_path):
    plain = generate(tmp_path / "plain", SMALL)
    noisy = generate(tmp_path / "noisy", GeneratorConfig(**{**SMALL.__dict__, "position_noise": 0.05}))
    for key in ("train_questions", "train_annotations", "val_questions", "val_annotations"):
        assert plain[key].read_bytes() == noisy[key].read_bytes()
    a, b = (FeatureStore.open(p["train_features"]) for p in (plain, noisy))
    first = a.image_ids[0]
    assert np.array_equal(a.get(first)["boxes"], b.get(first)["boxes"])
    assert not np.allclose(a.get(first)["features"], b.get(first)["features"])


@pytest.mark.parametrize("config", [GeneratorConfig, OfficialConfig])  # the official layouts' generator too
def test_a_negative_position_noise_is_refused(config):
    with pytest.raises(ReproError, match="position_noise"):
        config.from_mapping({"position_noise": -0.1})


def test_generation_is_skipped_when_already_done(tmp_path):
    paths = generate(tmp_path, SMALL)
    stamp = paths["train_questions"].stat().st_mtime_ns
    generate(tmp_path, SMALL)
    assert paths["train_questions"].stat().st_mtime_ns == stamp


def test_unknown_setting_is_refused():
    with pytest.raises(ReproError, match="unknown synthetic generator setting"):
        GeneratorConfig.from_mapping({"seeed": 1})
