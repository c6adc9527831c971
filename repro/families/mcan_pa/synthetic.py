"""Synthetic scenes for `mcan-pa`: a task on which positional attention can matter, small enough for a CPU.

Each image is a scene of objects with a class and a colour. An object's region feature encodes its
class and colour (plus noise) and, with `position_noise` set, a noisy copy of its box: real region
features carry some position implicitly, so every row can learn where an object is from its features,
and POA/PMA make it explicit by reading the exact boxes. Without `position_noise` the features say
nothing about where an object is and position reaches a model only through the boxes. Questions come
in four families, each in the three VQA v2 answer types:

- position-free controls: "what color is the cube?", "how many spheres are there?", "is there a red cone?"
- relative position: "what is left of the red cube?", "is the red cube left of the blue cone?"
- counting in a region: "how many circles are at the top?"
- word order: "what is on the red cube?" versus "what is the red cube on?" (same words, other order)

and, asked only where `question_weights` (train, and val unless `val_question_weights` gives val its own mix)
names them, three that the positional modules are built for:

- word order on yes/no: "is the red cube on the blue cone?" about a stacked pair, either way round (PWA's question)
- counting by relative geometry: "how many objects are next to the red cube?", near in the anchor's own width and
  height, the terms POA embeds (Eq. 14) (POA's question)
- absolute position, closer than the features' noise resolves: "what is the leftmost object?" (PMA's question)

The generator is seeded and deterministic, and writes the official VQA v2 files
(`v2_OpenEnded_mscoco_<split>_questions.json`, `v2_mscoco_<split>_annotations.json`) and one feature
store per split, so the same loaders, models, metrics and tables run on it as on the real data.
Its parameters live in the spec (`scales.synthetic.generator`), fixed before any result is seen.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from repro.data.generated import same_config
from repro.errors import ReproError
from repro.families.base import GeneratorSettings

CLASSES = ("cube", "sphere", "cylinder", "cone", "circle", "ring")
PLURALS = {
    "cube": "cubes",
    "sphere": "spheres",
    "cylinder": "cylinders",
    "cone": "cones",
    "circle": "circles",
    "ring": "rings",
}
COLOURS = ("red", "green", "blue", "yellow", "purple", "gray")
NUMBER_WORDS = ("0", "1", "2", "3", "4", "5", "6", "7", "8")
SPLITS = {"train": "train2014", "val": "val2014"}


@dataclass(frozen=True)
class GeneratorConfig(GeneratorSettings):
    """What a synthetic dataset is made of. Changing any field changes the data (and its folder)."""

    seed: int = 0
    train_images: int = 1200
    val_images: int = 300
    questions_per_image: int = 6
    min_objects: int = 3
    max_objects: int = 8
    feature_dim: int = 64
    feature_noise: float = 0.3
    stack_probability: float = 0.5  # chance that a scene has one object resting on another
    annotator_error: float = 0.1  # chance that one of the 10 annotators gives another answer
    # The standard deviation, in fractions of the image's width and height, of the noise on the box the region
    # features carry (x1, y1, x2, y2); None: the features carry no position. Its draws come from their own
    # stream, so scenes, questions and the class/colour part of the features are the same either way.
    position_noise: float | None = None
    # template name (TEMPLATES) -> weight: each question's template is drawn with these weights (those left out are
    # never asked); None: the seven original templates, uniformly, with the draws of the data sets made before the
    # setting existed (the same files byte for byte)
    question_weights: dict[str, float] | None = None
    # the same for the val split (the evaluation set) alone; None: val is drawn as train is
    val_question_weights: dict[str, float] | None = None

    def weights_for(self, split: str) -> dict[str, float] | None:
        """The template weights of a split ("train" or "val")."""
        if split == "val" and self.val_question_weights is not None:
            return self.val_question_weights
        return self.question_weights

    def check(self) -> None:
        if self.position_noise is not None and not self.position_noise >= 0:
            raise ReproError(f"generator position_noise must be >= 0 or null, got {self.position_noise}")
        for weights in (self.question_weights, self.val_question_weights):
            if weights is not None:
                check_weights(weights)


@dataclass
class SceneObject:
    cls: str
    colour: str
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels

    @property
    def centre(self) -> tuple[float, float]:
        return (self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2

    @property
    def name(self) -> str:
        return f"{self.colour} {self.cls}"


@dataclass
class Scene:
    width: int
    height: int
    objects: list[SceneObject]
    stacked: tuple[int, int] | None  # (upper, lower) indices when one object rests on another


def make_scene(rng: np.random.Generator, cfg: GeneratorConfig) -> Scene:
    width, height = int(rng.integers(320, 641)), int(rng.integers(240, 481))
    count = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    objects: list[SceneObject] = []
    for _ in range(count):
        w, h = rng.uniform(0.08, 0.2) * width, rng.uniform(0.08, 0.2) * height
        x1, y1 = rng.uniform(0, width - w), rng.uniform(0, height - h)
        objects.append(SceneObject(str(rng.choice(CLASSES)), str(rng.choice(COLOURS)), (x1, y1, x1 + w, y1 + h)))
    stacked = None
    if count >= 2 and rng.random() < cfg.stack_probability:
        upper, lower = (int(i) for i in rng.choice(count, size=2, replace=False))
        lx1, ly1, lx2, _ = objects[lower].box
        w = objects[upper].box[2] - objects[upper].box[0]
        h = min(objects[upper].box[3] - objects[upper].box[1], ly1)
        if h > 4:
            cx = (lx1 + lx2) / 2
            objects[upper].box = (max(cx - w / 2, 0.0), ly1 - h, min(cx + w / 2, float(width)), ly1)
            stacked = (upper, lower)
    return Scene(width, height, objects, stacked)


def _unique(scene: Scene, pick) -> list[int]:
    """Indices of objects that `pick` selects and that no other object shares the description of."""
    return [i for i, o in enumerate(scene.objects) if pick(o) and sum(p.name == o.name for p in scene.objects) == 1]


def make_questions(
    rng: np.random.Generator, scene: Scene, n: int, weights: dict[str, float] | None = None
) -> list[tuple[str, str, str, str]]:
    """Up to `n` questions as (question, answer, answer_type, question_type); each one's template drawn uniformly
    from the original seven or, with `weights`, by those weights."""
    if weights is None:
        makers = [TEMPLATES[name] for name in ORIGINAL]

        def draw():
            return makers[int(rng.integers(len(makers)))]
    else:
        names = sorted(name for name, w in weights.items() if w > 0)
        shares = np.asarray([weights[name] for name in names], dtype=np.float64)
        shares /= shares.sum()

        def draw():
            return TEMPLATES[names[int(rng.choice(len(names), p=shares))]]

    out: list[tuple[str, str, str, str]] = []
    for _ in range(n * 4):
        if len(out) == n:
            break
        made = draw()(rng, scene)
        if made is not None and made[0] not in {q for q, *_ in out}:
            out.append(made)
    return out


def _what_colour(rng, scene):
    classes = [c for c in CLASSES if sum(o.cls == c for o in scene.objects) == 1]
    if not classes:
        return None
    cls = str(rng.choice(classes))
    colour = next(o.colour for o in scene.objects if o.cls == cls)
    return f"What color is the {cls}?", colour, "other", "what color is the"


def _how_many(rng, scene):
    cls = str(rng.choice(CLASSES))
    return f"How many {PLURALS[cls]} are there?", str(sum(o.cls == cls for o in scene.objects)), "number", "how many"


def _is_there(rng, scene):
    if rng.random() < 0.5:
        name = scene.objects[int(rng.integers(len(scene.objects)))].name
    else:
        name = f"{rng.choice(COLOURS)} {rng.choice(CLASSES)}"
    answer = "yes" if any(o.name == name for o in scene.objects) else "no"
    return f"Is there a {name}?", answer, "yes/no", "is there a"


def _left_neighbour(scene: Scene, i: int) -> int | None:
    """The object whose centre is nearest to the left of object i's, when it is clearly the nearest."""
    x = scene.objects[i].centre[0]
    left = sorted((x - o.centre[0], j) for j, o in enumerate(scene.objects) if j != i and o.centre[0] < x)
    if not left or (len(left) > 1 and left[1][0] - left[0][0] < 0.05 * scene.width):
        return None
    return left[0][1]


