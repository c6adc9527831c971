"""Synthetic 3-D scenes for `dsganet`: a task where depth, 3-D relations and question-specific relations matter.

Each image is a scene of objects with a class, a colour, a box and a depth (a gray value of the depth
map, 0 = at the camera, 255 = far). Box sizes and positions are drawn independently of depth, so the
boxes say nothing about which object is closer; depth reaches a model only through the depth map, as
DSGANet reads it: a coarse depth map is rendered (background, then the objects from far to near, with
noise), and the 16-bin histograms of each box and grid cell are computed from it by the same code as
for real depth maps (`repro.datasets.depth`). Region features encode class and colour only.

Questions, in the three VQA v2 answer types:

- controls (no relation): "what color is the cone?", "how many cubes are there?", "is there a red cube?"
- depth order: "which is closer to the camera, the red cube or the blue cone?", "is the red cube closer to the
  camera than the blue cone?", "what is the closest object?"
- 3-D relations: "what is behind the red cube?", "what is in front of the red cube?" (overlapping in x, the
  nearest in depth behind / in front), "how many objects are behind the red cube?"
- 2-D relations (bbox only): "what is left of the red cube?" and, where `templates` names it, "what is right of
  the red cube?"

`templates` chooses the question makers of a task and `template_weights` how often each is drawn (a task mix that
asks the mechanism's question more often); without them the ten default makers are drawn equally often.

Questions about depth are asked only where the depth gap is at least `min_depth_gap` gray values, so the
answer is determined. The generator is seeded and deterministic and writes the official VQA v2 files and,
per split, an object store (`<split>.store`) and a grid store (`<split>.grid.store`, `grid_rows` x
`grid_cols` cells), both with the depth extras `depth_hist`, `depth_peak`, `depth_mean` (mean gray value
inside the peak bin) and `depth_mode` (most frequent gray value).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from repro.data.generated import same_config
from repro.errors import ReproError
from repro.families.base import GeneratorSettings

CLASSES = ("cube", "sphere", "cylinder", "cone", "torus", "ring")
PLURALS = {
    "cube": "cubes",
    "sphere": "spheres",
    "cylinder": "cylinders",
    "cone": "cones",
    "torus": "tori",
    "ring": "rings",
}
COLOURS = ("red", "green", "blue", "yellow", "purple", "gray")
NUMBER_WORDS = ("0", "1", "2", "3", "4", "5", "6", "7", "8")
SPLITS = {"train": "train2014", "val": "val2014"}
MAP_SHAPE = (48, 64)  # rendered depth map (H, W); boxes are scaled to it as for real maps of another size


@dataclass(frozen=True)
class GeneratorConfig(GeneratorSettings):
    """What a synthetic dataset is made of. Changing any field changes the data (and its folder)."""

    seed: int = 0
    train_images: int = 1200
    val_images: int = 300
    questions_per_image: int = 6
    min_objects: int = 3
    max_objects: int = 7
    feature_dim: int = 64
    feature_noise: float = 0.3
    depth_noise: float = 6.0  # std of the per-pixel noise of the depth map, in gray values
    min_depth_gap: float = 40.0  # gray values between objects compared by a depth question
    grid_rows: int = 4
    grid_cols: int = 6
    annotator_error: float = 0.1
    # the question makers asked (names in TEMPLATES), for a task built around some of them (a positive control:
    # only depth questions); empty, the default: the ten of MAKERS
    templates: tuple[str, ...] = ()
    # how often each of those makers is drawn, relative to the others (one weight per name of `templates`, or per
    # maker of MAKERS when `templates` is empty): a task mix that asks some questions more often; empty, the
    # default: each equally often, drawn as before (the files of a spec without it stay byte for byte the same)
    template_weights: tuple[float, ...] = ()

    def check(self) -> None:
        unknown = sorted(set(self.templates) - set(TEMPLATES))
        if unknown:
            raise ReproError(
                f"dsganet generator: unknown template(s) {', '.join(unknown)}; known: {', '.join(TEMPLATES)}"
            )
        if len(set(self.templates)) != len(self.templates):
            raise ReproError("dsganet generator: a template is named twice in templates (weigh it instead)")
        if self.template_weights:
            asked = len(self.templates) or len(MAKERS)
            if len(self.template_weights) != asked:
                raise ReproError(
                    f"dsganet generator: template_weights has {len(self.template_weights)} weights for {asked} "
                    f"templates ({', '.join(self.asked())})"
                )
            if any(not w >= 0 for w in self.template_weights) or not sum(self.template_weights) > 0:
                raise ReproError("dsganet generator: template_weights must be numbers >= 0 with a positive sum")

    def asked(self) -> tuple[str, ...]:
        """The names of the question makers drawn from, in the order `template_weights` weighs them."""
        return tuple(self.templates) or tuple(m.__name__.lstrip("_") for m in MAKERS)


@dataclass
class SceneObject:
    cls: str
    colour: str
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels
    depth: float  # gray value of the object's surface, 0..255

    @property
    def name(self) -> str:
        return f"{self.colour} {self.cls}"

    @property
    def centre_x(self) -> float:
        return (self.box[0] + self.box[2]) / 2


@dataclass
class Scene:
    width: int
    height: int
    objects: list[SceneObject]


def make_scene(rng: np.random.Generator, cfg: GeneratorConfig) -> Scene:
    width, height = int(rng.integers(320, 641)), int(rng.integers(240, 481))
    count = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    objects = []
    for _ in range(count):
        w, h = rng.uniform(0.12, 0.3) * width, rng.uniform(0.12, 0.3) * height
        x1, y1 = rng.uniform(0, width - w), rng.uniform(0, height - h)
        objects.append(
            SceneObject(
                str(rng.choice(CLASSES)),
                str(rng.choice(COLOURS)),
                (x1, y1, x1 + w, y1 + h),
                float(rng.uniform(20, 200)),
            )
        )
    return Scene(width, height, objects)


def render_depth(rng: np.random.Generator, scene: Scene, noise: float) -> np.ndarray:
    """A uint8 depth map of MAP_SHAPE: a far background (brighter at the top), objects painted far to near."""
    mh, mw = MAP_SHAPE
    depth = np.linspace(250, 215, mh)[:, None].repeat(mw, 1)
    sx, sy = mw / scene.width, mh / scene.height
    for o in sorted(scene.objects, key=lambda o: -o.depth):
        x1, y1 = int(np.floor(o.box[0] * sx)), int(np.floor(o.box[1] * sy))
        x2, y2 = max(int(np.ceil(o.box[2] * sx)), x1 + 1), max(int(np.ceil(o.box[3] * sy)), y1 + 1)
        depth[y1:y2, x1:x2] = o.depth
    depth = depth + noise * rng.standard_normal(depth.shape)
    return np.clip(np.round(depth), 0, 255).astype(np.uint8)


def depth_readings(depth: np.ndarray, regions: np.ndarray, bins: int = 16) -> dict[str, np.ndarray]:
    """Histogram, peak bin, mean gray value inside the peak bin and most frequent gray value per region."""
    from repro.datasets.depth import region_readings

    r = region_readings(depth, regions, bins)
    return {**r, "depth_hist": r["depth_hist"].astype(np.float16), "depth_peak": r["depth_peak"].astype(np.uint8)}


# --- questions -----------------------------------------------------------------------------------


def _unique(scene: Scene) -> list[int]:
    names = [o.name for o in scene.objects]
    return [i for i, n in enumerate(names) if names.count(n) == 1]


def _what_colour(rng, scene, cfg):
    classes = [c for c in CLASSES if sum(o.cls == c for o in scene.objects) == 1]
    if not classes:
        return None
    cls = str(rng.choice(classes))
    return (
        f"What color is the {cls}?",
        next(o.colour for o in scene.objects if o.cls == cls),
        "other",
        "what color is the",
    )


def _how_many(rng, scene, cfg):
    cls = str(rng.choice(CLASSES))
    return f"How many {PLURALS[cls]} are there?", str(sum(o.cls == cls for o in scene.objects)), "number", "how many"


def _is_there(rng, scene, cfg):
    if rng.random() < 0.5:
        name = scene.objects[int(rng.integers(len(scene.objects)))].name
    else:
        name = f"{rng.choice(COLOURS)} {rng.choice(CLASSES)}"
    return f"Is there a {name}?", "yes" if any(o.name == name for o in scene.objects) else "no", "yes/no", "is there a"


def _pair(rng, scene, cfg, distinct_classes: bool):
    named = _unique(scene)
    pairs = [
        (a, b)
        for a in named
        for b in named
        if a != b
        and abs(scene.objects[a].depth - scene.objects[b].depth) >= cfg.min_depth_gap
        and (not distinct_classes or scene.objects[a].cls != scene.objects[b].cls)
    ]
    return pairs[int(rng.integers(len(pairs)))] if pairs else None


def _which_closer(rng, scene, cfg):
    pair = _pair(rng, scene, cfg, distinct_classes=True)
    if pair is None:
        return None
    a, b = (scene.objects[i] for i in pair)
    answer = a.cls if a.depth < b.depth else b.cls
    return f"Which is closer to the camera, the {a.name} or the {b.name}?", answer, "other", "which is"


def _is_closer(rng, scene, cfg):
    pair = _pair(rng, scene, cfg, distinct_classes=False)
    if pair is None:
        return None
    a, b = (scene.objects[i] for i in pair)
    answer = "yes" if a.depth < b.depth else "no"
    return f"Is the {a.name} closer to the camera than the {b.name}?", answer, "yes/no", "is the"


def _closest(rng, scene, cfg):
    order = sorted(scene.objects, key=lambda o: o.depth)
    if len(order) < 2 or order[1].depth - order[0].depth < cfg.min_depth_gap:
        return None
    return "What is the closest object?", order[0].cls, "other", "what is the"


def _overlap_x(a: SceneObject, b: SceneObject) -> bool:
    return min(a.box[2], b.box[2]) - max(a.box[0], b.box[0]) > 0


def _behind_or_front(rng, scene, cfg, behind: bool):
    anchors = []
    for i in _unique(scene):
        a = scene.objects[i]
        sign = 1 if behind else -1
        cands = sorted(
            (sign * (o.depth - a.depth), j)
            for j, o in enumerate(scene.objects)
            if j != i and _overlap_x(a, o) and sign * (o.depth - a.depth) > 0
        )
        if not cands or cands[0][0] < cfg.min_depth_gap:
            continue
        if len(cands) > 1 and cands[1][0] - cands[0][0] < cfg.min_depth_gap / 2:
            continue
        anchors.append((i, cands[0][1]))
    if not anchors:
        return None
    i, j = anchors[int(rng.integers(len(anchors)))]
    where = "behind" if behind else "in front of"
    return f"What is {where} the {scene.objects[i].name}?", scene.objects[j].cls, "other", f"what is {where} the"


def _behind(rng, scene, cfg):
    return _behind_or_front(rng, scene, cfg, True)


def _in_front(rng, scene, cfg):
    return _behind_or_front(rng, scene, cfg, False)


def _count_behind(rng, scene, cfg):
    named = _unique(scene)
    ok = [
        i
        for i in named
        if all(
            abs(o.depth - scene.objects[i].depth) >= cfg.min_depth_gap / 2
            for j, o in enumerate(scene.objects)
            if j != i
        )
    ]
    if not ok:
        return None
    i = ok[int(rng.integers(len(ok)))]
    count = sum(o.depth > scene.objects[i].depth for j, o in enumerate(scene.objects) if j != i)
    return f"How many objects are behind the {scene.objects[i].name}?", str(count), "number", "how many"


def _left_of(rng, scene, cfg):
    return _beside(rng, scene, "left")


def _right_of(rng, scene, cfg):
    return _beside(rng, scene, "right")


def _beside(rng, scene, side: str):
    """ "What is <side> of the A?": the object whose box centre is the nearest to A's on that side, asked only where
    the next nearest is at least 5% of the image width further (so the answer is determined)."""
    sign = 1 if side == "left" else -1
    anchors = []
    for i in _unique(scene):
        x = scene.objects[i].centre_x
        near = sorted(
            (sign * (x - o.centre_x), j) for j, o in enumerate(scene.objects) if j != i and sign * (x - o.centre_x) > 0
        )
        if near and (len(near) == 1 or near[1][0] - near[0][0] >= 0.05 * scene.width):
            anchors.append((i, near[0][1]))
    if not anchors:
        return None
    i, j = anchors[int(rng.integers(len(anchors)))]
    return f"What is {side} of the {scene.objects[i].name}?", scene.objects[j].cls, "other", f"what is {side} of the"


MAKERS = (
    _what_colour,
    _how_many,
    _is_there,
    _which_closer,
    _is_closer,
    _closest,
    _behind,
    _in_front,
    _count_behind,
    _left_of,
)


# MAKERS are the default task's ten; the others are asked only where `templates` names them
TEMPLATES = {maker.__name__.lstrip("_"): maker for maker in (*MAKERS, _right_of)}


def make_questions(rng: np.random.Generator, scene: Scene, n: int, cfg: GeneratorConfig):
    """Up to `n` distinct questions as (question, answer, answer_type, question_type)."""
    makers = tuple(TEMPLATES[name] for name in cfg.asked())
    weights = np.asarray(cfg.template_weights, dtype=np.float64) if cfg.template_weights else None
    out: list[tuple[str, str, str, str]] = []
    for _ in range(n * 4):
        if len(out) == n:
            break
        pick = (
            int(rng.integers(len(makers)))
            if weights is None
            else int(rng.choice(len(makers), p=weights / weights.sum()))
        )
        made = makers[pick](rng, scene, cfg)
        if made is not None and made[0] not in {q for q, *_ in out}:
            out.append(made)
    return out


def _annotator_answers(rng, answer: str, answer_type: str, error: float) -> list[str]:
    pool = {"yes/no": ("yes", "no"), "number": NUMBER_WORDS[:6], "other": CLASSES + COLOURS}[answer_type]
    return [str(rng.choice(pool)) if rng.random() < error else answer for _ in range(10)]


# --- writing -------------------------------------------------------------------------------------


def _features(rng, onehots: np.ndarray, projection: np.ndarray, noise: float) -> np.ndarray:
    features = onehots @ projection + noise * rng.standard_normal((len(onehots), projection.shape[1]))
    return (np.maximum(features, 0.0) + 1e-3).astype(np.float32)  # like ReLU features, never an all-zero row


def _onehot(o: SceneObject) -> np.ndarray:
    v = np.zeros(len(CLASSES) + len(COLOURS) + 1, np.float32)
    v[CLASSES.index(o.cls)] = 1.0
    v[len(CLASSES) + COLOURS.index(o.colour)] = 1.0
    return v


def generate(out_dir: Path, cfg: GeneratorConfig) -> dict[str, Path]:
    """Write questions, annotations, an object and a grid feature store (with depth extras) for train and val.

    Nothing is written if `out_dir/manifest.json` says the same configuration was generated already."""
    from repro.data.store import FeatureStore, FeatureStoreWriter
    from repro.datasets.depth import box_regions, grid_regions
    from repro.datasets.vqa import write_vqa_layout
    from repro.utils import write_json_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / "manifest.json"
    paths = {f"{s}_questions": out_dir / f"v2_OpenEnded_mscoco_{n}_questions.json" for s, n in SPLITS.items()}
    paths.update({f"{s}_annotations": out_dir / f"v2_mscoco_{n}_annotations.json" for s, n in SPLITS.items()})
    paths.update({f"{s}_features": out_dir / f"{s}.store" for s in SPLITS})
    paths.update({f"{s}_grid_features": out_dir / f"{s}.grid.store" for s in SPLITS})
    if manifest.exists() and same_config(json.loads(manifest.read_text()).get("config"), asdict(cfg)):
        return paths

    rng = np.random.default_rng(cfg.seed)
    projection = rng.standard_normal((len(CLASSES) + len(COLOURS) + 1, cfg.feature_dim)).astype(np.float32)
    background = np.zeros(len(CLASSES) + len(COLOURS) + 1, np.float32)
    background[-1] = 1.0
    cells = cfg.grid_rows * cfg.grid_cols
    next_image, next_question = 1, 1
    for split, name in SPLITS.items():
        n_images = cfg.train_images if split == "train" else cfg.val_images
        questions, annotations = [], []
        extras = {"objects": _empty_extras(n_images, cfg.max_objects), "grids": _empty_extras(n_images, cells)}
        with (
            FeatureStoreWriter(
                paths[f"{split}_features"], num_images=n_images, max_boxes=cfg.max_objects, dim=cfg.feature_dim
            ) as objects,
            FeatureStoreWriter(
                paths[f"{split}_grid_features"], num_images=n_images, max_boxes=cells, dim=cfg.feature_dim
            ) as grids,
        ):
            for row in range(n_images):
                image_id, next_image = next_image, next_image + 1
                scene = make_scene(rng, cfg)
                depth = render_depth(rng, scene, cfg.depth_noise)
                boxes = np.asarray([o.box for o in scene.objects], np.float32)
                onehots = np.stack([_onehot(o) for o in scene.objects])
                objects.add(
                    image_id, _features(rng, onehots, projection, cfg.feature_noise), boxes, scene.width, scene.height
                )
                _fill(
                    extras["objects"],
                    row,
                    depth_readings(depth, box_regions(boxes.astype(np.float64), scene.width, scene.height, MAP_SHAPE)),
                )
                # grid cells: the features of the nearest object covering the cell centre, else background
                pixel_cells = grid_regions((scene.height, scene.width), cfg.grid_rows, cfg.grid_cols)
                cell_onehots = []
                for x1, y1, x2, y2 in pixel_cells:
                    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
                    cover = [o for o in scene.objects if o.box[0] <= cx < o.box[2] and o.box[1] <= cy < o.box[3]]
                    cell_onehots.append(_onehot(min(cover, key=lambda o: o.depth)) if cover else background)
                grids.add(
                    image_id,
                    _features(rng, np.stack(cell_onehots), projection, cfg.feature_noise),
                    pixel_cells.astype(np.float32),
                    scene.width,
                    scene.height,
                )
                _fill(
                    extras["grids"], row, depth_readings(depth, grid_regions(MAP_SHAPE, cfg.grid_rows, cfg.grid_cols))
                )
                for question, answer, answer_type, question_type in make_questions(
                    rng, scene, cfg.questions_per_image, cfg
                ):
                    qid, next_question = next_question, next_question + 1
                    questions.append({"image_id": image_id, "question": question, "question_id": qid})
                    answers = _annotator_answers(rng, answer, answer_type, cfg.annotator_error)
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
        info = {"source": "repro dsganet synthetic depth map", "bins": 16}
        for kind, store in (("objects", paths[f"{split}_features"]), ("grids", paths[f"{split}_grid_features"])):
            for key, array in extras[kind].items():
                FeatureStore.write_extra(store, key, array, info)
        write_vqa_layout(
            paths[f"{split}_questions"],
            paths[f"{split}_annotations"],
            name,
            questions,
            annotations,
            "repro synthetic 3-D scenes",
        )
    write_json_atomic(manifest, {"config": asdict(cfg), "files": sorted(p.name for p in paths.values())})
    return paths


def _empty_extras(n: int, boxes: int) -> dict[str, np.ndarray]:
    return {
        "depth_hist": np.zeros((n, boxes, 16), np.float16),
        "depth_peak": np.zeros((n, boxes), np.uint8),
        "depth_mean": np.zeros((n, boxes), np.float32),
        "depth_mode": np.zeros((n, boxes), np.float32),
    }


def _fill(extras: dict[str, np.ndarray], row: int, readings: dict[str, np.ndarray]) -> None:
    for key, value in readings.items():
        extras[key][row, : len(value)] = value[: extras[key].shape[1]]


# --- official-layout fixtures for the statistics tables (Tables II and III at smoke scale) ---------

# VQA v2: (COCO image id, questions) per split; test-dev2015 is the questions of the first test image.
STATS_VQA = {
    "train": [(9, 3), (25, 3), (30, 3), (34, 3)],
    "val": [(42, 3), (73, 3)],
    "test": [(1, 2), (19, 2), (27, 2)],
}
# GQA balanced: (imageId, questions) per split, with repeated words and a question asked twice.
STATS_GQA = {
    "train": [
        ("2370001", ["Is the cup red?", "What is on the table?"]),
        ("2370002", ["Is the cup red?", "Who is wearing the hat?"]),
        ("2370003", ["What color is the car?", "Is the car behind the tree?"]),
    ],
    "val": [
        ("2410001", ["Is the dog small?", "What is under the table?"]),
        ("2410002", ["Is the dog small?", "Are there any cats?"]),
    ],
    "test-dev": [("n161313", ["Is the sky blue?", "What is the man holding?", "Is the man tall?"])],
    "test": [("n100001", ["Is it sunny?"]), ("n100002", ["What is near the bench?"])],
}


def write_stats_fixture(dataset: str, out_dir: Path) -> Path:
    """Tiny question (and annotation) files of `dataset` (vqa2 or gqa) in the official layouts."""
    from repro.datasets.gqa import BALANCED_FILES
    from repro.datasets.vqa import VQA_FILES, write_vqa_layout
    from repro.utils import write_json_atomic

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if dataset == "vqa2":
        subtypes = {"train": "train2014", "val": "val2014", "test": "test2015"}
        for split, images in STATS_VQA.items():
            qname, aname = VQA_FILES["vqa2"][split]
            questions, annotations = [], []
            for image_id, count in images:
                for k in range(count):
                    qid = image_id * 1000 + k
                    questions.append(
                        {"image_id": image_id, "question": f"Is there a cat number {k}?", "question_id": qid}
                    )
                    answers = [{"answer": "yes", "answer_confidence": "yes", "answer_id": i + 1} for i in range(10)]
                    annotations.append(
                        {
                            "question_id": qid,
                            "image_id": image_id,
                            "question_type": "is there a",
                            "answer_type": "yes/no",
                            "multiple_choice_answer": "yes",
                            "answers": answers,
                        }
                    )
            if aname is None:
                info = {"info": {"description": "fixture"}, "data_subtype": subtypes[split], "task_type": "Open-Ended"}
                write_json_atomic(out_dir / qname, {**info, "questions": questions}, compact=True)
                dev = [q for q in questions if q["image_id"] == images[0][0]]
                write_json_atomic(out_dir / VQA_FILES["vqa2"]["test-dev"][0], {**info, "questions": dev}, compact=True)
            else:
                write_vqa_layout(out_dir / qname, out_dir / aname, subtypes[split], questions, annotations, "fixture")
        return out_dir
    if dataset == "gqa":
        n = 0
        for split, images in STATS_GQA.items():
            records = {}
            for image_id, texts in images:
                for text in texts:
                    n += 1
                    record = {
                        "imageId": image_id,
                        "question": text,
                        "isBalanced": True,
                        "types": {
                            "structural": "verify" if text.startswith(("Is", "Are")) else "query",
                            "semantic": "attr",
                            "detailed": "fixture",
                        },
                        "groups": {"global": None, "local": "fixture"},
                        "entailed": [],
                        "equivalent": [],
                        "semantic": [],
                        "semanticStr": "",
                    }
                    if split != "test":
                        answer = "yes" if text.startswith(("Is", "Are")) else "table"
                        record.update(answer=answer, fullAnswer=f"{answer}.", annotations={})
                    records[f"{n:08d}"] = record
            write_json_atomic(out_dir / BALANCED_FILES[split], records, compact=True)
        return out_dir
    raise ValueError(f"no statistics fixture for {dataset!r}")


# What each template's answer needs (`mechanism_share`, the family README's share table). Depth: the six templates
# open to a row only through the depth readings (DAA-Depth). Relations: those that name how two objects stand, in
# depth or in the image plane (SGA's R^spatial). 2-D relations: those decided by two boxes alone (DAA-Bbox, Eq. 3).
# The controls (colour, count, "is there") need none of them.
MECHANISMS = {
    "depth": frozenset({"which_closer", "is_closer", "closest", "behind", "in_front", "count_behind"}),
    "relations": frozenset({"behind", "in_front", "count_behind", "left_of", "right_of"}),
    "2-D relations": frozenset({"left_of", "right_of"}),
}
_TEMPLATE_PATTERNS = (  # a question's text -> the template that wrote it (the texts of two templates never overlap)
    ("what_colour", r"What color is the \w+\?"),
    ("how_many", r"How many \w+ are there\?"),
    ("is_there", r"Is there a \w+ \w+\?"),
    ("which_closer", r"Which is closer to the camera, the \w+ \w+ or the \w+ \w+\?"),
    ("is_closer", r"Is the \w+ \w+ closer to the camera than the \w+ \w+\?"),
    ("closest", r"What is the closest object\?"),
    ("behind", r"What is behind the \w+ \w+\?"),
    ("in_front", r"What is in front of the \w+ \w+\?"),
    ("count_behind", r"How many objects are behind the \w+ \w+\?"),
    ("left_of", r"What is left of the \w+ \w+\?"),
    ("right_of", r"What is right of the \w+ \w+\?"),
)


def template_of(question: str) -> str:
    """The template (TEMPLATES) that wrote a generated question."""
    import re

    found = [name for name, pattern in _TEMPLATE_PATTERNS if re.fullmatch(pattern, question)]
    if len(found) != 1:
        raise ValueError(f"not one template's question: {question!r} ({found or 'none'})")
    return found[0]


def mechanism_share(cfg: GeneratorConfig) -> dict[str, dict[str, tuple[int, int]]]:
    """The val questions (the evaluation split of `repro run --scale synthetic`, written by `generate` into a
    temporary folder), all of them ("overall") and the "Rel." column's ("rel": `rel.rel_questions` with the generated
    scale's phrases), and per mechanism of MECHANISMS how many come from its templates:
    {"overall" | "rel": {mechanism: (N, needing)}}."""
    import tempfile

    from repro.families.dsganet import rel

    with tempfile.TemporaryDirectory() as folder:
        paths = generate(Path(folder), cfg)
        questions = json.loads(paths["val_questions"].read_text())["questions"]
        subset = rel.rel_questions(paths["val_questions"], rel.rel_phrases("synthetic")[0])
    kinds = [(template_of(q["question"]), int(q["question_id"]) in subset) for q in questions]
    out = {}
    for column, chosen in (("overall", kinds), ("rel", [k for k in kinds if k[1]])):
        out[column] = {
            name: (len(chosen), sum(kind in templates for kind, _ in chosen)) for name, templates in MECHANISMS.items()
        }
    return out
