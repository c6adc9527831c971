"""Tiny VQA-family files in the official layouts (visualqa.org JSON, COCO-QA text columns, GloVe text)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ANSWER_TYPES = {"yes": "yes/no", "no": "yes/no", "two": "number", "2": "number"}


def vqa_questions(path: Path, subtype: str, questions: list[tuple[int, int, str]], task: str = "Open-Ended") -> None:
    path.write_text(
        json.dumps(
            {
                "info": {"description": "fixture"},
                "task_type": task,
                "data_type": "mscoco",
                "data_subtype": subtype,
                "license": {"name": "CC BY 4.0"},
                "questions": [{"question_id": q, "image_id": i, "question": text} for q, i, text in questions],
            }
        )
    )


def vqa_annotations(path: Path, subtype: str, annotations: list[tuple[int, int, str, list[str]]]) -> None:
    """annotations: (question_id, image_id, multiple_choice_answer, ten answers)."""
    path.write_text(
        json.dumps(
            {
                "info": {"description": "fixture"},
                "data_type": "mscoco",
                "data_subtype": subtype,
                "license": {"name": "CC BY 4.0"},
                "annotations": [
                    {
                        "question_id": q,
                        "image_id": i,
                        "question_type": "what is",
                        "multiple_choice_answer": mc,
                        "answer_type": ANSWER_TYPES.get(mc, "other"),
                        "answers": [
                            {"answer_id": k + 1, "answer": a, "answer_confidence": "yes"} for k, a in enumerate(answers)
                        ],
                    }
                    for q, i, mc, answers in annotations
                ],
            }
        )
    )


def write_vqa2(root: Path, prefix: str = "v2_") -> dict:
    """train: 12 questions, val: 6, test2015: 3, test-dev2015: 2, on images 1..6.

    Multiple-choice answers over train+val: 'yes' 9 times, 'two'/'2' 8 times together, 'red' once.
    """
    root.mkdir(parents=True, exist_ok=True)
    mcs = ["yes"] * 9 + ["two", "2"] * 4 + ["red"]
    mcs = mcs[:18]
    train, val = [], []
    for k, mc in enumerate(mcs):
        qid, img = 1000 + k, 1 + k % 6
        answers = [mc] * 4 + ["no"] * 2 + ["maybe"] + ["a dog"] * 3
        text = "What's the man's-shirt color?" if k == 0 else f"Is there a cat number {k}?"
        (train if k < 12 else val).append((qid, img, text, mc, answers))
    for split, items in (("train2014", train), ("val2014", val)):
        vqa_questions(
            root / f"{prefix}OpenEnded_mscoco_{split}_questions.json", split, [(q, i, t) for q, i, t, _, _ in items]
        )
        annotations = f"{prefix}mscoco_{split}_annotations.json" if prefix else f"mscoco_{split}_annotations.json"
        vqa_annotations(root / annotations, split, [(q, i, mc, a) for q, i, _, mc, a in items])
    test = [
        (9000 + k, 1 + k, f"How many zebras are in the very long picture of the savanna at noon {k}?") for k in range(3)
    ]
    vqa_questions(root / f"{prefix}OpenEnded_mscoco_test2015_questions.json", "test2015", test)
    vqa_questions(root / f"{prefix}OpenEnded_mscoco_test-dev2015_questions.json", "test-dev2015", test[:2])
    return {"train": train, "val": val, "test": test}


def write_vg(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "VG_questions.json").write_text(
        json.dumps({"questions": [{"image_id": 2, "question": "What color is the giraffe?", "question_id": 7000001}]})
    )
    (root / "VG_annotations.json").write_text(
        json.dumps(
            {
                "annotations": [
                    {
                        "image_id": 2,
                        "question_id": 7000001,
                        "question_type": "what color",
                        "answer_type": "other",
                        "multiple_choice_answer": "yes",
                        "answers": [
                            {"answer": "yes", "answer_confidence": "yes", "answer_id": k} for k in range(1, 11)
                        ],
                    }
                ]
            }
        )
    )


def write_cocoqa(root: Path) -> None:
    data = {
        "train": [
            (9, "what is the man riding", "skateboard", 0),
            (25, "how many giraffes are there", "two", 1),
            (30, "what is the color of the bus", "red", 2),
        ],
        "test": [(42, "where is the cat sitting", "couch", 3), (9, "what is the man holding", "umbrella", 0)],
    }
    for split, rows in data.items():
        folder = root / "cocoqa" / split
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "img_ids.txt").write_text("".join(f"{r[0]}\n" for r in rows))
        (folder / "questions.txt").write_text("".join(f"{r[1]}\n" for r in rows))
        (folder / "answers.txt").write_text("".join(f"{r[2]}\n" for r in rows))
        (folder / "types.txt").write_text("".join(f"{r[3]}\n" for r in rows))


def write_glove(path: Path, words: list[str], dim: int = 300, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = {w: rng.standard_normal(dim).astype(np.float32).round(5) for w in words}
    lines = [". . . " + " ".join("0.1" for _ in range(dim))]  # 840B has a few tokens containing spaces
    lines += [w + " " + " ".join(f"{v:.5f}" for v in vec) for w, vec in vectors.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return vectors
