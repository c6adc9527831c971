"""Generated downstream data for the ace-rpe family: part 1's shape scenes (`synthetic.py`) asked about
in the json layouts of ALBEF's VQA, SNLI-VE, NLVR2 and RefCOCO+ files (`tasks_data.py` reads them).

- VQA: "is there a red square left of a blue circle" (yes/no; the "no" questions flip a true
  relation or, with share `absent_share`, name an object the image does not show) and "what is left
  of the blue circle" (the colour and shape of the object there, an answer of two words); with
  `vqa_next_only` only "is the red square next to the blue circle"; ten annotator answers, each the
  true answer with probability 0.9;
- SNLI-VE: a relational statement is entailed (true in the scene), contradicted (the two objects
  are there, the relation is reversed) or neutral (it names an object the image does not show;
  none with `ve_relation_only`; with `ve_distance` the relation is "next to" or "far from");
- NLVR2: "the left image shows a red square left of a blue circle" (or the right image) over two
  scenes, True or False (false: the relation reversed or, with share `absent_share`, an object
  neither image shows; with `nlvr_next_only` "... shows a red square next to a blue circle", the
  other image showing neither);
- grounding: "the red square left of the blue circle" (with `context_shape_only`, "... of the circle")
  names the first object; RefCOCO+'s refer
  annotations (`refs(unc).p`, `instances.json`) give its box and split, `dets.json` the proposals
  (every object's box, a little off, and random boxes).

Files under the root (a folder of its own, so part 1's data is unchanged):

  images/<task>_<split>/<n>.png|jpg     the scenes (SNLI-VE's as <id>.jpg: ALBEF appends .jpg)
  vqa_train.json, vqa_test.json, answer_list.json, vqa_test_answers.json (the server's gold, generated only)
  vqa2/v2_OpenEnded_mscoco_test2015_questions.json   the test2015 questions as the server lists them
  ve_train.json, ve_dev.json, ve_test.json
  nlvr_train.json, nlvr_dev.json, nlvr_test.json      (test = test-P)
  refcoco+_train.json, refcoco+_val.json, refcoco+_test.json, refcoco+/dets.json, refcoco+/cocos.json,
  refcoco+/refs(unc).p, refcoco+/instances.json
  vocab/vocab.txt                                     part 1's words and these tasks' words
"""

from __future__ import annotations

import json
import pickle
import random
from dataclasses import dataclass
from pathlib import Path

from repro.errors import ReproError
from repro.families.ace_rpe.synthetic import (
    COLOURS,
    DISTANCE_WORDS,
    SHAPES,
    SPECIALS,
    TASK_WORDS,
    _draw,
    _relation,
    _scene,
    distance,
    vocabulary,
)
from repro.families.base import GeneratorSettings
from repro.utils import write_json_atomic

TEST_DEV_SHARE = 0.5  # the first half of the generated test2015 questions form test-dev


