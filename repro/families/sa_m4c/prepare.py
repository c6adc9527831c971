"""Paper-scale data of sa-m4c: the released files, checked in order, converted into the toolkit's layout.

Inputs (under the data folder, one catalog entry each):

- `textvqa/`: TextVQA 0.5.1 questions and the Rosetta(-ml) OCR results (`repro download textvqa`);
- `textvqa-mmf/`: M4C's release (`repro download textvqa-mmf`): region features of the ResNet-101
  detector (`detectron.lmdb`), the Rosetta-en OCR tokens in imdb files (`imdb_<split>_ocr_en.npy`),
  their OCR-box features (`ocr_en_frcn_features.lmdb`) and `fixed_answer_vocab_textvqa_5k.txt`;
- `textvqa-sam/`: SA-M4C's release (manual download): the Google OCR tokens in imdb files
  (`tvqa_<split>_imdb.npy`) and the ResNeXt-152 object and OCR-box features (`tvqa_*_obj.lmdb`,
  `tvqa_*_ocr.lmdb`);
- `bert-base-uncased/` (question encoder and WordPiece vocabulary), `fasttext-wiki-en/wiki.en.bin`.

`prepare_paper(ocr, det)` writes, under `prepared/sa-m4c/<ocr>-<det>/`, one feature store of object
regions and one of OCR-box regions per split (keyed by `data.image_key`) and the OCR tokens in the
Rosetta layout (`data.OCR_FILES`). `paper_data` names the first missing input and the command that
gets it.

imdb files (mmf `annotation_database.py`): `np.load(allow_pickle=True)` gives a dict {"metadata",
"data"} or an object array whose element 0 is a metadata header; each record has `image_id`,
`ocr_tokens` and `ocr_normalized_boxes` ([n, 4] in [0, 1]) or `ocr_info`. LMDB features (mmf
`LMDBFeatureReader`): key `b"keys"` holds the pickled list of image keys; each key maps to a pickled
dict with `features` [n, 2048], `bbox` [n, 4] (pixels), `image_width`, `image_height`; the image id is
the key's file name without extension.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from repro.errors import ReproError
from repro.paths import data_dir
from repro.specs import Spec

SPLITS = ("train", "val", "test")
FASTTEXT_FILE = "wiki.en.bin"
ANSWER_VOCAB = "fixed_answer_vocab_textvqa_5k.txt"
# (OCR system, detector) -> where its tokens and features come from
MMF_OCR_IMDB = "imdb_{split}_ocr_en.npy"
SAM_IMDB = "tvqa_{split}_imdb.npy"
SAM_LMDB = {"train": "tvqa_trainval_{kind}.lmdb", "val": "tvqa_trainval_{kind}.lmdb", "test": "tvqa_test_{kind}.lmdb"}


def raw_dir() -> Path:
    """The TextVQA files of `repro download textvqa`."""
    return data_dir() / "textvqa"


def prepared_root(ocr: str, det: str) -> Path:
    return data_dir() / "prepared" / "sa-m4c" / f"{ocr}-{det}"


# --- readers of the released formats ---------------------------------------------------------------


def read_imdb(path: Path) -> list[dict[str, Any]]:
    """The per-question records of an mmf / sam-textvqa imdb `.npy` file."""
    try:
        data = np.load(path, allow_pickle=True)
    except FileNotFoundError:
        raise ReproError(f"{path}: the imdb file is missing") from None
    except (OSError, ValueError, pickle.UnpicklingError) as exc:
        raise ReproError(f"{path}: unreadable imdb file ({exc})") from None
    if data.dtype == object and data.shape == ():
        data = data.item()
    if isinstance(data, dict):
        records = list(data.get("data", []))
    else:
        records = [r for r in data.tolist() if isinstance(r, dict) and "image_id" in r]
    if not records:
        raise ReproError(f"{path}: no question records in the imdb file")
    return records


def imdb_ocr(records: list[dict[str, Any]], where: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """{image_id: (OCR tokens, normalised boxes [n, 4])} of imdb records (one entry per image)."""
    out: dict[str, tuple[list[str], np.ndarray]] = {}
    for r in records:
        image_id = str(r["image_id"])
        if image_id in out:
            continue
        tokens = [str(t) for t in r.get("ocr_tokens", [])]
        boxes = r.get("ocr_normalized_boxes")
        if boxes is None and "ocr_info" in r:
            boxes = [
                [b["top_left_x"], b["top_left_y"], b["top_left_x"] + b["width"], b["top_left_y"] + b["height"]]
                for b in (info["bounding_box"] for info in r["ocr_info"])
            ]
        boxes = np.asarray(boxes if boxes is not None else np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4)
        if len(boxes) != len(tokens):
            raise ReproError(f"{where}: image {image_id} has {len(tokens)} OCR tokens but {len(boxes)} boxes")
        out[image_id] = (tokens, boxes)
    return out


def write_ocr_json(ocr: dict[str, tuple[list[str], np.ndarray]], out: Path) -> None:
    """OCR tokens and boxes in the Rosetta OCR layout the reader takes (`data.read_ocr`)."""
    from repro.utils import write_json_atomic

    data = []
    for image_id, (tokens, boxes) in ocr.items():
        info = [
            {
                "word": t,
                "bounding_box": {
                    "top_left_x": float(b[0]),
                    "top_left_y": float(b[1]),
                    "width": float(b[2] - b[0]),
                    "height": float(b[3] - b[1]),
                },
            }
            for t, b in zip(tokens, boxes)
        ]
        data.append({"image_id": image_id, "ocr_tokens": tokens, "ocr_info": info})
    write_json_atomic(out, {"data": data})


def store_from_lmdb(path: Path, out: Path, image_ids: set[str], max_boxes: int) -> Path:
    """A feature store of the images `image_ids` from an mmf-layout LMDB of region features."""
    try:
        import lmdb
    except ImportError:
        raise ReproError("reading the released LMDB features needs the `lmdb` package: pip install lmdb") from None
    from repro.data.store import FeatureStoreWriter
    from repro.families.sa_m4c.data import image_key

    if not Path(path).exists():
        raise ReproError(f"{path}: the LMDB feature folder is missing")
    env = lmdb.open(str(path), readonly=True, lock=False, readahead=False, subdir=Path(path).is_dir())
    try:
        with env.begin() as txn:
            keys = pickle.loads(txn.get(b"keys"))
            wanted = [k for k in keys if _lmdb_image_id(k) in image_ids]
            writer = None
            for key in wanted:
                item = pickle.loads(txn.get(key if isinstance(key, bytes) else str(key).encode()))
                features = np.asarray(item["features"], dtype=np.float32)
                if writer is None:
                    writer = FeatureStoreWriter(out, len(wanted), max_boxes, features.shape[1])
                boxes = np.asarray(item.get("bbox", item.get("boxes")), dtype=np.float32).reshape(-1, 4)
                writer.add(
                    image_key(_lmdb_image_id(key)),
                    features[: len(boxes)],
                    boxes[: len(features)],
                    int(item["image_width"]),
                    int(item["image_height"]),
                )
    except (KeyError, TypeError, pickle.UnpicklingError, lmdb.Error) as exc:
        raise ReproError(f"{path}: not an mmf-layout LMDB of region features ({exc!r})") from None
    finally:
        env.close()
    if writer is None:
        raise ReproError(f"{path}: none of the {len(image_ids)} images of the split has features")
    writer.close()
    return out


def _lmdb_image_id(key) -> str:
    text = key.decode() if isinstance(key, bytes) else str(key)
    return Path(text).stem


# --- what a paper-scale run needs ------------------------------------------------------------------


def _inputs(ocr: str, det: str) -> list[tuple[Path, str, str]]:
    """(folder, file name, the command that gets it) in the order a run needs them."""
    root = data_dir()
    mmf, sam = root / "textvqa-mmf", root / "textvqa-sam"
    need = [(raw_dir(), f"TextVQA_0.5.1_{s}.json", "repro download textvqa") for s in SPLITS]
    need.append((root / "bert-base-uncased", "pytorch_model.bin", "repro download bert-base-uncased"))
    need.append((root / "fasttext-wiki-en", FASTTEXT_FILE, "repro download fasttext-wiki-en"))
    need.append((mmf, ANSWER_VOCAB, "repro download textvqa-mmf"))
    if ocr == "rosetta-ml":
        need += [(raw_dir(), f"TextVQA_Rosetta_OCR_v0.2_{s}.json", "repro download textvqa") for s in SPLITS]
    elif ocr == "rosetta-en":
        need += [(mmf, MMF_OCR_IMDB.format(split=s), "repro download textvqa-mmf") for s in SPLITS]
    else:
        need += [(sam, SAM_IMDB.format(split=s), "repro download textvqa-sam") for s in SPLITS]
    for folder, name, cmd in _feature_sources(ocr, det).values():
        if name is None:
            raise ReproError(f"OCR system {ocr}: {cmd}")
        need += [(folder, n, cmd) for n in sorted({name.format(part=p) for p in ("trainval", "test")})]
    return need


def _feature_sources(ocr: str, det: str) -> dict[str, tuple[Path, str | None, str]]:
    """(folder, LMDB name with a {split} slot or a fixed one, command) of the object and OCR-box features.

    Objects follow the detector (M4C's ResNet-101 release, SA-M4C's ResNeXt-152 release); the OCR-box
    features follow the OCR system, since they must describe the same boxes (Rosetta-en: M4C's
    release; Google OCR: SA-M4C's release, ResNeXt-152, also for the Google + ResNet-101 row)."""
    root = data_dir()
    mmf, sam = root / "textvqa-mmf", root / "textvqa-sam"
    objects = (mmf, "detectron.lmdb", "repro download textvqa-mmf")
    if det != "resnet-101":
        objects = (sam, "tvqa_{part}_obj.lmdb", "repro download textvqa-sam")
    regions = {
        "rosetta-en": (mmf, "ocr_en_frcn_features.lmdb", "repro download textvqa-mmf"),
        "google": (sam, "tvqa_{part}_ocr.lmdb", "repro download textvqa-sam"),
        "rosetta-ml": (mmf, None, "M4C's Rosetta-ml OCR-box features (mmf zoo textvqa.ocr_ml) are not in the catalog"),
    }[ocr]
    return {"objects": objects, "regions": regions}


def _lmdb_for(source: tuple[Path, str | None, str], split: str) -> Path:
    folder, name, _ = source
    return locate(folder, name.format(part="test" if split == "test" else "trainval")) or folder / name


def locate(folder: Path, name: str) -> Path | None:
    """`folder/name`, or the first file or folder of that name below it (the archives unpack into subfolders)."""
    if (folder / name).exists():
        return folder / name
    return next(iter(sorted(folder.rglob(name))), None) if folder.is_dir() else None


def missing_input(ocr: str, det: str) -> tuple[Path, str] | None:
    """The first input a paper-scale run of this OCR system and detector lacks, and its command."""
    return next(((folder / name, cmd) for folder, name, cmd in _inputs(ocr, det) if locate(folder, name) is None), None)


def paper_data(spec: Spec, configs: list | None = None) -> dict[str, Any]:
    """The prepared data of a paper-scale spec's rows (or of `configs`): a ReproError naming the first missing
    file and its command, else the converted data's folder of each (OCR system, detector) under `roots`
    (keyed `<ocr>-<det>`), and the BERT folder, FastText model and answer vocabulary every row shares."""
    if configs is None:
        configs = [r.config for r in spec.rows if r.config is not None]
    for cfg in configs:
        gap = missing_input(cfg.ocr, cfg.det_backbone)
        if gap is not None:
            path, command = gap
            raise ReproError(
                f"{spec.id}: paper scale needs {path}; run `{command}` (`repro download --list` shows what is present)"
            )
    roots: dict[str, Path] = {}
    for cfg in configs:
        roots[f"{cfg.ocr}-{cfg.det_backbone}"] = prepare_paper(cfg.ocr, cfg.det_backbone)
    root = data_dir()
    return {
        "roots": roots,
        "bert": root / "bert-base-uncased",
        "fasttext": locate(root / "fasttext-wiki-en", FASTTEXT_FILE),
        "answer_vocab": locate(root / "textvqa-mmf", ANSWER_VOCAB),
    }


def prepare_paper(ocr: str, det: str) -> Path:
    """Convert the released OCR tokens and LMDB features of one (OCR system, detector) into the toolkit's
    layout, once (`done.json` marks a finished folder)."""
    from repro.families.sa_m4c.data import OCR_FILES, read_questions
    from repro.utils import write_json_atomic

    out = prepared_root(ocr, det)
    if (out / "done.json").is_file():
        return out
    sources = _feature_sources(ocr, det)
    for split in SPLITS:
        ids = {q["image_id"] for q in read_questions(raw_dir() / f"TextVQA_0.5.1_{split}.json")}
        if ocr != "rosetta-ml":
            folder, name = (
                (data_dir() / "textvqa-mmf", MMF_OCR_IMDB)
                if ocr == "rosetta-en"
                else (data_dir() / "textvqa-sam", SAM_IMDB)
            )
            imdb = locate(folder, name.format(split=split)) or folder / name.format(split=split)
            write_ocr_json(imdb_ocr(read_imdb(imdb), imdb), out / OCR_FILES[ocr].format(split=split))
        store_from_lmdb(_lmdb_for(sources["objects"], split), out / f"{split}.objects.store", ids, max_boxes=100)
        store_from_lmdb(_lmdb_for(sources["regions"], split), out / f"{split}.ocr.store", ids, max_boxes=50)
    write_json_atomic(out / "done.json", {"ocr": ocr, "det": det})
    return out


def row_root(spec: Spec, config, data: dict[str, Any]) -> Path:
    """A paper-scale row's converted data: `paper_data`'s folder of its OCR system and detector (converted
    now if the run's data lacks it). TextVQA-only rows so far."""
    if config.with_stvqa or spec.datasets[0] != "textvqa":
        raise ReproError(
            f"{spec.id}: paper-scale training on ST-VQA (with_stvqa, Table 3) is not implemented yet; "
            f"TextVQA-only rows run"
        )
    key = f"{config.ocr}-{config.det_backbone}"
    return data["roots"].get(key) or paper_data(spec, [config])["roots"][key]


def paper_inputs(config, root: Path, data: dict[str, Any]) -> dict:
    """What a paper-scale row reads (`splits.read_splits`): the real questions, the OCR tokens and features
    in its converted data `root` (`row_root`), and the vocabularies of `paper_data`."""
    from transformers import BertTokenizerFast

    from repro.families.sa_m4c.data import OCR_FILES, FastTextVectors, read_answer_vocab, read_questions

    ocr_dir = raw_dir() if config.ocr == "rosetta-ml" else root
    splits = {
        split: {
            "questions": read_questions(raw_dir() / f"TextVQA_0.5.1_{split}.json"),
            "ocr": ocr_dir / OCR_FILES[config.ocr].format(split=split),
            "objects": root / f"{split}.objects.store",
            "regions": root / f"{split}.ocr.store",
        }
        for split in SPLITS
    }
    return {
        "splits": splits,
        "tokenizer": BertTokenizerFast.from_pretrained(str(data["bert"])),
        "vocab": read_answer_vocab(data["answer_vocab"]),
        "words": FastTextVectors(data["fasttext"]),
        "sizes": {},
    }


def evaluated_on(spec, config):
    """The row's config as `--weights` reads its data: on TextVQA, ST-VQA joins only the training set
    (`with_stvqa`), and nothing is trained here, so the row reads TextVQA's val and test alone."""
    return config.model_copy(update={"with_stvqa": False}) if spec.datasets[0] == "textvqa" else config
