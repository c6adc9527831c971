"""ALBEF's downstream files as `repro download albef-data vqa2 coco-images vg-images flickr30k nlvr2 refcoco-plus`
lay them out (a few entries each, tiny images written with PIL): VQA v2 (vqa_train, vqa_val, vg_qa, answer_list,
the server's test2015 question file), SNLI-VE, NLVR2 and RefCOCO+ (the refer annotations and the dets file).
With `write_albef_files` (vocabulary, weights, the 4M corpus) a paper-scale row of Tables 2 and 5 runs on them."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

from tests.families.ace_rpe.test_paper_scale import WORDS, _image

ANSWERS = ["yes", "no", "dog", "red", "two"]
TEST2015 = [(900001, 1), (900002, 1), (900003, 2)]  # (question_id, COCO test2015 image id)


def _question(rng: random.Random) -> str:
    return "Is the " + " ".join(rng.choice(WORDS) for _ in range(3)) + "?"


def write_task_files(data: Path) -> None:
    rng = random.Random(7)
    albef = data / "albef-data" / "data"
    albef.mkdir(parents=True, exist_ok=True)
    coco, n = data / "coco-images", 0

    def image(path: Path) -> str:
        nonlocal n
        n += 1
        if not path.is_file():
            _image(path, 300 + n)
        return path.name

    files: dict[str, object] = {}
    files["vqa_train.json"] = [
        {
            "question_id": 100 + i,
            "question": _question(rng),
            "answer": [rng.choice(ANSWERS) for _ in range(10)],
            "image": f"train2014/COCO_train2014_{i:012d}.jpg",
            "dataset": "vqa",
        }
        for i in range(3)
    ]
    files["vqa_val.json"] = [
        {
            "question_id": 200 + i,
            "question": _question(rng),
            "answer": [rng.choice(ANSWERS) for _ in range(10)],
            "image": f"val2014/COCO_val2014_{391895 + i:012d}.jpg",
            "dataset": "vqa",
        }
        for i in range(2)
    ]
    files["vg_qa.json"] = [
        {
            "question_id": 300 + i,
            "question": _question(rng),
            "answer": rng.choice(ANSWERS),
            "image": f"image/{i}.jpg",
            "dataset": "vg",
        }
        for i in range(2)
    ]
    files["answer_list.json"] = ANSWERS
    files["vqa_test.json"] = [  # ALBEF's own: test-dev only (the run reads the server's question file instead)
        {"question_id": q, "question": "x", "image": f"test2015/COCO_test2015_{i:012d}.jpg", "dataset": "vqa"}
        for q, i in TEST2015[:2]
    ]
    for entry in files["vqa_train.json"] + files["vqa_val.json"]:
        image(coco / entry["image"])
    for entry in files["vg_qa.json"]:
        image(data / "vg-images" / entry["image"])
    questions = [{"question_id": q, "image_id": i, "question": _question(rng)} for q, i in TEST2015]
    for _, i in TEST2015:
        image(coco / "test2015" / f"COCO_test2015_{i:012d}.jpg")
    (data / "vqa2").mkdir(parents=True, exist_ok=True)
    (data / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json").write_text(
        json.dumps(
            {
                "info": {},
                "task_type": "Open-Ended",
                "data_type": "mscoco",
                "data_subtype": "test2015",
                "questions": questions,
            }
        )
    )
    # SNLI-VE: Flickr30K ids without extension; NLVR2: two images each, as the json names them
    labels = ["entailment", "neutral", "contradiction"]
    for split, count in (("train", 3), ("dev", 2), ("test", 2)):
        files[f"ve_{split}.json"] = [
            {"image": str(4000 + i), "sentence": _question(rng), "label": labels[i % 3]} for i in range(count)
        ]
        for i in range(count):
            image(data / "flickr30k" / "flickr30k-images" / f"{4000 + i}.jpg")
        files[f"nlvr_{split}.json"] = [
            {
                "images": [f"images/{split}/{split}-{i}-0-img0.png", f"images/{split}/{split}-{i}-0-img1.png"],
                "sentence": _question(rng),
                "label": ("True", "False")[i % 2],
            }
            for i in range(count)
        ]
        for entry in files[f"nlvr_{split}.json"]:
            for name in entry["images"]:
                image(data / "nlvr2" / name)
    # RefCOCO+: expressions on COCO train2014, the refer toolkit's annotations, the detector's proposals
    refs, annotations, images, dets = [], [], [], {}
    for r, split in enumerate(("train", "train", "val", "testA", "testB")):
        image_id = 500 + r
        name = f"train2014/COCO_train2014_{image_id:012d}.jpg"
        image(coco / name)
        refs.append({"ref_id": r, "ann_id": 9000 + r, "image_id": image_id, "split": split})
        annotations.append({"id": 9000 + r, "image_id": image_id, "bbox": [2.0, 3.0, 10.0, 8.0]})
        images.append({"id": image_id, "width": 40, "height": 30, "file_name": name.split("/")[1]})
        dets[str(image_id)] = [[1.0, 2.0, 11.0, 9.0, 0.9], [20.0, 10.0, 10.0, 10.0, 0.5]]
    expressions = [
        {"image": f"train2014/COCO_train2014_{500 + r:012d}.jpg", "text": _question(rng), "ref_id": r} for r in range(5)
    ]
    files["refcoco+_train.json"] = expressions[:2]
    files["refcoco+_val.json"] = expressions[2:3]
    files["refcoco+_test.json"] = expressions[3:]
    files["refcoco+/dets.json"] = dets
    files["refcoco+/cocos.json"] = {str(a["image_id"]): [a["bbox"]] for a in annotations}
    for name, content in files.items():
        (albef / name).parent.mkdir(parents=True, exist_ok=True)
        (albef / name).write_text(json.dumps(content))
    refer = data / "refcoco-plus" / "refcoco+"
    refer.mkdir(parents=True, exist_ok=True)
    (refer / "refs(unc).p").write_bytes(pickle.dumps(refs))
    (refer / "instances.json").write_text(json.dumps({"images": images, "annotations": annotations}))