@dataclass(frozen=True)
class TaskGeneratorConfig(GeneratorSettings):
    seed: int = 0
    image_size: int = 32
    grid: int = 2
    objects: int = 3
    train_items: int = 16  # training questions / pairs / statements / expressions per task
    test_items: int = 8  # per evaluation split
    annotators: int = 10  # VQA answers per question
    # the share of VQA's "no" questions and NLVR2's false statements that name an object the image does not show
    # (the others reverse a true relation); 0 draws nothing for it, so older configs give the same files
    absent_share: float = 0.0
    # NLVR2's scenes too hold objects told apart by colour and shape (VQA's, SNLI-VE's and RefCOCO+'s always do):
    # with two alike objects "a red square left of a red square" is true whichever way it is said
    distinct_nlvr: bool = False
    # SNLI-VE without neutral statements: entailed or reversed, half each, so only where the objects are decides
    # (the positive control of the position embeddings)
    ve_relation_only: bool = False
    # SNLI-VE's statements say how far apart the two objects are rather than which way one stands from the other:
    # "a X next to a Y" (neighbouring cells, diagonals included) or "a X far from a Y" (any other cells), the
    # entailed one true in the scene, the contradicted one the other, the two objects next to each other in half
    # the items of each label (so neither the words nor the scene alone tell the label); what ACE-RPE's anchor-based
    # relative position (Eq. 7: a grid distance, no direction) encodes. Its words join the vocabulary only when on
    ve_distance: bool = False
    # with `ve_distance`, every statement says "next to": entailed when the two objects are neighbours, contradicted
    # when not, half each. The label is then one fact of the scene (how far apart the two named objects are) rather
    # than that fact and the statement's word together, which is a parity of two facts that neither tells alone
    ve_next_only: bool = False
    # VQA asks only "is the X next to the Y" (yes / no, half each): the image shows both objects, in neighbouring
    # cells exactly in the "yes" items, so the answer is one fact of the scene that neither the words (all alike)
    # nor which shapes are there tell; what ACE-RPE's relative position (Eq. 7) encodes. Its words join the vocabulary
    vqa_next_only: bool = False
    # NLVR2 says only "the left / right image shows a X next to a Y": the image it names shows both objects (True
    # exactly when they are neighbours, half each) and the other image neither, so which shapes are there tells
    # which image is meant and where they are tells the label. (Both images showing both would make the label the
    # parity of the side said and the scenes, which no row learns at this size: the ace-rpe README)
    nlvr_next_only: bool = False
    # grounding expressions name their object in full and the one it stands beside by its shape alone ("the red
    # square left of the circle"), so more of the words point at the object referred to than at the other
    context_shape_only: bool = False

    def check(self) -> None:
        if self.objects < 2 or self.objects > self.grid * self.grid:
            raise ReproError(f"task generator: objects must be 2..grid^2 ({self.grid**2}), got {self.objects}")
        if min(self.train_items, self.test_items, self.annotators) < 1:
            raise ReproError("task generator: item and annotator counts must be at least 1")
        if not 0.0 <= self.absent_share <= 1.0:
            raise ReproError(f"task generator: absent_share must be within [0, 1], got {self.absent_share}")
        if self.ve_distance and self.grid < 3:  # no two cells of a 2 x 2 grid are far apart: no "far" scene exists
            raise ReproError(f"task generator: ve_distance needs a grid of 3 or more, got {self.grid}")
        if self.ve_next_only and not (self.ve_distance and self.ve_relation_only):
            raise ReproError("task generator: ve_next_only needs ve_distance and ve_relation_only")
        for name in ("vqa_next_only", "nlvr_next_only"):
            if getattr(self, name) and self.grid < 3:
                raise ReproError(f"task generator: {name} needs a grid of 3 or more, got {self.grid}")

    @property
    def distance_words(self) -> bool:
        """Whether any task says "next to" or "far from" (their words then join the vocabulary)."""
        return self.ve_distance or self.vqa_next_only or self.nlvr_next_only


DISTANCES = {"next to": "far from", "far from": "next to"}  # `ve_distance`'s relations and their opposites


def task_vocabulary(cfg: TaskGeneratorConfig | None = None) -> list[str]:
    words = set(vocabulary()[len(SPECIALS) :]) | set(TASK_WORDS)
    if cfg is not None and cfg.distance_words:
        words |= set(DISTANCE_WORDS)
    return SPECIALS + sorted(words)


def answer_list() -> list[str]:
    return ["yes", "no"] + [f"{c} {s}" for c in COLOURS for s in SHAPES]


def _name(obj) -> str:
    return f"{obj[0]} {obj[1]}"


def _box(obj, cfg: TaskGeneratorConfig) -> list[float]:
    """The object's [x, y, w, h] in pixels (the drawn shape: its cell less 15 % on each side)."""
    cell = cfg.image_size / cfg.grid
    return [obj[3] * cell + 0.15 * cell, obj[2] * cell + 0.15 * cell, 0.7 * cell, 0.7 * cell]


class _Writer:
    def __init__(self, root: Path, cfg: TaskGeneratorConfig, images: bool = True) -> None:
        self.root, self.cfg, self.rng, self.images = root, cfg, random.Random(cfg.seed), images
        self.scenes: dict[str, list] = {}  # every image written: its path under root -> its objects

    def scene(self, folder: str, n: int, ext: str = "png") -> tuple[str, list]:
        scene = _scene(self.rng, self.cfg)
        rel = f"images/{folder}/{n}.{ext}"
        if self.images:  # drawing takes no random draws: the files' items are the same without it
            _draw(scene, self.cfg, self.root / rel)
        self.scenes[rel] = scene
        return rel, scene

    def distinct_scene(self, folder: str, n: int, ext: str = "png", avoid: frozenset = frozenset()) -> tuple[str, list]:
        """A scene whose objects are told apart by colour and shape (a name picks one object), none of them named
        in `avoid`."""
        while True:
            scene = _scene(self.rng, self.cfg)
            names = {_name(o) for o in scene}
            if len(names) == len(scene) and not names & avoid:
                rel = f"images/{folder}/{n}.{ext}"
                if self.images:
                    _draw(scene, self.cfg, self.root / rel)
                self.scenes[rel] = scene
                return rel, scene

    def relation(self, scene) -> tuple[tuple, str, tuple]:
        a, b = self.rng.sample(scene, 2)
        return a, _relation(a, b), b

    def names_absent(self) -> bool:
        """Whether a false statement names an absent object (`absent_share`) rather than reversing the relation."""
        return self.cfg.absent_share > 0 and self.rng.random() < self.cfg.absent_share

    def absent(self, *scenes) -> tuple[str, str]:
        """A colour and shape that none of the scenes shows."""
        shown = {_name(o) for scene in scenes for o in scene}
        return self.rng.choice([(c, s) for c in COLOURS for s in SHAPES if f"{c} {s}" not in shown])


