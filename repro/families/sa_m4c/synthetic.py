"""Generated scenes for `sa-m4c`: text in images whose answer depends on where it is.

Each image holds objects (a class and a colour) and OCR tokens (random words, each in a colour) at
positions. A region feature encodes class/colour plus noise and nothing about position: position
reaches a model only through the boxes, i.e. through the box embeddings and, in SA-M4C, the spatial
graph. Questions, answered with 10 annotator answers:

- spatial, object anchor: "what is written above the red sign?" -> the OCR token nearest to the
  object in that direction (above, below, left of, right of);
- spatial, token anchor: "what word is right of the word kivo?" -> the nearest token that way;
- relation-free controls: "what is the blue word?" (the one token in that colour) and "what color is
  the car?" (a vocabulary answer).

The generator is seeded and deterministic and writes the official layouts: `TextVQA_0.5.1_<split>.json`
(test without answers), one Rosetta-layout OCR file per OCR system, feature stores of the object
regions and of the OCR boxes' regions, `words.npz` (the stand-in for FastText), the answer vocabulary
(`answer_vocab.txt`, the official file's layout) and a BERT word-piece `vocab.txt` for the questions.
Its parameters live in the spec (`scales.<scale>.generator`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from repro.data.generated import same_config
from repro.families.base import GeneratorSettings
from repro.families.sa_m4c.data import OCR_FILES, QUESTIONS_FILE, build_answer_vocab, image_key

CLASSES = ("sign", "car", "bottle", "shirt", "door", "board")
COLOURS = ("red", "green", "blue", "yellow", "white", "black")
DIRECTIONS = {  # name -> unit vector on screen (y points down)
    "above": (0.0, -1.0),
    "below": (0.0, 1.0),
    "left of": (-1.0, 0.0),
    "right of": (1.0, 0.0),
}
SPLITS = ("train", "val", "test")
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class GeneratorConfig(GeneratorSettings):
    """What a generated TextVQA-style dataset is made of. Changing any field changes the data (and its folder)."""

    seed: int = 0
    train_images: int = 400
    val_images: int = 100
    test_images: int = 50
    questions_per_image: int = 3
    min_objects: int = 2
    max_objects: int = 5
    min_tokens: int = 3
    max_tokens: int = 8
    num_words: int = 200
    feature_dim: int = 32
    word_dim: int = 16
    feature_noise: float = 0.3
    control_share: float = 0.3  # share of relation-free questions
    annotator_error: float = 0.1
    answer_vocab: int = 40

    def check(self) -> None:
        from repro.errors import ReproError

        if not (1 <= self.min_objects <= self.max_objects and 2 <= self.min_tokens <= self.max_tokens):
            raise ReproError("generator: need 1 <= min_objects <= max_objects and 2 <= min_tokens <= max_tokens")
        if self.num_words < self.max_tokens * 2:
            raise ReproError("generator: num_words must be at least twice max_tokens")


@dataclass
class Item:
    kind: str  # "object" or "token"
    name: str  # class or word
    colour: str
    box: tuple[float, float, float, float]  # normalised x1, y1, x2, y2

    @property
    def centre(self) -> tuple[float, float]:
        return (self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2


def _words(rng: np.random.Generator, n: int) -> list[str]:
    words: list[str] = []
    while len(words) < n:
        w = "".join(rng.choice(list(LETTERS), size=int(rng.integers(3, 7))))
        if w not in words and w not in COLOURS:
            words.append(w)
    return words


def _place(rng, w: float, h: float) -> tuple[float, float, float, float]:
    x, y = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
    return (x, y, x + w, y + h)


def make_scene(rng: np.random.Generator, cfg: GeneratorConfig, words: list[str]) -> tuple[list[Item], list[Item]]:
    objects = [
        Item("object", str(rng.choice(CLASSES)), str(rng.choice(COLOURS)), _place(rng, *rng.uniform(0.12, 0.3, 2)))
        for _ in range(int(rng.integers(cfg.min_objects, cfg.max_objects + 1)))
    ]
    n_tok = int(rng.integers(cfg.min_tokens, cfg.max_tokens + 1))
    picked = rng.choice(len(words), size=n_tok, replace=False)
    tokens = []
    for k in picked:
        w, h = rng.uniform(0.06, 0.14), rng.uniform(0.03, 0.06)
        tokens.append(Item("token", words[int(k)], str(rng.choice(COLOURS)), _place(rng, w, h)))
    # put a token right next to an object in a random direction, so object-anchored questions have answers
    anchor = objects[int(rng.integers(len(objects)))]
    direction = DIRECTIONS[str(rng.choice(list(DIRECTIONS)))]
    tok = tokens[0]
    w, h = tok.box[2] - tok.box[0], tok.box[3] - tok.box[1]
    cx = anchor.centre[0] + direction[0] * ((anchor.box[2] - anchor.box[0]) / 2 + w / 2 + 0.01)
    cy = anchor.centre[1] + direction[1] * ((anchor.box[3] - anchor.box[1]) / 2 + h / 2 + 0.01)
    cx, cy = min(max(cx, w / 2), 1 - w / 2), min(max(cy, h / 2), 1 - h / 2)
    tokens[0] = Item("token", tok.name, tok.colour, (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return objects, tokens


def nearest_in_direction(anchor: Item, items: list[Item], direction: tuple[float, float]) -> Item | None:
    """The item whose centre is nearest to the anchor's inside the 90-degree cone of `direction`, when
    it is clearly the nearest (the runner-up at least 20% farther)."""
    ax, ay = anchor.centre
    found = []
    for it in items:
        if it is anchor:
            continue
        dx, dy = it.centre[0] - ax, it.centre[1] - ay
        along = dx * direction[0] + dy * direction[1]
        across = abs(dx * direction[1] - dy * direction[0])
        if along > 0 and across < along:
            found.append((float(np.hypot(dx, dy)), it))
    found.sort(key=lambda f: f[0])
    if not found or (len(found) > 1 and found[1][0] < 1.2 * found[0][0]):
        return None
    return found[0][1]


def _unique(items: list[Item], key) -> list[Item]:
    return [it for it in items if sum(key(o) == key(it) for o in items) == 1]


def make_questions(rng, objects: list[Item], tokens: list[Item], n: int, control_share: float) -> list[tuple]:
    """Up to n (question, answer, kind) with kind "spatial" or "control"."""
    out: list[tuple] = []
    for _ in range(n * 6):
        if len(out) == n:
            break
        if rng.random() < control_share:
            made = _control(rng, objects, tokens)
        else:
            made = _spatial(rng, objects, tokens)
        if made is not None and made[0] not in {q for q, *_ in out}:
            out.append(made)
    return out


def _spatial(rng, objects, tokens):
    name = str(rng.choice(list(DIRECTIONS)))
    if rng.random() < 0.6:
        anchors = _unique(objects, lambda o: (o.colour, o.name))
        if not anchors:
            return None
        anchor = anchors[int(rng.integers(len(anchors)))]
        target = nearest_in_direction(anchor, tokens, DIRECTIONS[name])
        question = f"what is written {name} the {anchor.colour} {anchor.name}?"
    else:
        anchor = tokens[int(rng.integers(len(tokens)))]
        target = nearest_in_direction(anchor, tokens, DIRECTIONS[name])
        question = f"what word is {name} the word {anchor.name}?"
    return None if target is None else (question, target.name, "spatial")


def _control(rng, objects, tokens):
    if rng.random() < 0.5:
        coloured = _unique(tokens, lambda t: t.colour)
        if not coloured:
            return None
        t = coloured[int(rng.integers(len(coloured)))]
        return f"what is the {t.colour} word?", t.name, "control"
    classes = _unique(objects, lambda o: o.name)
    if not classes:
        return None
    o = classes[int(rng.integers(len(classes)))]
    return f"what color is the {o.name}?", o.colour, "control"


def _features(rng, items: list[Item], projection: np.ndarray, noise: float, with_class: bool) -> np.ndarray:
    onehot = np.zeros((len(items), len(CLASSES) + len(COLOURS)), dtype=np.float32)
    for k, it in enumerate(items):
        if with_class:
            onehot[k, CLASSES.index(it.name)] = 1.0
        onehot[k, len(CLASSES) + COLOURS.index(it.colour)] = 1.0
    f = onehot @ projection + noise * rng.standard_normal((len(items), projection.shape[1])).astype(np.float32)
    return np.maximum(f, 0.0) + 1e-3


def generate(out_dir: Path, cfg: GeneratorConfig) -> dict[str, Path]:
    """Write every file into `out_dir` (nothing if its manifest says this configuration is there)."""
    from repro.data.store import FeatureStoreWriter
    from repro.utils import write_bytes_atomic, write_json_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / "manifest.json"
    paths = {"root": out_dir, "words": out_dir / "words.npz", "answer_vocab": out_dir / "answer_vocab.txt"}
    paths["bert_vocab"] = out_dir / "vocab.txt"
    if manifest.exists() and same_config(json.loads(manifest.read_text()).get("config"), asdict(cfg)):
        return paths

    rng = np.random.default_rng(cfg.seed)
    words = _words(rng, cfg.num_words)
    projection = rng.standard_normal((len(CLASSES) + len(COLOURS), cfg.feature_dim)).astype(np.float32)
    vectors = rng.standard_normal((len(words), cfg.word_dim)).astype(np.float32)
    np.savez(paths["words"], words=np.array(words), vectors=vectors)
    counts = {"train": cfg.train_images, "val": cfg.val_images, "test": cfg.test_images}
    next_q = 1
    questions_by_split: dict[str, list[dict]] = {}
    ocr_by_split: dict[str, list[dict]] = {}
    for split in SPLITS:
        questions, ocr_records = [], []
        obj_store = FeatureStoreWriter(
            out_dir / f"{split}.objects.store", counts[split], cfg.max_objects, cfg.feature_dim
        )
        ocr_store = FeatureStoreWriter(out_dir / f"{split}.ocr.store", counts[split], cfg.max_tokens, cfg.feature_dim)
        with obj_store, ocr_store:
            for k in range(counts[split]):
                image_id = f"{split}{k:05d}{cfg.seed:04x}"
                width, height = int(rng.integers(320, 641)), int(rng.integers(240, 481))
                objects, tokens = make_scene(rng, cfg, words)
                scale = np.array([width, height, width, height], dtype=np.float32)
                obj_store.add(
                    image_key(image_id),
                    _features(rng, objects, projection, cfg.feature_noise, True),
                    np.array([o.box for o in objects], dtype=np.float32) * scale,
                    width,
                    height,
                )
                ocr_store.add(
                    image_key(image_id),
                    _features(rng, tokens, projection, cfg.feature_noise, False),
                    np.array([t.box for t in tokens], dtype=np.float32) * scale,
                    width,
                    height,
                )
                ocr_records.append(_ocr_record(image_id, tokens))
                for question, answer, kind in make_questions(
                    rng, objects, tokens, cfg.questions_per_image, cfg.control_share
                ):
                    record = {
                        "question": question,
                        "question_id": next_q,
                        "image_id": image_id,
                        "image_classes": sorted({o.name for o in objects}),
                        "flickr_original_url": "",
                        "flickr_300k_url": "",
                        "image_width": width,
                        "image_height": height,
                        "question_tokens": question.rstrip("?").split(),
                        "set_name": split,
                        "question_kind": kind,  # not in the official files; the reader ignores it
                    }
                    if split != "test":
                        record["answers"] = [
                            str(rng.choice(words)) if rng.random() < cfg.annotator_error else answer for _ in range(10)
                        ]
                    next_q += 1
                    questions.append(record)
        head = {"dataset_name": "textvqa", "dataset_version": "0.5.1", "dataset_type": split}
        write_json_atomic(out_dir / QUESTIONS_FILE.format(split=split), {**head, "data": questions}, compact=True)
        for pattern in OCR_FILES.values():
            write_json_atomic(
                out_dir / pattern.format(split=split), {"dataset_name": "textvqa", "data": ocr_records}, compact=True
            )
        questions_by_split[split] = questions
        ocr_by_split[split] = ocr_records
    _write_stvqa(out_dir, questions_by_split, ocr_by_split)
    vocab = build_answer_vocab(questions_by_split["train"], cfg.answer_vocab)
    write_bytes_atomic(paths["answer_vocab"], ("\n".join(vocab) + "\n").encode())
    question_words = sorted({w for qs in questions_by_split.values() for q in qs for w in q["question_tokens"]})
    write_bytes_atomic(paths["bert_vocab"], ("\n".join([*BERT_SPECIALS, "?", *question_words]) + "\n").encode())
    write_json_atomic(manifest, {"config": asdict(cfg)})
    return paths


def _write_stvqa(out_dir: Path, questions: dict[str, list[dict]], ocr: dict[str, list[dict]]) -> None:
    """The same scenes in the ST-VQA Task 3 layout: train + val questions in `train_task_3.json` (M4C's
    validation images listed in `stvqa_subval_images.txt`), test in `test_task_3.json`; answers are the
    distinct ones of the first three annotators; OCR in the Rosetta layout keyed by the image path."""
    from repro.families.sa_m4c.data import STVQA_FILES, STVQA_OCR_FILES, STVQA_VAL_IMAGES
    from repro.utils import write_bytes_atomic, write_json_atomic

    def record(q: dict, split: str) -> dict:
        out = {
            "question_id": q["question_id"],
            "question": q["question"],
            "file_name": f"{q['image_id']}.jpg",
            "file_path": q["image_id"],
            "dataset": "synthetic",
            "set_name": "test" if split == "test" else "train",
        }
        if "answers" in q:
            out["answers"] = list(dict.fromkeys(q["answers"][:3]))
        return out

    train = [record(q, s) for s in ("train", "val") for q in questions[s]]
    write_json_atomic(
        out_dir / STVQA_FILES["train"], {"dataset_name": "ST-VQA", "task": 3, "data": train}, compact=True
    )
    test = [record(q, "test") for q in questions["test"]]
    write_json_atomic(out_dir / STVQA_FILES["test"], {"dataset_name": "ST-VQA", "task": 3, "data": test}, compact=True)
    val_images = sorted({q["image_id"] for q in questions["val"]})
    write_bytes_atomic(out_dir / STVQA_VAL_IMAGES, ("\n".join(val_images) + "\n").encode())
    for name in OCR_FILES:
        write_json_atomic(
            out_dir / STVQA_OCR_FILES["train"].format(ocr=name), {"data": ocr["train"] + ocr["val"]}, compact=True
        )
        write_json_atomic(out_dir / STVQA_OCR_FILES["test"].format(ocr=name), {"data": ocr["test"]}, compact=True)


def _ocr_record(image_id: str, tokens: list[Item]) -> dict:
    info = [
        {
            "word": t.name,
            "bounding_box": {
                "top_left_x": t.box[0],
                "top_left_y": t.box[1],
                "width": t.box[2] - t.box[0],
                "height": t.box[3] - t.box[1],
                "rotation": 0,
                "roll": 0,
                "pitch": 0,
                "yaw": 0,
            },
        }
        for t in tokens
    ]
    return {"image_id": image_id, "ocr_tokens": [t.name for t in tokens], "ocr_info": info}


def mechanism_share(cfg: GeneratorConfig) -> tuple[int, int]:
    """The val questions (the evaluation split of `repro run --scale synthetic`, TextVQA's val and ST-VQA's
    M4C validation images alike, written by `generate` into a temporary folder) and how many of them are spatial
    (`make_questions`' kind): their answer is the OCR token nearest to an anchor in a direction, decided by the
    boxes alone; the controls are decided by colours and classes. (N, spatial)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        generate(Path(folder), cfg)
        questions = json.loads((Path(folder) / QUESTIONS_FILE.format(split="val")).read_text())["data"]
    return len(questions), sum(q["question_kind"] == "spatial" for q in questions)
