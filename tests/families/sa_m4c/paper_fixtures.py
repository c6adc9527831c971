"""A tiny TextVQA data folder in the released layouts M4C and SA-M4C read, for paper-scale runs on a CPU.

`write_sa_m4c_paper_fixtures(root)` writes, under the data folder `root` (what `REPRO_DATA_DIR` names), each file
where its archive or release puts it (`prepare.locate` finds files below a dataset's folder):

- `textvqa/TextVQA_0.5.1_{train,val,test}.json`: the questions (test without answers);
- `textvqa-mmf/` (MMF's TextVQA zoo): `textvqa/defaults/features/open_images/detectron.lmdb` (the ResNet-101
  detector's object features), `textvqa/ocr_en/features/ocr_en_frcn_features.lmdb` (`textvqa.ocr_en`, the
  Rosetta-en OCR boxes' features), `textvqa/defaults/annotations/imdb_{split}_ocr_en.npy` (imdb files, the
  object-array layout: a metadata header, then one record per question with `ocr_tokens`, `ocr_info` and
  `ocr_normalized_boxes`) and `extras/vocabs/fixed_answer_vocab_textvqa_5k.txt`;
- `textvqa-sam/` (SA-M4C's release): `tvqa_{split}_imdb.npy` (the dict layout {"metadata", "data"}, Google
  OCR tokens with `ocr_info` boxes) and `tvqa_{trainval,test}_{obj,ocr}.lmdb` (ResNeXt-152 features);
- `bert-base-uncased/`: `config.json`, `vocab.txt` and `pytorch_model.bin` (a BertForPreTraining state dict with
  the original checkpoint's `LayerNorm.gamma/beta` names), at `bert_hidden` / `bert_heads` / `bert_ff` instead of
  768 / 12 / 3072, so that a run with `sizes.hidden_size`, `sizes.heads`, `sizes.ff_size` equal to them is small;
- `fasttext-wiki-en/wiki.en.bin`: a FastText model of the fixtures' words in fastText's binary format
  (`fasttext_dim` wide; the real one is 300), which a run reads through the `fasttext` package.

LMDBs follow MMF's `LMDBFeatureReader`: key `b"keys"` holds the pickled list of image keys, each key a pickled
dict with `features` [n, dim], `bbox` [n, 4] in pixels, `num_boxes`, `image_width`, `image_height`.
Nothing here is a real question: images, words and answers are made up, each split a few questions.
"""

from __future__ import annotations

import json
import pickle
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SPLITS = ("train", "val", "test")
WORDS = ("stop", "exit", "cafe", "open", "coca", "cola", "pepsi", "nike", "sale", "taxi", "bus", "hotel")
NUMBERS = ("12", "2019", "7", "500")
QUESTIONS = (
    "what is written on the sign?",
    "what brand is shown?",
    "what number is on the bus?",
    "what word is above the door?",
)
SPECIAL = ("<pad>", "<s>", "</s>", "<unk>")
BERT_SPECIAL = ("[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class SaM4CPaperFixtures:
    """What was written: the data folder, the image ids and question ids of each split, the answer vocabulary."""

    root: Path
    images: dict[str, list[str]] = field(default_factory=dict)
    questions: dict[str, list[int]] = field(default_factory=dict)
    answer_vocab: list[str] = field(default_factory=list)
    fasttext_dim: int = 0
    bert: dict[str, int] = field(default_factory=dict)


def _boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    xy = rng.uniform(0.0, 0.7, size=(n, 2))
    return np.concatenate([xy, xy + rng.uniform(0.05, 0.3, size=(n, 2))], axis=1).clip(0, 1).astype(np.float32)


def _ocr_info(tokens: list[str], boxes: np.ndarray) -> list[dict]:
    return [
        {
            "word": t,
            "bounding_box": {
                "top_left_x": float(b[0]),
                "top_left_y": float(b[1]),
                "width": float(b[2] - b[0]),
                "height": float(b[3] - b[1]),
                "rotation": 0.0,
                "roll": 0.0,
                "pitch": 0.0,
                "yaw": 0.0,
            },
        }
        for t, b in zip(tokens, boxes)
    ]


def _write_lmdb(path: Path, items: dict[bytes, dict]) -> None:
    import lmdb

    path.parent.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), map_size=1 << 28)
    with env.begin(write=True) as txn:
        txn.put(b"keys", pickle.dumps(list(items)))
        for key, item in items.items():
            txn.put(key, pickle.dumps(item))
    env.close()


def _region_item(rng: np.random.Generator, boxes: np.ndarray, width: int, height: int, dim: int) -> dict:
    pixels = boxes * np.array([width, height, width, height], dtype=np.float32)
    n = len(boxes)
    return {
        "features": rng.normal(size=(n, dim)).astype(np.float32),
        "bbox": pixels.astype(np.float32),
        "num_boxes": n,
        "image_width": width,
        "image_height": height,
    }