def _left_of(rng, scene):
    anchors = [i for i in _unique(scene, lambda o: True) if _left_neighbour(scene, i) is not None]
    if not anchors:
        return None
    i = anchors[int(rng.integers(len(anchors)))]
    answer = scene.objects[_left_neighbour(scene, i)].cls
    return f"What is left of the {scene.objects[i].name}?", answer, "other", "what is"


def _is_left_of(rng, scene):
    named = _unique(scene, lambda o: True)
    if len(named) < 2:
        return None
    a, b = (named[int(k)] for k in rng.choice(len(named), size=2, replace=False))
    gap = scene.objects[b].centre[0] - scene.objects[a].centre[0]
    if abs(gap) < 0.05 * scene.width:
        return None
    answer = "yes" if gap > 0 else "no"
    return f"Is the {scene.objects[a].name} left of the {scene.objects[b].name}?", answer, "yes/no", "is the"


def _count_top(rng, scene):
    cls = str(rng.choice(CLASSES))
    half = scene.height / 2
    if any(o.cls == cls and abs(o.centre[1] - half) < 0.05 * scene.height for o in scene.objects):
        return None
    count = sum(o.cls == cls and o.centre[1] < half for o in scene.objects)
    return f"How many {PLURALS[cls]} are at the top?", str(count), "number", "how many"


