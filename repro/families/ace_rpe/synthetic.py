"""Generated image-text data for the ace-rpe family, written in ALBEF's json layout (`data.py`).

Each image is a few coloured shapes on a grid of cells; each caption states the relative position of
two of them ("a red square left of a blue circle"), so matching a caption to its image needs the
words tied to image regions and the relation between them. With `twins`, every second image is the
one before it with two of its shapes exchanged: the same shapes, other relations, so a model that
knows which shapes an image holds but not where cannot tell the two apart (at best half of its
top-1 retrievals of a twin pair are right). With `distance`, captions say how far apart two shapes
are ("a red square next to a blue circle", "... far from ...") and a twin moves one shape so that
two of them go from next to each other to far apart or back. Files:

  images/<split>/<n>.png                      the images
  pretrain.json                               pre-training pairs (list of image/caption)
  <name>_train.json, <name>_test.json         retrieval, Karpathy layout, for name in flickr30k, coco
  vocab/vocab.txt                             a BERT vocabulary of the captions' words
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from repro.errors import ReproError
from repro.families.base import GeneratorSettings
from repro.utils import write_json_atomic

COLOURS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 70, 220), "yellow": (230, 210, 40)}
SHAPES = ("square", "circle", "triangle")
RELATIONS = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
RETRIEVAL_NAMES = {"flickr30k": "flickr30k", "coco-retrieval": "coco"}  # spec dataset -> ALBEF file prefix
# the downstream tasks' words (`synthetic_tasks.py`), in the vocabulary here too with `task_words`
TASK_WORDS = ("is", "there", "what", "the", "left", "right", "image", "shows", "yes", "no", "of")
DISTANCE_WORDS = ("next", "to", "far", "from")  # "a red square next to / far from a blue circle"
PLACE_WORDS = ("at", "the", "top", "bottom", "middle", "left", "right")  # "a red square at the top left"


@dataclass(frozen=True)
class GeneratorConfig(GeneratorSettings):
    seed: int = 0
    image_size: int = 32
    grid: int = 2  # cells per side
    objects: int = 2  # shapes per image
    pretrain_images: int = 32
    train_images: int = 24  # per retrieval data set
    test_images: int = 8
    captions_per_image: int = 5  # test captions per image (Flickr30K and COCO have 5)
    train_captions: int = 2
    twins: bool = False  # every second image: the one before with two shapes exchanged
    # the share of pre-training captions that say where one shape is in the image ("a red square at the top left")
    # instead of how two stand to each other; 0 draws nothing for it, so older configs give the same files
    place_captions: float = 0.0
    # the vocabulary holds the downstream tasks' words too, so that tables with and without task columns tokenize
    # alike and share their pre-training (`pretrained.py`)
    task_words: bool = False
    # captions (pre-training and retrieval) say how far apart two shapes are, "next to" (neighbouring cells, diagonals
    # included) or "far from", instead of which way one stands from the other; a twin moves one shape to a free cell
    # so that its distance to another shape changes. Exchanging two shapes (the twins without it) keeps their
    # distance, which is all ACE-RPE's relative position (Eq. 7, a grid distance without a direction) tells; here it
    # is what tells a twin pair apart. Its words join the vocabulary only when on
    distance: bool = False

    def check(self) -> None:
        if self.objects < 2 or self.objects > self.grid * self.grid:
            raise ReproError(f"generator: objects must be 2..grid^2 ({self.grid**2}), got {self.objects}")
        if min(self.pretrain_images, self.train_images, self.test_images, self.captions_per_image) < 1:
            raise ReproError("generator: image and caption counts must be at least 1")
        if not 0.0 <= self.place_captions <= 1.0:
            raise ReproError(f"generator: place_captions must be within [0, 1], got {self.place_captions}")
        if self.distance and self.grid < 3:  # no two cells of a 2 x 2 grid are far apart
            raise ReproError(f"generator: distance needs a grid of 3 or more, got {self.grid}")


def _scene(rng: random.Random, cfg: GeneratorConfig) -> list[tuple[str, str, int, int]]:
    cells = rng.sample([(r, c) for r in range(cfg.grid) for c in range(cfg.grid)], cfg.objects)
    return [(rng.choice(list(COLOURS)), rng.choice(SHAPES), r, c) for r, c in cells]


def _twin(rng: random.Random, scene) -> list[tuple[str, str, int, int]]:
    """The scene with the cells of two of its shapes exchanged (two that differ, so it is another image)."""
    pairs = [(i, j) for i in range(len(scene)) for j in range(i + 1, len(scene)) if scene[i][:2] != scene[j][:2]]
    if not pairs:
        return list(scene)
    i, j = rng.choice(pairs)
    twin = list(scene)
    twin[i] = (*scene[i][:2], *scene[j][2:])
    twin[j] = (*scene[j][:2], *scene[i][2:])
    return twin


def _distance_twin(rng: random.Random, scene, grid: int) -> list[tuple[str, str, int, int]]:
    """The scene with one shape moved to a free cell so that its distance to another shape changes, next to <->
    far from: the same shapes, another image (two alike shapes too: "a red circle next to a red circle" is then
    false)."""
    taken = {o[2:] for o in scene}
    free = [(r, c) for r in range(grid) for c in range(grid) if (r, c) not in taken]
    moves = sorted(
        {
            (i, cell)
            for i, a in enumerate(scene)
            for j, b in enumerate(scene)
            if i != j
            for cell in free
            if distance((*a[:2], *cell), b) != distance(a, b)
        }
    )
    if not moves:
        return list(scene)
    i, cell = rng.choice(moves)
    twin = list(scene)
    twin[i] = (*scene[i][:2], *cell)
    return twin


def distance(a, b) -> str:
    """How far object a stands from object b: "next to" in neighbouring cells (diagonals included), else "far from"."""
    return "next to" if max(abs(a[2] - b[2]), abs(a[3] - b[3])) <= 1 else "far from"


def _relation(a, b) -> str:
    """How object a stands to object b: the larger of the column and the row difference."""
    dr, dc = a[2] - b[2], a[3] - b[3]
    if abs(dc) >= abs(dr):
        return "left of" if dc < 0 else "right of"
    return "above" if dr < 0 else "below"


def _caption(rng: random.Random, scene, cfg: GeneratorConfig | None = None) -> str:
    a, b = rng.sample(scene, 2)
    relation = distance(a, b) if cfg is not None and cfg.distance else _relation(a, b)
    return f"a {a[0]} {a[1]} {relation} a {b[0]} {b[1]}"


def place(obj, grid: int) -> str:
    """Where an object is in the image: its row (top, middle, bottom) and column (left, right; none in between),
    "middle" alone at the centre: "top left", "top", "left", "middle", "bottom right"."""
    row = "top" if obj[2] == 0 else "bottom" if obj[2] == grid - 1 else "middle"
    column = "left" if obj[3] == 0 else "right" if obj[3] == grid - 1 else ""
    if row == "middle" and column:
        return column
    return f"{row} {column}".strip()


def _pretrain_caption(rng: random.Random, scene, cfg: GeneratorConfig) -> str:
    """A pre-training caption: with share `place_captions` where one shape is, else how two stand."""
    if cfg.place_captions > 0 and rng.random() < cfg.place_captions:
        obj = rng.choice(scene)
        return f"a {obj[0]} {obj[1]} at the {place(obj, cfg.grid)}"
    return _caption(rng, scene, cfg)


def _draw(scene, cfg: GeneratorConfig, path: Path) -> None:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (cfg.image_size, cfg.image_size), (245, 245, 245))
    draw = ImageDraw.Draw(img)
    cell = cfg.image_size / cfg.grid
    for colour, shape, r, c in scene:
        x0, y0 = c * cell + cell * 0.15, r * cell + cell * 0.15
        x1, y1 = (c + 1) * cell - cell * 0.15, (r + 1) * cell - cell * 0.15
        fill = COLOURS[colour]
        if shape == "square":
            draw.rectangle([x0, y0, x1, y1], fill=fill)
        elif shape == "circle":
            draw.ellipse([x0, y0, x1, y1], fill=fill)
        else:
            draw.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=fill)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


def _images(rng, cfg, root: Path, split: str, count: int) -> list[tuple[str, list]]:
    out = []
    for n in range(count):
        if cfg.twins and n % 2:
            scene = _distance_twin(rng, out[-1][1], cfg.grid) if cfg.distance else _twin(rng, out[-1][1])
        else:
            scene = _scene(rng, cfg)
        rel = f"images/{split}/{n}.png"
        _draw(scene, cfg, root / rel)
        out.append((rel, scene))
    return out


def vocabulary(cfg: GeneratorConfig | None = None) -> list[str]:
    """The captions' words (with `place_captions` the place words, with `task_words` the tasks' words, with
    `distance` its relations' words too)."""
    words = {"a", *COLOURS, *SHAPES, *(w for r in RELATIONS for w in r.split())}
    if cfg is not None and cfg.distance:
        words |= set(DISTANCE_WORDS)
    if cfg is not None and cfg.place_captions > 0:
        words |= set(PLACE_WORDS)
    if cfg is not None and cfg.task_words:
        words |= set(TASK_WORDS)
    return SPECIALS + sorted(words)


