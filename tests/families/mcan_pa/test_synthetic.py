"""The synthetic scene generator: deterministic, official formats, answers that follow the boxes."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from repro.data.store import FeatureStore
from repro.errors import ReproError
from repro.families.mcan_pa import synthetic
from repro.families.mcan_pa.official import OfficialConfig
from repro.families.mcan_pa.synthetic import CLASSES, GeneratorConfig, Scene, SceneObject, generate
from tests.generated_digest import generated_digest

SMALL = GeneratorConfig(seed=3, train_images=40, val_images=10, questions_per_image=6)


def test_same_seed_same_files_other_seed_other_files(tmp_path):
    a = generate(tmp_path / "a", SMALL)
    b = generate(tmp_path / "b", SMALL)
    c = generate(tmp_path / "c", GeneratorConfig(**{**SMALL.__dict__, "seed": 4}))
    assert generated_digest(a) == generated_digest(b) != generated_digest(c)


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


# --- question_weights: the mechanism's templates ------------------------------------------------------------------

MECHANISM = {"is_on": 1.0, "count_near": 1.0, "extreme": 4.0}


def test_without_question_weights_the_files_are_those_made_before_the_setting(tmp_path):
    """The digests of two data sets as the generator wrote them before `question_weights` existed (commit 2ff7913)."""
    plain = generate(tmp_path / "plain", SMALL)
    noisy = GeneratorConfig(seed=0, train_images=30, val_images=10, stack_probability=0.8, position_noise=0.05)
    assert generated_digest(plain) == "adc9ed429c72dc149f0030e2664f8048a13ee25b387e96a9cdfdd39531215f56"
    assert generated_digest(generate(tmp_path / "noisy", noisy)) == (
        "0af7b13d899e2a8f90219c4c8039b81e001177d724de374919cec4e7f48c5adc"
    )


def _drawn(cfg):
    """Every (scene, question, answer, answer_type, question_type) the generator draws, train and val."""
    for _, _, scene, _, made in synthetic._draws(cfg):
        for question, answer, answer_type, question_type, _ in made:
            yield scene, question, answer, answer_type, question_type


def _named(scene, name):
    (index,) = [i for i, o in enumerate(scene.objects) if o.name == name]
    return index


def _expected(scene, question):
    """The answer worked out from the boxes, independently of the generator's own rules."""
    boxes = np.asarray([o.box for o in scene.objects], dtype=np.float64)
    cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
    if question.startswith("Is the ") and question.endswith("?") and " on the " in question:
        a, b = question[len("Is the ") : -1].split(" on the ")
        i, j = _named(scene, a), _named(scene, b)
        resting = abs(boxes[i, 3] - boxes[j, 1]) < 1e-6 and boxes[j, 0] <= cx[i] <= boxes[j, 2]
        return "yes" if resting else "no"
    if question.startswith("How many objects are next to the "):
        i = _named(scene, question[len("How many objects are next to the ") : -1])
        w, h = boxes[i, 2] - boxes[i, 0], boxes[i, 3] - boxes[i, 1]
        ratio = np.maximum(np.abs(cx - cx[i]) / w, np.abs(cy - cy[i]) / h)
        ratio = np.delete(ratio, i)
        assert not np.any(np.abs(ratio - 1.5) < 0.1)  # never asked where a box sits on the line
        return str(int((ratio <= 1.5).sum()))
    word = question[len("What is the ") : -len(" object?")]
    centre, size = {"leftmost": (cx, scene.width), "rightmost": (-cx, scene.width)}.get(
        word, {"topmost": (cy, scene.height), "bottommost": (-cy, scene.height)}.get(word, (None, None))
    )
    order = np.argsort(centre)
    assert 0.02 <= (centre[order[1]] - centre[order[0]]) / size <= 0.08
    return scene.objects[order[0]].cls


def test_every_drawn_mechanism_question_has_the_answer_its_boxes_give():
    cfg = GeneratorConfig(seed=5, train_images=150, val_images=20, stack_probability=0.8, question_weights=MECHANISM)
    seen = Counter()
    for scene, question, answer, answer_type, question_type in _drawn(cfg):
        assert answer == _expected(scene, question), question
        seen[(question_type, answer_type)] += 1
    assert set(seen) == {
        ("is the X on the Y", "yes/no"),
        ("how many next to", "number"),
        ("what is the Xmost", "other"),
    }
    assert min(seen.values()) > 50