def _on_top(rng, scene):
    if scene.stacked is None:
        return None
    upper, lower = scene.stacked
    names = [o.name for o in scene.objects]
    if rng.random() < 0.5 and names.count(scene.objects[lower].name) == 1:
        return (f"What is on the {scene.objects[lower].name}?", scene.objects[upper].cls, "other", "what is on the")
    if names.count(scene.objects[upper].name) == 1:
        return (f"What is the {scene.objects[upper].name} on?", scene.objects[lower].cls, "other", "what is the")
    return None


def _is_on(rng, scene):
    """Word order on yes/no: a stacked pair named either way round, "Is the A on the B?" (yes when A rests on B) or
    "Is the B on the A?" (no). The same two names in both; only their order tells the answer apart."""
    if scene.stacked is None:
        return None
    names = [o.name for o in scene.objects]
    upper, lower = (scene.objects[i].name for i in scene.stacked)
    if names.count(upper) != 1 or names.count(lower) != 1:
        return None
    if rng.random() < 0.5:
        return f"Is the {upper} on the {lower}?", "yes", "yes/no", "is the X on the Y"
    return f"Is the {lower} on the {upper}?", "no", "yes/no", "is the X on the Y"


# "next to": centres at most NEAR of the anchor's own width apart horizontally and of its height vertically, the
# ratios |x_i - x_j| / w_i and |y_i - y_j| / h_i of POA's R_ij (Eq. 14, i the anchor). A question is not asked when
# an object lies within NEAR_MARGIN of that line in either ratio, so that the count is unambiguous from exact boxes.
NEAR = 1.5
NEAR_MARGIN = 0.1


def _near_ratio(scene: Scene, i: int, j: int) -> float:
    """How far object j's centre is from anchor i's, in i's width and height (the larger of the two ratios)."""
    (xi, yi), (xj, yj) = scene.objects[i].centre, scene.objects[j].centre
    x1, y1, x2, y2 = scene.objects[i].box
    return max(abs(xj - xi) / (x2 - x1), abs(yj - yi) / (y2 - y1))


