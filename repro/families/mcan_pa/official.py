"""Generated scenes written as the official releases lay them out (mcan-pa Tables I-IV at the smoke scale).

`synthetic.generate` writes train and val in the VQA v2 layout for Table V, scored on val. The
other tables are run on what a download gives: VQA v1 or v2 with test questions whose answers only
the server knows, the Visual Genome QA files of MCAN, or COCO-QA's four line-aligned text files.
`generate_official(root, dataset, cfg)` writes that layout under `root`, as `repro download` would
leave it in the data folder, so `repro.datasets.vqa.prepare_vqa` reads it as it reads the real files:

  root/<vqa1|vqa2>/   the question and annotation files of train2014 and val2014, and the question
                      files of test2015 and test-dev2015 (test-dev is a subset of test2015, as released)
  root/vg-qa/         VG_questions.json, VG_annotations.json (MCAN's VG subset: COCO images, VQA layout)
  root/coco-qa/       train/ and test/, each img_ids.txt, questions.txt, answers.txt, types.txt
  root/features/      feature stores named as the prepared bottom-up stores: train2014, val2014, test2015
  root/server/        what only an evaluation server holds: the answers of the test2015 questions

The scenes, questions and features are those of `synthetic.py`. COCO-QA's questions are its four
types (object, number, color, location), lower case without "?", one-word answers, numbers as words.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from repro.data.generated import same_config
from repro.errors import ReproError
from repro.families.mcan_pa import synthetic as syn

# split -> (image folder / store name, question file stem) for the VQA releases
VQA_LAYOUTS = {
    "vqa2": {
        "questions": "v2_OpenEnded_mscoco_{name}_questions.json",
        "annotations": "v2_mscoco_{name}_annotations.json",
        "task_type": "Open-Ended",
    },
    "vqa1": {
        "questions": "OpenEnded_mscoco_{name}_questions.json",
        "annotations": "mscoco_{name}_annotations.json",
        "task_type": "OpenEnded",
    },
}
SERVER_ANSWERS = "test2015_annotations.json"
COCOQA_TYPE_CODES = {"object": 0, "number": 1, "color": 2, "location": 3}
NUMBER_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight")


@dataclass(frozen=True)
class OfficialConfig(syn.GeneratorConfig):
    """The synthetic generator's settings plus the splits a release has beyond train and val."""

    test_images: int = 8  # test2015 (VQA) images; COCO-QA's test split uses the val images
    test_dev_fraction: float = 0.5  # the share of test2015 images whose questions form test-dev2015
    vg_questions_per_image: int = 0  # VQA samples of Visual Genome, asked about the train images

    def check(self) -> None:
        super().check()
        if self.question_weights is not None or self.val_question_weights is not None:
            raise ReproError("question_weights: the release layouts ask the original templates uniformly")
        if min(self.train_images, self.val_images, self.test_images) < 1:
            raise ReproError("official-layout generator needs at least one train, val and test image")
        if not 0 < self.test_dev_fraction <= 1:
            raise ReproError(f"test_dev_fraction {self.test_dev_fraction} must be in (0, 1]")


def generate_official(root: Path, dataset: str, cfg: OfficialConfig) -> Path:
    """Write `dataset` (vqa2, vqa1 or coco-qa) in its release layout under `root`; nothing if already there."""
    from repro.utils import write_json_atomic

    manifest = root / "manifest.json"
    if manifest.exists() and same_config(
        json.loads(manifest.read_text()).get("config"), {**asdict(cfg), "dataset": dataset}
    ):
        return root
    root.mkdir(parents=True, exist_ok=True)
    if dataset == "coco-qa":
        _write_cocoqa(root, cfg)
    elif dataset in VQA_LAYOUTS:
        _write_vqa(root, dataset, cfg)
    else:
        raise ReproError(f"no official-layout generator for {dataset!r}; one of coco-qa, {', '.join(VQA_LAYOUTS)}")
    write_json_atomic(manifest, {"config": {**asdict(cfg), "dataset": dataset}})
    return root


def _scenes(
    rng, cfg: OfficialConfig, store_path: Path, n: int, first_id: int, projection, position
) -> list[tuple[int, syn.Scene]]:
    """`n` scenes with image ids from `first_id`, their features written to one store."""
    from repro.data.store import FeatureStoreWriter

    out = []
    with FeatureStoreWriter(store_path, num_images=n, max_boxes=cfg.max_objects, dim=cfg.feature_dim) as store:
        for k in range(n):
            scene = syn.make_scene(rng, cfg)
            boxes = np.asarray([o.box for o in scene.objects], dtype=np.float32)
            features = syn.object_features(rng, scene, projection, cfg.feature_noise, position)
            store.add(first_id + k, features, boxes, scene.width, scene.height)
            out.append((first_id + k, scene))
    return out


def _projection(rng, cfg: OfficialConfig) -> np.ndarray:
    return rng.standard_normal((len(syn.CLASSES) + len(syn.COLOURS), cfg.feature_dim)).astype(np.float32)


# --- VQA v1 / v2 and the VG files -----------------------------------------------------------------


def _vqa_records(rng, cfg, scenes, next_id: int) -> tuple[list[dict], list[dict], int]:
    questions, annotations = [], []
    for image_id, scene in scenes:
        for question, answer, answer_type, question_type in syn.make_questions(rng, scene, cfg.questions_per_image):
            answers = syn._annotator_answers(rng, answer, answer_type, cfg.annotator_error)
            questions.append({"image_id": image_id, "question": question, "question_id": next_id})
            annotations.append(
                {
                    "question_id": next_id,
                    "image_id": image_id,
                    "question_type": question_type,
                    "answer_type": answer_type,
                    "multiple_choice_answer": answer,
                    "answers": [
                        {"answer": a, "answer_confidence": "yes", "answer_id": k + 1} for k, a in enumerate(answers)
                    ],
                }
            )
            next_id += 1
    return questions, annotations, next_id