REVERSED = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


def _vqa(w: _Writer, split: str, count: int, first_id: int) -> list[dict]:
    out = []
    for n in range(count):
        if w.cfg.vqa_next_only:  # the two objects neighbours in every second question: "yes" there, "no" elsewhere
            near = n % 2 == 0
            rel, _, a, b = _distance_scene(w, f"vqa_{split}", n, near=near, ext="png")
            question, answer = f"is the {_name(a)} next to the {_name(b)}", "yes" if near else "no"
        else:
            question, answer, rel = _vqa_relation(w, split, n)
        entry = {"question_id": first_id + n, "question": question, "image": rel, "dataset": "vqa"}
        answers = [answer if w.rng.random() < 0.9 else w.rng.choice(answer_list()) for _ in range(w.cfg.annotators)]
        out.append({**entry, "answer": answers})
    return out


def _vqa_relation(w: _Writer, split: str, n: int) -> tuple[str, str, str]:
    """Half "is there a X rel a Y" (yes / no), half "what is rel the Y": (question, answer, image)."""
    rel, scene = w.distinct_scene(f"vqa_{split}", n)
    a, relation, b = w.relation(scene)
    if w.rng.random() < 0.5:
        truth = w.rng.random() < 0.5
        said = relation if truth else REVERSED[relation]
        if not truth and w.names_absent():
            a, said = w.absent(scene), relation
        return f"is there a {_name(a)} {said} a {_name(b)}", "yes" if truth else "no", rel
    return f"what is {relation} the {_name(b)}", _name(a), rel


def _ve(w: _Writer, split: str, count: int) -> list[dict]:
    labels = ("entailment", "contradiction") + (() if w.cfg.ve_relation_only else ("neutral",))
    out = []
    for n in range(count):
        if w.cfg.ve_distance:  # the objects near in every second pair of items, so neither the words nor the
            # scene alone decides; with `ve_next_only` near in the entailed items, so every statement says "next to"
            near = n % 2 == 0 if w.cfg.ve_next_only else n // 2 % 2 == 0
            rel, scene, a, b = _distance_scene(w, f"ve_{split}", n, near=near)
            relation = distance(a, b)
        else:
            rel, scene = w.distinct_scene(f"ve_{split}", n, "jpg")
            a, relation, b = w.relation(scene)
        label = labels[n % len(labels)]
        if label == "contradiction":
            relation = (DISTANCES if w.cfg.ve_distance else REVERSED)[relation]
        elif label == "neutral":  # an object of a colour and shape the scene does not show
            a = w.absent(scene)
        out.append({"image": rel[: -len(".jpg")], "sentence": f"a {_name(a)} {relation} a {_name(b)}", "label": label})
    return out


def _distance_scene(w: _Writer, folder: str, n: int, near: bool, ext: str = "jpg") -> tuple[str, list, tuple, tuple]:
    """A scene of distinct objects and two of them, a and b, next to each other (`near`) or not, drawn."""
    while True:
        scene = _scene(w.rng, w.cfg)
        if len({_name(o) for o in scene}) < len(scene):
            continue
        a, b = w.rng.sample(scene, 2)
        if (distance(a, b) == "next to") == near:
            rel = f"images/{folder}/{n}.{ext}"
            if w.images:
                _draw(scene, w.cfg, w.root / rel)
            w.scenes[rel] = scene
            return rel, scene, a, b