def _write_bert(folder: Path, words: set[str], hidden: int, heads: int, ff: int, layers: int) -> None:
    import torch
    from transformers import BertConfig, BertForPreTraining

    folder.mkdir(parents=True, exist_ok=True)
    pieces = sorted(words | {"?", ",", ".", "##s", "##ed", "##ing"})
    vocab = [*BERT_SPECIAL, *pieces]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ff,
        max_position_embeddings=512,
        pad_token_id=0,
    )
    config.architectures = ["BertForMaskedLM"]
    config.save_pretrained(folder)
    torch.manual_seed(0)
    state = BertForPreTraining(config).state_dict()
    old = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
        for k, v in state.items()
    }
    torch.save(old, folder / "pytorch_model.bin")


def write_fasttext_model(folder: Path, words: list[str], dim: int, *, bucket: int = 2000, seed: int = 0) -> Path:
    """A skip-gram FastText model over `words`, saved as `folder/wiki.en.bin` in the layout of fastText's
    `FastText::saveModel` (format version 12): magic and version, the args, the dictionary, then the input matrix
    (one row per word, then `bucket` rows of character n-grams) and the output matrix, each float32.

    The rows are drawn here, not trained: the `fasttext` package's trainer initialises only a tenth of its input
    matrix when it runs on one thread, so a model it trains holds uninitialised memory and now and then NaN."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    vocabulary = [*dict.fromkeys(words), "</s>"]  # one line of the corpus: every word once, then end-of-line
    args = struct.pack("<12i", dim, 5, 5, 1, 5, 1, 2, 2, bucket, 3, 6, 100) + struct.pack("<d", 1e-4)
    # dim, ws, epoch, minCount, neg, wordNgrams, loss ns (2), model skipgram (2), bucket, minn, maxn, lrUpdateRate, t
    entries = b"".join(w.encode() + b"\0" + struct.pack("<qb", 1000, 0) for w in vocabulary)  # count, type word
    dictionary = struct.pack("<3i2q", len(vocabulary), len(vocabulary), 0, 1000 * len(vocabulary), -1) + entries
    inputs = rng.uniform(-1 / dim, 1 / dim, (len(vocabulary) + bucket, dim)).astype("<f4")
    outputs = rng.uniform(-1 / dim, 1 / dim, (len(vocabulary), dim)).astype("<f4")

    def matrix(rows: np.ndarray) -> bytes:
        return b"\0" + struct.pack("<2q", *rows.shape) + rows.tobytes()  # not quantised, then rows and columns

    path = folder / "wiki.en.bin"
    temporary = path.with_suffix(".part")
    temporary.write_bytes(struct.pack("<2i", 793712314, 12) + args + dictionary + matrix(inputs) + matrix(outputs))
    temporary.replace(path)
    return path


def write_sa_m4c_paper_fixtures(
    root: Path,
    *,
    images: dict[str, int] | None = None,
    questions_per_image: int = 2,
    dim: int = 2048,
    fasttext_dim: int = 8,
    bert_hidden: int = 24,
    bert_heads: int = 12,
    bert_ff: int = 48,
    bert_layers: int = 2,
    models: bool = True,
    seed: int = 0,
) -> SaM4CPaperFixtures:
    """The released TextVQA files of M4C (MMF) and SA-M4C under the data folder `root`: `images` images per split
    (default train 4, val 2, test 2) with `questions_per_image` questions each, region features `dim` wide; with
    `models`, BERT and FastText too (a run reads them, the conversion of the released files does not)."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    counts = images or {"train": 4, "val": 2, "test": 2}
    info = SaM4CPaperFixtures(root, fasttext_dim=fasttext_dim)
    info.bert = {"hidden_size": bert_hidden, "heads": bert_heads, "ff_size": bert_ff, "layers": bert_layers}
    mmf, sam = root / "textvqa-mmf", root / "textvqa-sam"
    objects_mmf, ocr_mmf, objects_sam, ocr_sam = {}, {}, {"trainval": {}, "test": {}}, {"trainval": {}, "test": {}}
    qid = 1000
    vocab_words: list[str] = []
    for split in SPLITS:
        records, imdb_mmf, imdb_sam = [], [], []
        info.images[split], info.questions[split] = [], []
        for _ in range(counts[split]):
            image_id = f"{int(rng.integers(1 << 60)):016x}"
            width, height = int(rng.integers(400, 1024)), int(rng.integers(300, 768))
            n_ocr = int(rng.integers(2, 7))
            tokens = [str(t) for t in rng.choice(WORDS + NUMBERS, size=n_ocr, replace=False)]
            ocr_boxes = _boxes(rng, n_ocr)
            n_obj = int(rng.integers(3, 9))
            obj_boxes = _boxes(rng, n_obj)
            info.images[split].append(image_id)
            part = "test" if split == "test" else "trainval"
            folder = "test" if split == "test" else "train"  # MMF keeps val images with train's (OpenImages train)
            objects_mmf[f"{folder}/{image_id}.npy".encode()] = _region_item(rng, obj_boxes, width, height, dim)
            ocr_mmf[f"{folder}/{image_id}.npy".encode()] = _region_item(rng, ocr_boxes, width, height, dim)
            objects_sam[part][image_id.encode()] = _region_item(rng, obj_boxes, width, height, dim)
            ocr_sam[part][image_id.encode()] = _region_item(rng, ocr_boxes, width, height, dim)
            for k in range(questions_per_image):
                qid += 1
                question = QUESTIONS[(qid + k) % len(QUESTIONS)]
                answer = tokens[k % n_ocr] if k % 2 == 0 else str(rng.choice(WORDS)) + " " + tokens[0]
                answers = [answer] * 7 + [tokens[-1]] * 2 + ["unanswerable"]
                vocab_words += [w for a in answers for w in a.split()]
                record = {
                    "question": question,
                    "question_id": qid,
                    "image_id": image_id,
                    "image_classes": ["Sign"],
                    "flickr_original_url": f"https://example.org/{image_id}.jpg",
                    "flickr_300k_url": f"https://example.org/{image_id}_300k.jpg",
                    "image_width": width,
                    "image_height": height,
                    "question_tokens": question.rstrip("?").split(),
                    "set_name": split,
                }
                if split != "test":
                    record["answers"] = answers
                records.append(record)
                info.questions[split].append(qid)
                base = {
                    "question_id": qid,
                    "image_id": image_id,
                    "question": question,
                    "question_tokens": record["question_tokens"],
                    "feature_path": f"{image_id}.npy",
                    "image_width": width,
                    "image_height": height,
                    "set_name": split,
                    "ocr_tokens": tokens,
                    "ocr_info": _ocr_info(tokens, ocr_boxes),
                    **({"answers": answers, "valid_answers": answers} if split != "test" else {}),
                }
                imdb_mmf.append({**base, "ocr_normalized_boxes": ocr_boxes, "obj_normalized_boxes": obj_boxes})
                imdb_sam.append(base)
        questions = {"dataset_name": "textvqa", "dataset_version": "0.5.1", "dataset_type": split, "data": records}
        (root / "textvqa").mkdir(parents=True, exist_ok=True)
        (root / "textvqa" / f"TextVQA_0.5.1_{split}.json").write_text(json.dumps(questions), encoding="utf-8")
        annotations = mmf / "textvqa" / "defaults" / "annotations"
        annotations.mkdir(parents=True, exist_ok=True)
        header = {"create_time": "2019-12-01", "dataset_name": "textvqa", "version": 1, "has_answer": split != "test"}
        np.save(annotations / f"imdb_{split}_ocr_en.npy", np.array([header, *imdb_mmf], dtype=object))
        sam.mkdir(parents=True, exist_ok=True)
        np.save(sam / f"tvqa_{split}_imdb.npy", np.array({"metadata": header, "data": imdb_sam}, dtype=object))
    _write_lmdb(mmf / "textvqa" / "defaults" / "features" / "open_images" / "detectron.lmdb", objects_mmf)
    _write_lmdb(mmf / "textvqa" / "ocr_en" / "features" / "ocr_en_frcn_features.lmdb", ocr_mmf)
    for part in ("trainval", "test"):
        _write_lmdb(sam / f"tvqa_{part}_obj.lmdb", objects_sam[part])
        _write_lmdb(sam / f"tvqa_{part}_ocr.lmdb", ocr_sam[part])
    ranked = sorted(set(vocab_words), key=lambda w: (-vocab_words.count(w), w))
    info.answer_vocab = [*SPECIAL, *ranked[:-2]]  # the rarest words left out: some answers are copied from OCR only
    vocabs = mmf / "extras" / "vocabs"
    vocabs.mkdir(parents=True, exist_ok=True)
    (vocabs / "fixed_answer_vocab_textvqa_5k.txt").write_text("\n".join(info.answer_vocab) + "\n", encoding="utf-8")
    words = {w for q in QUESTIONS for w in q.rstrip("?").split()} | set(WORDS) | set(NUMBERS)
    if models:
        _write_bert(root / "bert-base-uncased", words, bert_hidden, bert_heads, bert_ff, bert_layers)
        write_fasttext_model(root / "fasttext-wiki-en", [*WORDS, *NUMBERS, "unanswerable"], fasttext_dim)
    return info