def generate(root: Path, cfg: GeneratorConfig, scenes: dict[str, list] | None = None) -> Path:
    """Write the data set under `root` (skipped when its completion marker is there); returns root. `scenes`, when
    given, gets every image written now (its path under root -> its objects as (colour, shape, row, column))."""
    marker = root / "complete.json"
    if marker.is_file():
        return root
    rng = random.Random(cfg.seed)
    pretrain = _images(rng, cfg, root, "pretrain", cfg.pretrain_images)
    drawn = list(pretrain)
    write_json_atomic(
        root / "pretrain.json",
        [
            {"image": rel, "caption": [_pretrain_caption(rng, s, cfg) for _ in range(cfg.train_captions)]}
            for rel, s in pretrain
        ],
    )
    for name in RETRIEVAL_NAMES.values():
        train = _images(rng, cfg, root, f"{name}_train", cfg.train_images)
        entries = [
            {"image": rel, "caption": _caption(rng, s, cfg), "image_id": i}
            for i, (rel, s) in enumerate(train)
            for _ in range(cfg.train_captions)
        ]
        write_json_atomic(root / f"{name}_train.json", entries)
        test = _images(rng, cfg, root, f"{name}_test", cfg.test_images)
        drawn += train + test
        write_json_atomic(
            root / f"{name}_test.json",
            [
                {"image": rel, "caption": [_caption(rng, s, cfg) for _ in range(cfg.captions_per_image)]}
                for rel, s in test
            ],
        )
    (root / "vocab").mkdir(parents=True, exist_ok=True)
    (root / "vocab" / "vocab.txt").write_text("\n".join(vocabulary(cfg)) + "\n")
    marker.write_text(json.dumps({"generator": cfg.__dict__}))
    if scenes is not None:
        scenes.update(drawn)
    return root


