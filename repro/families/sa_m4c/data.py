"""TextVQA-style data for M4C / SA-M4C: the official json layouts, OCR features, answers as decoding targets.

Read here, for generated and real data alike:

- questions: `TextVQA_0.5.1_<split>.json` = {"dataset_name", "dataset_version", "dataset_type",
  "data": [{question, question_id, image_id (str), image_width, image_height, answers (10 strings;
  absent on test), question_tokens, image_classes, set_name, ...}]};
- OCR results in the Rosetta OCR layout (`TextVQA_Rosetta_OCR_v0.2_<split>.json`, and the same layout
  for the other OCR systems, `OCR_FILES`): {"data": [{image_id, ocr_tokens: [str], ocr_info: [{word,
  bounding_box: {top_left_x, top_left_y, width, height, rotation, ...}}]}]}, boxes normalised to [0, 1];
- region features of the objects and of the OCR boxes: the toolkit's feature store (`repro.data.store`),
  keyed by `image_key(image_id)`;
- word vectors for the OCR tokens (FastText at paper scale, `WordVectors`) and PHOC computed here (`phoc.py`);
- the answer vocabulary: one word a line, the first four `<pad> <s> </s> <unk>` (the official
  `fixed_answer_vocab_textvqa_5k.txt` layout).

Answers become M4C's decoding targets (`answer_targets`): each answer word, then `</s>`, is matched to
the vocabulary and to every OCR token equal to it (a multi-hot target over vocabulary ‖ OCR per step).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from repro.errors import ReproError
from repro.families.sa_m4c.model import BOS, EOS, SPECIAL
from repro.families.sa_m4c.phoc import phoc
from repro.families.sa_m4c.relations import relation_labels

QUESTIONS_FILE = "TextVQA_0.5.1_{split}.json"
OCR_FILES = {
    "rosetta-ml": "TextVQA_Rosetta_OCR_v0.2_{split}.json",  # released with TextVQA
    "rosetta-en": "TextVQA_Rosetta_en_OCR_{split}.json",  # M4C's Rosetta-en tokens, Rosetta layout
    "google": "TextVQA_Google_OCR_{split}.json",  # SA-M4C's Google OCR tokens, Rosetta layout
}
UNK = SPECIAL["<unk>"]
# ST-VQA Task 3 (open dictionary) files of the RRC portal, and M4C's split of its train set into
# training and validation images (mmf's imdb_subtrain / imdb_subval), one image path a line.
STVQA_FILES = {"train": "train_task_3.json", "val": "train_task_3.json", "test": "test_task_3.json"}
STVQA_VAL_IMAGES = "stvqa_subval_images.txt"
STVQA_OCR_FILES = {"train": "STVQA_{ocr}_OCR_train.json", "val": "STVQA_{ocr}_OCR_train.json"}
STVQA_OCR_FILES["test"] = "STVQA_{ocr}_OCR_test.json"


def image_key(image_id: str) -> int:
    """The feature-store key of an image id (TextVQA ids are strings): 60 bits of its SHA-1."""
    return int(hashlib.sha1(str(image_id).encode()).hexdigest()[:15], 16)


def answer_words(answer: str) -> list[str]:
    """An answer as decoding words: lower-cased, "," and "?" removed, split on spaces (M4C's tokenizer)."""
    return answer.lower().replace(",", "").replace("?", "").split()


def _load_json(path: Path, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReproError(f"{path}: the {what} file is missing") from None
    except (OSError, ValueError) as exc:
        raise ReproError(f"{path}: unreadable {what} file ({exc})") from None


def read_questions(path: Path) -> list[dict[str, Any]]:
    """The questions of a TextVQA 0.5.1 json file, checked field by field."""
    data = _load_json(path, "TextVQA questions")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ReproError(f"{path}: not a TextVQA questions file (no 'data' list)")
    out = []
    for k, q in enumerate(data["data"]):
        if not isinstance(q, dict):
            raise ReproError(f"{path}: data[{k}] is not a question record")
        for key, kind in (("question", str), ("question_id", int), ("image_id", str)):
            if not isinstance(q.get(key), kind):
                raise ReproError(f"{path}: data[{k}] has no {kind.__name__} {key!r}")
        answers = q.get("answers")
        if answers is not None and (not isinstance(answers, list) or not all(isinstance(a, str) for a in answers)):
            raise ReproError(f"{path}: question {q['question_id']} has answers that are not a list of strings")
        out.append(q)
    return out


def read_stvqa(root: Path, split: str) -> list[dict[str, Any]]:
    """ST-VQA Task 3 questions of a split as TextVQA-style records: image_id = the image's `file_path`,
    answers repeated to 10 as M4C does (`answers_raw` keeps them as given); train and val are M4C's
    split of the official train file by the images listed in `STVQA_VAL_IMAGES`."""
    path = Path(root) / STVQA_FILES[split]
    data = _load_json(path, "ST-VQA questions")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ReproError(f"{path}: not an ST-VQA questions file (no 'data' list)")
    held_out: set[str] = set()
    if split != "test":
        listing = Path(root) / STVQA_VAL_IMAGES
        if not listing.is_file():
            raise ReproError(f"{listing}: the list of M4C's ST-VQA validation images is missing")
        held_out = {line.strip() for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()}
    out = []
    for k, q in enumerate(data["data"]):
        try:
            record = {
                "question": str(q["question"]),
                "question_id": int(q["question_id"]),
                "image_id": str(q["file_path"]),
            }
        except (KeyError, TypeError, ValueError):
            raise ReproError(f"{path}: data[{k}] needs question, question_id and file_path") from None
        if split != "test" and (record["image_id"] in held_out) != (split == "val"):
            continue
        answers = q.get("answers")
        if answers is not None:
            if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
                raise ReproError(f"{path}: question {record['question_id']} needs a non-empty list of string answers")
            record["answers_raw"] = answers
            record["answers"] = (answers * 10)[:10]
        out.append(record)
    return out


def read_ocr(path: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """{image_id: (tokens, boxes [n, 4] normalised x1, y1, x2, y2)} from a Rosetta-layout OCR file."""
    data = _load_json(path, "OCR results")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ReproError(f"{path}: not an OCR results file (no 'data' list)")
    out = {}
    for k, item in enumerate(data["data"]):
        try:
            tokens = [str(info["word"]) for info in item["ocr_info"]]
            boxes = np.array(
                [
                    [b["top_left_x"], b["top_left_y"], b["top_left_x"] + b["width"], b["top_left_y"] + b["height"]]
                    for b in (info["bounding_box"] for info in item["ocr_info"])
                ],
                dtype=np.float64,
            ).reshape(-1, 4)
            out[str(item["image_id"])] = (tokens, np.clip(boxes, 0.0, 1.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReproError(f"{path}: data[{k}] is not an OCR record ({exc!r})") from None
    return out


def read_answer_vocab(path: Path) -> list[str]:
    words = [w.strip() for w in Path(path).read_text(encoding="utf-8").splitlines() if w.strip()]
    if words[: len(SPECIAL)] != list(SPECIAL):
        raise ReproError(f"{path}: an answer vocabulary starts with {' '.join(SPECIAL)}")
    return words


def build_answer_vocab(questions: list[dict[str, Any]], size: int) -> list[str]:
    """The `size` most frequent answer words of the training questions after the four special entries
    (how the official 5k vocabulary was made); ties in order of first appearance."""
    counts = Counter(w for q in questions for a in q.get("answers") or () for w in answer_words(a))
    return list(SPECIAL) + [w for w, _ in counts.most_common(max(size - len(SPECIAL), 0)) if w not in SPECIAL]


class WordVectors:
    """A word -> vector table (the generated scales' stand-in for FastText): `words.npz` with `words`
    and `vectors`; unknown words get zeros."""

    def __init__(self, path: Path):
        with np.load(path) as f:
            self.dim = int(f["vectors"].shape[1])
            self.table = dict(zip(f["words"].tolist(), f["vectors"].astype(np.float32)))

    def __call__(self, word: str) -> np.ndarray:
        return self.table.get(word, np.zeros(self.dim, dtype=np.float32))


class FastTextVectors:
    """FastText vectors from a `.bin` model through the `fasttext` package (M4C: `wiki.en.bin`)."""

    def __init__(self, path: Path):
        try:
            import fasttext
        except ImportError:
            raise ReproError(
                "the `fasttext` package is needed for OCR word vectors: pip install 'repro[sa-m4c]' (or fasttext)"
            ) from None
        if not Path(path).is_file():
            raise ReproError(f"{path}: the FastText model is missing")
        self.model = fasttext.load_model(str(path))
        self.dim = self.model.get_dimension()

    def __call__(self, word: str) -> np.ndarray:
        return self.model.get_word_vector(word).astype(np.float32)


def answer_targets(
    answers: list[str], ocr_tokens: list[str], vocab: dict[str, int], max_ocr: int, steps: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(targets [steps, V + max_ocr], prev_inds [steps], step_mask [steps]) of M4C's decoding loss.

    The answer taught is the most frequent of the 10 whose every word is in the vocabulary or among the
    OCR tokens (else the most frequent one, its unmatched words as <unk>). Step t's target marks the
    word's vocabulary entry and every OCR token equal to it; the word fed back at step t + 1 is its
    vocabulary entry when it has one, else its first OCR token."""
    v = len(vocab)
    ocr = [t.lower() for t in ocr_tokens[:max_ocr]]
    ranked = [a for a, _ in Counter(answers).most_common()]

    def matchable(a: str) -> bool:
        return all(w in vocab or w in ocr for w in answer_words(a))

    answer = next((a for a in ranked if matchable(a)), ranked[0] if ranked else "")
    words = answer_words(answer)[: steps - 1]
    targets = torch.zeros(steps, v + max_ocr)
    prev = torch.zeros(steps, dtype=torch.long)
    mask = torch.zeros(steps)
    prev[0] = BOS
    for t, word in enumerate([*words, None]):
        if word is None:
            targets[t, EOS] = 1.0
            mask[t] = 1.0
            break
        copies = [i for i, tok in enumerate(ocr) if tok == word]
        if word in vocab:
            targets[t, vocab[word]] = 1.0
        for i in copies:
            targets[t, v + i] = 1.0
        if word not in vocab and not copies:
            targets[t, UNK] = 1.0
        mask[t] = 1.0
        if t + 1 < steps:
            prev[t + 1] = vocab.get(word, v + copies[0] if copies else UNK)
    return targets, prev, mask


@dataclass
class Features:
    """Where one split's features are: object regions, OCR-box regions, OCR tokens, word vectors."""

    objects: Any  # FeatureStore keyed by image_key
    ocr_regions: Any  # FeatureStore of the OCR boxes' region features, rows in the OCR file's token order
    ocr: dict[str, tuple[list[str], np.ndarray]]
    word_vectors: Any  # WordVectors or FastTextVectors


class TextVQADataset(Dataset):
    """One split as M4C batches: question word-pieces, objects, OCR tokens, the spatial graph over
    objects ‖ OCR tokens, and (with answers) the decoding targets."""

    def __init__(
        self,
        questions: list[dict[str, Any]],
        features: Features,
        tokenizer,
        answer_vocab: list[str],
        sizes: dict[str, Any],
        *,
        graph: str = "spatial",
        seed: int = 0,
        overlap_iou: float = 0.5,
        distance_threshold: float = 0.5,
    ):
        self.questions, self.features, self.tokenizer = questions, features, tokenizer
        self.answer_vocab = answer_vocab
        self.vocab = {w: i for i, w in enumerate(answer_vocab)}
        self.s, self.graph, self.seed = sizes, graph, seed
        self.overlap_iou, self.distance_threshold = overlap_iou, distance_threshold
        self.ready = None  # ready.ReadyItems once `hold_ready` ran: items served from stacked tensors
        self.ready_source: tuple[Path | None, dict[str, Path]] | None = None  # hold_ready's arguments
        missing = [q["image_id"] for q in questions if q["image_id"] not in features.ocr]
        if missing:
            raise ReproError(f"{len(missing)} question images have no OCR record (e.g. {missing[0]})")

    def __len__(self) -> int:
        return len(self.questions)

    def ocr_tokens(self, index: int) -> list[str]:
        return self.features.ocr[self.questions[index]["image_id"]][0][: self.s["max_ocr_tokens"]]

    def __getitem__(self, index: int) -> dict[str, Any]:
        if self.ready is not None:
            return self.ready[index]
        return self.compute_item(index)

    def hold_ready(self, cache_dir: Path | None, inputs: dict[str, Path]) -> None:
        """Compute every item once and serve them from stacked tensors from now on (`ready.py`); the file of
        them goes to `cache_dir`, and a later dataset over the same data reads it back."""
        from repro.families.sa_m4c.ready import ready_items

        self.ready = ready_items(self, cache_dir, inputs)
        self.ready_source = (cache_dir, inputs)

    def subset(self, questions: list[dict[str, Any]]) -> TextVQADataset:
        """The same split's features, vocabularies, sizes and graph over `questions` (some of this split's), held as
        ready tensors where this one is."""
        out = TextVQADataset(
            questions,
            self.features,
            self.tokenizer,
            self.answer_vocab,
            self.s,
            graph=self.graph,
            seed=self.seed,
            overlap_iou=self.overlap_iou,
            distance_threshold=self.distance_threshold,
        )
        if self.ready_source is not None:
            out.hold_ready(*self.ready_source)
        return out

    def _boxes(self, index: int) -> tuple[np.ndarray, dict[str, Any], int]:
        """(objects ‖ OCR boxes [n_obj + n_ocr, 4] normalised, zeros for padding; the object record; its count)."""
        q, s = self.questions[index], self.s
        obj = self.features.objects.get(image_key(q["image_id"]))
        n_obj, n_ocr = s["max_objects"], s["max_ocr_tokens"]
        k = min(obj["count"], n_obj)
        scale = np.array([obj["width"], obj["height"], obj["width"], obj["height"]], dtype=np.float64)
        obj_boxes = np.zeros((n_obj, 4))
        obj_boxes[:k] = obj["boxes"][:k] / scale
        boxes = self.features.ocr[q["image_id"]][1]
        m = min(len(boxes), n_ocr)
        ocr_boxes = np.zeros((n_ocr, 4))
        ocr_boxes[:m] = boxes[:m]
        return np.concatenate([obj_boxes, ocr_boxes]), obj, k

    def relations_of(self, index: int, graph: str | None = None) -> torch.Tensor:
        """The [n, n] graph labels of item `index`: the spatial graph of its boxes, or M4C-Random's draw (a function
        of the dataset's seed and the image)."""
        boxes = self._boxes(index)[0]
        seed = [self.seed, image_key(self.questions[index]["image_id"]) % 2**32]
        labels = relation_labels(boxes, graph or self.graph, seed, self.overlap_iou, self.distance_threshold)
        return torch.from_numpy(labels)

    def compute_item(self, index: int, graph: str | None = None) -> dict[str, Any]:
        """Item `index` computed from the files: question word-pieces, features, OCR vectors, graph, targets."""
        q, s = self.questions[index], self.s
        enc = self.tokenizer(q["question"], max_length=s["max_question_tokens"], truncation=True, padding="max_length")
        n_obj, n_ocr = s["max_objects"], s["max_ocr_tokens"]

        all_boxes, obj, k = self._boxes(index)
        obj_feat = np.zeros((n_obj, obj["features"].shape[1]), dtype=np.float32)
        obj_feat[:k] = obj["features"][:k]

        tokens = self.features.ocr[q["image_id"]][0]
        m = min(len(tokens), n_ocr)
        regions = self.features.ocr_regions.get(image_key(q["image_id"]))
        ocr_app = np.zeros((n_ocr, regions["features"].shape[1]), dtype=np.float32)
        ocr_app[: min(m, regions["count"])] = regions["features"][: min(m, regions["count"])]
        fasttext = np.zeros((n_ocr, s["fasttext_dim"]), dtype=np.float32)
        phocs = np.zeros((n_ocr, s["phoc_dim"]), dtype=np.float32)
        for i, tok in enumerate(tokens[:m]):
            fasttext[i] = self.features.word_vectors(tok)
            phocs[i] = phoc(tok)[: s["phoc_dim"]]

        seed = [self.seed, image_key(q["image_id"]) % 2**32]
        relations = relation_labels(all_boxes, graph or self.graph, seed, self.overlap_iou, self.distance_threshold)
        item = {
            "question_ids": torch.tensor(enc["input_ids"]),
            "question_mask": torch.tensor(enc["attention_mask"], dtype=torch.bool),
            "obj_features": torch.from_numpy(obj_feat),
            "obj_boxes": torch.from_numpy(all_boxes[:n_obj]).float(),
            "obj_mask": torch.arange(n_obj) < k,
            "ocr_fasttext": torch.from_numpy(fasttext),
            "ocr_phoc": torch.from_numpy(phocs),
            "ocr_features": torch.from_numpy(ocr_app),
            "ocr_boxes": torch.from_numpy(all_boxes[n_obj:]).float(),
            "ocr_mask": torch.arange(n_ocr) < m,
            "relations": torch.from_numpy(relations),
            "question_id": torch.tensor(q["question_id"]),
        }
        if q.get("answers"):
            targets, prev, mask = answer_targets(q["answers"], tokens, self.vocab, n_ocr, s["decode_steps"])
            item.update(targets=targets, prev_inds=prev, step_mask=mask)
        return item

    def answer_of(self, index: int, predicted: list[int]) -> tuple[str, bool]:
        """The answer string of predicted indices (vocabulary ‖ OCR) up to </s>, and whether it copied."""
        v = len(self.answer_vocab)
        tokens = self.ocr_tokens(index)
        words, copied = [], False
        for i in predicted:
            if i == EOS:
                break
            if i >= v:
                copied = True
                words.append(tokens[i - v] if i - v < len(tokens) else "")
            elif i > EOS:
                words.append(self.answer_vocab[i])
        return " ".join(w for w in words if w), copied