def _nlvr(w: _Writer, split: str, count: int) -> list[dict]:
    out = []
    for n in range(count):
        if w.cfg.nlvr_next_only:
            out.append(_nlvr_next(w, split, n))
            continue
        scene = w.distinct_scene if w.cfg.distinct_nlvr else w.scene
        left, right = scene(f"nlvr_{split}", 2 * n), scene(f"nlvr_{split}", 2 * n + 1)
        side = w.rng.randrange(2)
        truth = w.rng.random() < 0.5
        shown, other = (left, right)[side][1], (left, right)[1 - side][1]
        a, relation, b = w.relation(shown)
        said = relation if truth else REVERSED[relation]
        if not truth and w.names_absent():  # an object neither image shows
            a, said = w.absent(shown, other), relation
        sentence = f"the {('left', 'right')[side]} image shows a {_name(a)} {said} a {_name(b)}"
        out.append({"images": [left[0], right[0]], "sentence": sentence, "label": "True" if truth else "False"})
    return out


def _nlvr_next(w: _Writer, split: str, n: int) -> dict:
    """`nlvr_next_only`: "the left / right image shows a X next to a Y", the named image showing both (neighbours in
    every second item: True there), the other neither."""
    side, near = w.rng.randrange(2), n % 2 == 0
    folder = f"nlvr_{split}"
    named, _, a, b = _distance_scene(w, folder, 2 * n + side, near=near, ext="png")
    other, _ = w.distinct_scene(folder, 2 * n + 1 - side, avoid=frozenset({_name(a), _name(b)}))
    images = [named, other] if side == 0 else [other, named]
    sentence = f"the {('left', 'right')[side]} image shows a {_name(a)} next to a {_name(b)}"
    return {"images": images, "sentence": sentence, "label": "True" if near else "False"}


def _grounding(w: _Writer, root: Path) -> None:
    cfg = w.cfg
    train, tests, refs, images, annotations, dets = [], [], [], [], [], {}
    splits = ["train"] * cfg.train_items + [s for s in ("val", "testA", "testB") for _ in range(cfg.test_items)]
    for ref_id, split in enumerate(splits):
        rel, scene = w.distinct_scene("refcoco+", ref_id)
        a, relation, b = w.relation(scene)
        text = f"the {_name(a)} {relation} the {b[1] if cfg.context_shape_only else _name(b)}"
        image_id = ann_id = ref_id
        images.append({"id": image_id, "file_name": rel, "width": cfg.image_size, "height": cfg.image_size})
        annotations.append({"id": ann_id, "image_id": image_id, "bbox": _box(a, cfg), "category_id": 1})
        refs.append(
            {"ref_id": ref_id, "ann_id": ann_id, "image_id": image_id, "split": split, "sentences": [{"sent": text}]}
        )
        proposals = []
        for obj in scene:
            x, y, bw, bh = _box(obj, cfg)
            jitter = [w.rng.uniform(-1, 1) for _ in range(2)]
            proposals.append([max(0.0, x + jitter[0]), max(0.0, y + jitter[1]), bw, bh, 0.9])
        for _ in range(2):
            bw, bh = (w.rng.uniform(0.2, 0.6) * cfg.image_size for _ in range(2))
            x, y = w.rng.uniform(0, cfg.image_size - bw), w.rng.uniform(0, cfg.image_size - bh)
            proposals.append([x, y, bw, bh, 0.3])
        dets[str(image_id)] = proposals
        entry = {"image": rel, "text": text, "ref_id": ref_id}
        (train if split == "train" else tests).append(entry)
    write_json_atomic(root / "refcoco+_train.json", train)
    write_json_atomic(root / "refcoco+_val.json", [e for e in tests if refs[e["ref_id"]]["split"] == "val"])
    write_json_atomic(root / "refcoco+_test.json", [e for e in tests if refs[e["ref_id"]]["split"] != "val"])
    folder = root / "refcoco+"
    write_json_atomic(folder / "dets.json", dets)
    write_json_atomic(folder / "cocos.json", {str(a["image_id"]): [a["bbox"]] for a in annotations})
    write_json_atomic(folder / "instances.json", {"images": images, "annotations": annotations, "categories": []})
    (folder / "refs(unc).p").write_bytes(pickle.dumps(refs))