def _count_near(rng, scene):
    """Counting by relative geometry: "How many objects are next to the X?" (NEAR)."""
    anchors = _unique(scene, lambda o: True)
    if not anchors:
        return None
    i = anchors[int(rng.integers(len(anchors)))]
    ratios = [_near_ratio(scene, i, j) for j in range(len(scene.objects)) if j != i]
    if any(abs(r - NEAR) < NEAR_MARGIN for r in ratios):
        return None
    count = sum(r <= NEAR for r in ratios)
    return f"How many objects are next to the {scene.objects[i].name}?", str(count), "number", "how many next to"


# "what is the leftmost object?": the first and second objects along the axis have centres EXTREME_GAP[0] to
# EXTREME_GAP[1] of the image's width (height) apart: far enough for exact boxes to tell, close enough that the
# features' noisy box (position_noise 0.05 on each side) often does not
EXTREMES = {"leftmost": (0, 1.0), "rightmost": (0, -1.0), "topmost": (1, 1.0), "bottommost": (1, -1.0)}
EXTREME_GAP = (0.02, 0.08)


def _extreme(rng, scene):
    """Absolute position: "What is the leftmost (rightmost, topmost, bottommost) object?" -> its class."""
    word = list(EXTREMES)[int(rng.integers(len(EXTREMES)))]
    axis, sign = EXTREMES[word]
    order = sorted(range(len(scene.objects)), key=lambda k: sign * scene.objects[k].centre[axis])
    first, second = order[0], order[1]
    gap = abs(scene.objects[second].centre[axis] - scene.objects[first].centre[axis])
    if not EXTREME_GAP[0] <= gap / (scene.width, scene.height)[axis] <= EXTREME_GAP[1]:
        return None
    return f"What is the {word} object?", scene.objects[first].cls, "other", "what is the Xmost"


# every question template by name (`question_weights`); ORIGINAL: the seven asked uniformly when it is not set, in
# the order of those draws
TEMPLATES = {
    "what_colour": _what_colour,
    "how_many": _how_many,
    "is_there": _is_there,
    "left_of": _left_of,
    "is_left_of": _is_left_of,
    "count_top": _count_top,
    "on_top": _on_top,
    "is_on": _is_on,
    "count_near": _count_near,
    "extreme": _extreme,
}
ORIGINAL = ("what_colour", "how_many", "is_there", "left_of", "is_left_of", "count_top", "on_top")