def _header(subtype: str, task_type: str | None = None) -> dict:
    head = {
        "info": {"description": "repro generated scenes", "version": "1.0"},
        "data_type": "mscoco",
        "data_subtype": subtype,
        "license": {"name": "generated", "url": ""},
    }
    return {**head, "task_type": task_type} if task_type else head


def _write_vqa(root: Path, dataset: str, cfg: OfficialConfig) -> None:
    from repro.utils import write_json_atomic

    layout = VQA_LAYOUTS[dataset]
    folder, features = root / dataset, root / "features"
    folder.mkdir(parents=True, exist_ok=True)
    features.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    projection, position = _projection(rng, cfg), syn.noisy_position(cfg)
    counts = {"train2014": cfg.train_images, "val2014": cfg.val_images, "test2015": cfg.test_images}
    next_image, next_question, scenes = 1, 1, {}
    for name, n in counts.items():
        scenes[name] = _scenes(rng, cfg, features / f"{name}.store", n, next_image, projection, position)
        next_image += n
    for name in ("train2014", "val2014", "test2015"):
        questions, annotations, next_question = _vqa_records(rng, cfg, scenes[name], next_question)
        q_file = folder / layout["questions"].format(name=name)
        write_json_atomic(q_file, {**_header(name, layout["task_type"]), "questions": questions}, compact=True)
        if name == "test2015":  # the answers stay with the server; test-dev is the first share of the images
            dev_images = {i for i, _ in scenes[name][: max(1, round(cfg.test_dev_fraction * len(scenes[name])))]}
            dev = [q for q in questions if q["image_id"] in dev_images]
            dev_file = folder / layout["questions"].format(name="test-dev2015")
            write_json_atomic(
                dev_file, {**_header("test-dev2015", layout["task_type"]), "questions": dev}, compact=True
            )
            write_json_atomic(
                root / "server" / SERVER_ANSWERS, {**_header(name), "annotations": annotations}, compact=True
            )
        else:
            a_file = folder / layout["annotations"].format(name=name)
            write_json_atomic(a_file, {**_header(name), "annotations": annotations}, compact=True)
    if cfg.vg_questions_per_image:
        vg_cfg = OfficialConfig(**{**asdict(cfg), "questions_per_image": cfg.vg_questions_per_image})
        questions, annotations, _ = _vqa_records(rng, vg_cfg, scenes["train2014"], 10_000_000 + next_question)
        write_json_atomic(root / "vg-qa" / "VG_questions.json", {"questions": questions}, compact=True)
        write_json_atomic(root / "vg-qa" / "VG_annotations.json", {"annotations": annotations}, compact=True)


# --- COCO-QA --------------------------------------------------------------------------------------


def _where(rng, scene):
    """COCO-QA's location type: where the object lies, by the larger offset of its centre from the image's."""
    named = syn._unique(scene, lambda o: True)
    if not named:
        return None
    o = scene.objects[named[int(rng.integers(len(named)))]]
    dx, dy = o.centre[0] / scene.width - 0.5, o.centre[1] / scene.height - 0.5
    if max(abs(dx), abs(dy)) < 0.1 or abs(abs(dx) - abs(dy)) < 0.05:
        return None
    answer = ("left" if dx < 0 else "right") if abs(dx) > abs(dy) else ("top" if dy < 0 else "bottom")
    return f"Where is the {o.name}?", answer, "other", "location"


# the synthetic question makers with COCO-QA's type for each (COCO-QA has no yes/no questions)
COCOQA_MAKERS = (
    (syn._left_of, "object"),
    (syn._on_top, "object"),
    (syn._how_many, "number"),
    (syn._count_top, "number"),
    (syn._what_colour, "color"),
    (_where, "location"),
)


def cocoqa_questions(rng, scene: syn.Scene, n: int) -> list[tuple[str, str, int]]:
    """Up to `n` (question, answer, type code) in COCO-QA's style: lower case, no "?", one word."""
    out: list[tuple[str, str, int]] = []
    for _ in range(n * 4):
        if len(out) == n:
            break
        maker, kind = COCOQA_MAKERS[int(rng.integers(len(COCOQA_MAKERS)))]
        made = maker(rng, scene)
        if made is None:
            continue
        question, answer = made[0].lower().rstrip("?").strip(), made[1]
        if kind == "number":
            answer = NUMBER_NAMES[int(answer)]
        if question not in {q for q, *_ in out}:
            out.append((question, answer, COCOQA_TYPE_CODES[kind]))
    return out


def _write_cocoqa(root: Path, cfg: OfficialConfig) -> None:
    from repro.utils import write_bytes_atomic

    features = root / "features"
    features.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    projection, position = _projection(rng, cfg), syn.noisy_position(cfg)
    # COCO-QA train questions are about COCO train2014 images, test questions about val2014 images
    splits = {"train": ("train2014", cfg.train_images, 1), "test": ("val2014", cfg.val_images, 1 + cfg.train_images)}
    for split, (store, n, first) in splits.items():
        rows = []
        for image_id, scene in _scenes(rng, cfg, features / f"{store}.store", n, first, projection, position):
            rows += [(image_id, *made) for made in cocoqa_questions(rng, scene, cfg.questions_per_image)]
        folder = root / "coco-qa" / split
        for name, column in (("img_ids.txt", 0), ("questions.txt", 1), ("answers.txt", 2), ("types.txt", 3)):
            write_bytes_atomic(folder / name, "".join(f"{r[column]}\n" for r in rows).encode())