def generate_tasks(
    root: Path, cfg: TaskGeneratorConfig, scenes: dict[str, list] | None = None, images: bool = True
) -> Path:
    """Write every task's files under `root` (skipped when its completion marker is there); returns root. `scenes`,
    when given, gets every image drawn now (its path under root -> its objects as (colour, shape, row, column));
    `images=False` leaves the image files out (the json files are the same), for counting the items alone."""
    marker = root / "complete.json"
    if marker.is_file():
        return root
    w = _Writer(root, cfg, images)
    write_json_atomic(root / "vqa_train.json", _vqa(w, "train", cfg.train_items, 0))
    test = _vqa(w, "test", 2 * cfg.test_items, 10_000)  # test2015: test-dev then test-std
    write_json_atomic(root / "vqa_test.json", [{k: v for k, v in e.items() if k != "answer"} for e in test])
    dev = int(len(test) * TEST_DEV_SHARE)
    write_json_atomic(
        root / "vqa_test_answers.json",
        [
            {"question_id": e["question_id"], "answer": e["answer"], "split": "test-dev" if i < dev else "test-std"}
            for i, e in enumerate(test)
        ],
    )
    questions = [
        {"question_id": e["question_id"], "image_id": e["question_id"], "question": e["question"]} for e in test
    ]
    write_json_atomic(root / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json", {"questions": questions})
    write_json_atomic(root / "answer_list.json", answer_list())
    for split in ("train", "dev", "test"):
        write_json_atomic(
            root / f"ve_{split}.json", _ve(w, split, cfg.train_items if split == "train" else cfg.test_items)
        )
        write_json_atomic(
            root / f"nlvr_{split}.json", _nlvr(w, split, cfg.train_items if split == "train" else cfg.test_items)
        )
    _grounding(w, root)
    (root / "vocab").mkdir(parents=True, exist_ok=True)
    (root / "vocab" / "vocab.txt").write_text("\n".join(task_vocabulary(cfg)) + "\n")
    marker.write_text(json.dumps({"generator": cfg.__dict__}))
    if scenes is not None:
        scenes.update(w.scenes)
    return root


def task_share(cfg: TaskGeneratorConfig) -> dict[str, tuple[int, int]]:
    """Per evaluation split of each task ("vqa test-dev", "ve dev", "nlvr test", "grounding testA", ...): its items
    (as `repro run --scale synthetic` scores them, written by `generate_tasks` into a temporary folder) and how many
    of them need where the shapes are, i.e. their answer is not decided by which shapes the image shows:
    {task split: (N, needing)}.

    VQA "is there a X rel a Y" and SNLI-VE's statements where the image shows both shapes (true or the relation
    reversed; not where one is absent); VQA "what is rel the Y" where the image shows more than one other shape;
    NLVR2 where the image the sentence names shows both its shapes; grounding where another object of the image
    has the colour and shape of the one referred to."""
    import tempfile

    from repro.families.ace_rpe.synthetic import named_objects

    scenes: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as folder:
        generate_tasks(Path(folder), cfg, scenes, images=False)
        files = {
            name: json.loads((Path(folder) / f"{name}.json").read_text())
            for name in ("vqa_test", "vqa_test_answers", "ve_dev", "ve_test", "nlvr_dev", "nlvr_test")
            + ("refcoco+_val", "refcoco+_test")
        }

    def shows(image: str) -> set[tuple[str, str]]:
        return {(o[0], o[1]) for o in scenes[image]}

    def vqa_needs(entry: dict) -> bool:
        named = named_objects(entry["question"])
        if entry["question"].startswith("is "):  # "is there a X rel a Y" / "is the X next to the Y"
            return set(named) <= shows(entry["image"])
        return len(scenes[entry["image"]]) > 2

    def nlvr_needs(entry: dict) -> bool:
        side = 0 if entry["sentence"].startswith("the left") else 1
        return set(named_objects(entry["sentence"])) <= shows(entry["images"][side])

    def grounding_needs(entry: dict) -> bool:
        referred = named_objects(entry["text"])[0]
        return sum((o[0], o[1]) == referred for o in scenes[entry["image"]]) > 1

    out = {}
    split_of = {a["question_id"]: a["split"] for a in files["vqa_test_answers"]}
    for split in ("test-dev", "test-std"):
        items = [e for e in files["vqa_test"] if split_of[e["question_id"]] == split]
        out[f"vqa {split}"] = (len(items), sum(map(vqa_needs, items)))
    for split in ("dev", "test"):
        items = files[f"ve_{split}"]
        out[f"ve {split}"] = (
            len(items),
            sum(set(named_objects(e["sentence"])) <= shows(e["image"] + ".jpg") for e in items),
        )
        items = files[f"nlvr_{split}"]
        out[f"nlvr {split}"] = (len(items), sum(map(nlvr_needs, items)))
    tests = {"val": files["refcoco+_val"], "testA": [], "testB": []}
    for entry in files["refcoco+_test"]:  # refs are drawn train, val, testA, testB, test_items of each test split
        tests["testA" if entry["ref_id"] < cfg.train_items + 2 * cfg.test_items else "testB"].append(entry)
    for split, items in tests.items():
        out[f"grounding {split}"] = (len(items), sum(map(grounding_needs, items)))
    return out