def named_objects(text: str) -> list[tuple[str, str]]:
    """The (colour, shape) pairs a generated caption, question or statement names, in order ("a red square left
    of a blue circle" -> red square, blue circle; a shape without a colour, "the circle", is left out)."""
    import re

    pattern = rf"\b({'|'.join(COLOURS)}) ({'|'.join(SHAPES)})\b"
    return [(colour, shape) for colour, shape in re.findall(pattern, text)]


def retrieval_share(cfg: GeneratorConfig) -> dict[str, tuple[int, int]]:
    """Per retrieval test set and direction ("flickr30k TR", "coco IR", ...): its queries (the evaluation split of
    `repro run --scale synthetic`, written by `generate` into a temporary folder) and how many of them a model that
    knows which shapes each image shows, but not where, cannot single out: {name direction: (N, needing)}.
    IR (a caption asks for its image): another test image shows both shapes the caption names. TR (an image asks
    for its captions): a caption of another test image names only shapes this image shows."""
    import tempfile

    scenes: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as folder:
        generate(Path(folder), cfg, scenes)
        tests = {
            name: json.loads((Path(folder) / f"{name}_test.json").read_text()) for name in RETRIEVAL_NAMES.values()
        }
    out = {}
    for name, entries in tests.items():
        shows = [{(o[0], o[1]) for o in scenes[e["image"]]} for e in entries]
        captions = [[set(named_objects(c)) for c in e["caption"]] for e in entries]
        ir = sum(
            any(named <= shows[j] for j in range(len(entries)) if j != i)
            for i in range(len(entries))
            for named in captions[i]
        )
        tr = sum(
            any(named <= shows[i] for j in range(len(entries)) if j != i for named in captions[j])
            for i in range(len(entries))
        )
        out[f"{name} TR"] = (len(entries), tr)
        out[f"{name} IR"] = (sum(len(c) for c in captions), ir)
    return out