def test_word_order_alone_tells_the_yes_from_the_no():
    """Each stacked pair is asked about in both orders across scenes; every yes names the upper object first."""
    cfg = GeneratorConfig(seed=1, train_images=200, val_images=1, stack_probability=1.0, question_weights={"is_on": 1})
    answers = Counter()
    for scene, question, answer, *_ in _drawn(cfg):
        first = question[len("Is the ") : -1].split(" on the ")[0]
        assert (first == scene.objects[scene.stacked[0]].name) == (answer == "yes")
        answers[answer] += 1
    assert abs(answers["yes"] - answers["no"]) < 0.2 * sum(answers.values())


def test_question_weights_decide_the_templates_asked():
    only = GeneratorConfig(seed=2, train_images=60, val_images=1, question_weights={"count_near": 1, "extreme": 0})
    assert {qt for *_, qt in _drawn(only)} == {"how many next to"}
    # one question per image from two templates that are always asked: drawn 1 : 3
    mixed = GeneratorConfig(
        seed=2, train_images=400, val_images=1, questions_per_image=1, question_weights={"how_many": 1, "is_there": 3}
    )
    kinds = Counter(qt for *_, qt in _drawn(mixed))
    assert 2.3 < kinds["is there a"] / kinds["how many"] < 3.9


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"is_onn": 1}, "unknown template 'is_onn'"),
        ({"is_on": -1}, "must be a number >= 0"),
        ({"is_on": "2"}, "must be a number >= 0"),
        ({"is_on": 0}, "at least one template"),
        ({}, "must map template names"),
    ],
)
def test_bad_question_weights_are_refused(weights, message):
    with pytest.raises(ReproError, match=message):
        GeneratorConfig.from_mapping({"question_weights": weights})


def test_the_release_layouts_refuse_question_weights():
    with pytest.raises(ReproError, match="release layouts"):
        OfficialConfig.from_mapping({"question_weights": {"is_on": 1}})


def test_val_question_weights_change_only_the_val_questions(tmp_path):
    """The evaluation set asks its own mix; train (drawn first) is the same files with or without it."""
    broad = {"what_colour": 1, "is_there": 1, "is_on": 1, "extreme": 1}
    both = GeneratorConfig(seed=4, train_images=80, val_images=40, stack_probability=0.8, question_weights=broad)
    apart = GeneratorConfig(**{**both.__dict__, "val_question_weights": {"extreme": 1}})
    a, b = generate(tmp_path / "a", both), generate(tmp_path / "b", apart)
    for key in ("train_questions", "train_annotations"):
        assert a[key].read_bytes() == b[key].read_bytes()
    val = json.loads(b["val_annotations"].read_text())["annotations"]
    assert val and {x["question_type"] for x in val} == {"what is the Xmost"}
    train = json.loads(b["train_annotations"].read_text())["annotations"]
    assert len({x["question_type"] for x in train}) == 4


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ("{is_on: 1, extreme: 2}", None),
        ("{is_on: .nan}", r"generator.question_weights.is_on=\.nan: must be a finite number"),
        ("{is_on: {deeper: 1}}", "question_weights.is_on=.*: must be a number, a name or a list of them, not a map"),
        ("{is_onn: 1}", "unknown template 'is_onn'"),
    ],
)
def test_a_specs_question_weights_are_checked_where_it_is_planned(sandbox, weights, message):
    """A spec's generator may hold a mapping of numbers (question_weights): each number meets an override's checks
    and the refusal names the spec's file and line."""
    from repro.run import make_plan
    from repro.specs import resolve
    from tests.conftest import SPEC_TEXT, write_spec

    smoke = "smoke: {generator: {train_images: 4, val_images: 2, feature_dim: 8, question_weights: " + weights + "}}"
    path = write_spec(sandbox, SPEC_TEXT.replace("smoke: {tolerance: {default: 0.1}}", smoke))
    if message is None:
        assert make_plan(resolve("t1-demo"), "smoke").units
        return
    with pytest.raises(ReproError, match=message) as caught:
        make_plan(resolve("t1-demo"), "smoke")
    assert str(caught.value).startswith(f"{path}:") and "\n" not in str(caught.value)