def check_weights(weights) -> None:
    """`question_weights`: template names mapped to non-negative numbers, at least one positive."""
    if not isinstance(weights, dict) or not weights:
        raise ReproError(f"generator question_weights must map template names to weights ({', '.join(TEMPLATES)})")
    for name, weight in weights.items():
        if name not in TEMPLATES:
            raise ReproError(f"generator question_weights: unknown template {name!r}; one of {', '.join(TEMPLATES)}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < float("inf"):
            raise ReproError(f"generator question_weights.{name} must be a number >= 0, got {weight!r}")
    if not any(w > 0 for w in weights.values()):
        raise ReproError("generator question_weights: at least one template needs a positive weight")


def object_features(
    rng: np.random.Generator, scene: Scene, projection: np.ndarray, noise: float, position: NoisyPosition | None = None
) -> np.ndarray:
    """Class and colour, projected to feature_dim, plus noise; with `position`, plus a noisy box projected the same
    way. Without it no position: that is in the boxes only."""
    onehot = np.zeros((len(scene.objects), len(CLASSES) + len(COLOURS)), dtype=np.float32)
    for k, o in enumerate(scene.objects):
        onehot[k, CLASSES.index(o.cls)] = 1.0
        onehot[k, len(CLASSES) + COLOURS.index(o.colour)] = 1.0
    features = onehot @ projection
    features += noise * rng.standard_normal(features.shape).astype(np.float32)
    if position is not None:
        features += position(scene)
    return np.maximum(features, 0.0) + 1e-3  # non-negative like ReLU region features, never an all-zero row


class NoisyPosition:
    """The position part of the region features: each box as fractions of the image, plus Gaussian noise of
    `noise` (a fraction of the width or height), mapped to [-1, 1] and projected to feature_dim. Its projection
    and noise come from a stream of their own (seed, 1), so the scenes are those of the position-free data."""

    def __init__(self, seed: int, noise: float, feature_dim: int):
        self.rng = np.random.default_rng([seed, 1])
        self.projection = self.rng.standard_normal((4, feature_dim)).astype(np.float32)
        self.noise = noise

    def __call__(self, scene: Scene) -> np.ndarray:
        size = np.asarray([scene.width, scene.height, scene.width, scene.height], dtype=np.float32)
        boxes = np.asarray([o.box for o in scene.objects], dtype=np.float32) / size
        boxes += self.noise * self.rng.standard_normal(boxes.shape).astype(np.float32)
        return (2.0 * boxes - 1.0) @ self.projection


def noisy_position(cfg: GeneratorConfig) -> NoisyPosition | None:
    """The position part of a generated data set's features, or None where its config sets no `position_noise`."""
    return None if cfg.position_noise is None else NoisyPosition(cfg.seed, cfg.position_noise, cfg.feature_dim)


def _annotator_answers(rng, answer: str, answer_type: str, error: float) -> list[str]:
    pool = {"yes/no": ("yes", "no"), "number": NUMBER_WORDS[:5], "other": CLASSES + COLOURS}[answer_type]
    return [str(rng.choice(pool)) if rng.random() < error else answer for _ in range(10)]


def _draws(cfg: GeneratorConfig):
    """The generator's draws in the order it makes them: per image (train first, then val) its split, image id,
    scene, region features and questions with their annotators' answers. `generate` writes them; `scene_objects`
    replays them, so what a scene holds need not be stored beside the features."""
    rng = np.random.default_rng(cfg.seed)
    projection = rng.standard_normal((len(CLASSES) + len(COLOURS), cfg.feature_dim)).astype(np.float32)
    position = noisy_position(cfg)
    image_id = 0
    for split in SPLITS:
        for _ in range(cfg.train_images if split == "train" else cfg.val_images):
            image_id += 1
            scene = make_scene(rng, cfg)
            features = object_features(rng, scene, projection, cfg.feature_noise, position)
            made = [
                (*q, _annotator_answers(rng, q[1], q[2], cfg.annotator_error))
                for q in make_questions(rng, scene, cfg.questions_per_image, cfg.weights_for(split))
            ]
            yield split, image_id, scene, features, made


def scene_objects(cfg: GeneratorConfig, image_id: int) -> list[SceneObject]:
    """The objects of one generated image, in the order of its boxes (the generator replayed up to it)."""
    for _, at, scene, _, _ in _draws(cfg):
        if at == image_id:
            return scene.objects
    raise KeyError(image_id)


def generate(out_dir: Path, cfg: GeneratorConfig) -> dict[str, Path]:
    """Write questions, annotations and a feature store for train and val into `out_dir`.

    Returns the paths of what was written. Nothing is written if `out_dir/manifest.json` says the
    same configuration was generated already.
    """
    from repro.data.store import FeatureStoreWriter
    from repro.datasets.vqa import write_vqa_layout
    from repro.utils import write_json_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / "manifest.json"
    paths = {
        f"{split}_questions": out_dir / f"v2_OpenEnded_mscoco_{name}_questions.json" for split, name in SPLITS.items()
    }
    paths.update(
        {f"{split}_annotations": out_dir / f"v2_mscoco_{name}_annotations.json" for split, name in SPLITS.items()}
    )
    paths.update({f"{split}_features": out_dir / f"{split}.store" for split in SPLITS})
    if manifest.exists() and same_config(json.loads(manifest.read_text()).get("config"), asdict(cfg)):
        return paths

    next_question = 1
    draws = _draws(cfg)
    for split, name in SPLITS.items():
        n_images = cfg.train_images if split == "train" else cfg.val_images
        questions, annotations = [], []
        with FeatureStoreWriter(
            paths[f"{split}_features"], num_images=n_images, max_boxes=cfg.max_objects, dim=cfg.feature_dim
        ) as store:
            for _ in range(n_images):
                _, image_id, scene, features, made = next(draws)
                boxes = np.asarray([o.box for o in scene.objects], dtype=np.float32)
                store.add(image_id, features, boxes, scene.width, scene.height)
                for question, answer, answer_type, question_type, answers in made:
                    qid = next_question
                    next_question += 1
                    questions.append({"image_id": image_id, "question": question, "question_id": qid})
                    annotations.append(
                        {
                            "question_id": qid,
                            "image_id": image_id,
                            "question_type": question_type,
                            "answer_type": answer_type,
                            "multiple_choice_answer": answer,
                            "answers": [
                                {"answer": a, "answer_confidence": "yes", "answer_id": k + 1}
                                for k, a in enumerate(answers)
                            ],
                        }
                    )
        write_vqa_layout(
            paths[f"{split}_questions"],
            paths[f"{split}_annotations"],
            name,
            questions,
            annotations,
            "repro synthetic scenes",
        )
    write_json_atomic(manifest, {"config": asdict(cfg), "files": sorted(p.name for p in paths.values())})
    return paths


# What each template's answer needs (`mechanism_share`, the family README's share table): where objects are, how
# two touch, or the question's word order, the inputs PWA, POA and PMA make explicit. The other three templates are
# answered from classes and colours alone.
NEEDS_POSITION = frozenset({"left_of", "is_left_of", "count_top", "on_top", "is_on", "count_near", "extreme"})
_TEMPLATE_PATTERNS = (  # a question's text -> the template that wrote it (the texts of two templates never overlap)
    ("what_colour", r"What color is the \w+\?"),
    ("how_many", r"How many \w+ are there\?"),
    ("is_there", r"Is there a \w+ \w+\?"),
    ("left_of", r"What is left of the \w+ \w+\?"),
    ("is_left_of", r"Is the \w+ \w+ left of the \w+ \w+\?"),
    ("count_top", r"How many \w+ are at the top\?"),
    ("on_top", r"What is on the \w+ \w+\?|What is the \w+ \w+ on\?"),
    ("is_on", r"Is the \w+ \w+ on the \w+ \w+\?"),
    ("count_near", r"How many objects are next to the \w+ \w+\?"),
    ("extreme", r"What is the (leftmost|rightmost|topmost|bottommost) object\?"),
)
# a VQA v2 column's answer type (`repro.metrics.vqa`'s keys); None: every question
COLUMN_ANSWER_TYPES = {"yes/no": "yes/no", "number": "number", "other": "other", "overall": None}


def template_of(question: str) -> str:
    """The template (TEMPLATES) that wrote a generated question."""
    import re

    found = [name for name, pattern in _TEMPLATE_PATTERNS if re.fullmatch(pattern, question)]
    if len(found) != 1:
        raise ValueError(f"not one template's question: {question!r} ({found or 'none'})")
    return found[0]


def mechanism_share(cfg: GeneratorConfig, columns: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Per column (name -> its VQA key: yes/no, number, other, overall): the val questions it scores (the
    evaluation split of `repro run --scale synthetic`, drawn as `generate` draws it) and how many of them come
    from a template in NEEDS_POSITION: {column: (N, needing)}."""
    kinds = [(q[2], template_of(q[0])) for split, *_, made in _draws(cfg) if split == "val" for q in made]
    out = {}
    for name, key in columns.items():
        wanted = COLUMN_ANSWER_TYPES[key]
        scored = [template for answer_type, template in kinds if wanted in (None, answer_type)]
        out[name] = (len(scored), sum(template in NEEDS_POSITION for template in scored))
    return out
