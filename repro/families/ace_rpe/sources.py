"""Where an ace-rpe run reads its data: the BERT vocabulary, the pre-training json files with their image
folder, per retrieval data set its train and test json files and image folder, and the weights a row
starts from. At paper scale they are ALBEF's files under the data folder, checked before any training;
at the generated scales the generator's folders (`synthetic.py`, `synthetic_tasks.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.synthetic import RETRIEVAL_NAMES, GeneratorConfig
from repro.paths import data_dir

DEIT_FILE = "deit_base_patch16_224-b5f2ef4d.pth"  # `repro download deit-b16`
RELEASED = {"4m": "ALBEF_4M.pth", "14m": "ALBEF.pth"}  # ALBEF's pre-training checkpoints (`init: albef`)


def released_checkpoint(config: ALBEFConfig) -> Path:
    """ALBEF's released pre-training checkpoint of the row's corpus, checked: missing, the command that gets it."""
    path = data_dir() / "albef-checkpoints" / RELEASED[config.pretrain]
    if not path.is_file():
        raise ReproError(f"{path} is missing: get it with `repro download albef-checkpoints`")
    return path


PRETRAIN_FILES = {  # ALBEF's configs/Pretrain.yaml train_file; 14m adds Conceptual 12M
    "4m": ("coco.json", "vg.json", "cc3m_train.json", "cc3m_val.json", "sbu.json"),
    "14m": ("coco.json", "vg.json", "cc12m.json", "cc3m_train.json", "cc3m_val.json", "sbu.json"),
}
IMAGE_FOLDERS = {"flickr30k": "flickr30k", "coco-retrieval": "coco-images"}  # ALBEF's image_root per data set


@dataclass(frozen=True)
class Sources:
    """Where a run reads its data: the BERT vocabulary, the pre-training json files with their image
    folder, and per retrieval data set its train and test json files and image folder."""

    vocab: Path
    pretrain: tuple[tuple[Path, Path], ...]  # (json, image root)
    retrieval: dict[str, tuple[Path, Path, Path]]  # data set -> (train json, test json, image root)
    augment: bool = False  # ALBEF's training augmentations (paper scale)
    initial: tuple[Path, Path] | None = None  # DeiT-B/16 and bert-base-uncased weights pre-training starts from


def synthetic_root(settings: dict[str, Any]) -> Path:
    """The generated retrieval and pre-training data (`synthetic.py`), a folder per generator config."""
    cfg = GeneratorConfig.from_mapping(settings.get("generator"))
    return data_dir() / "synthetic" / f"albef-{cfg.key()}"


def tasks_root(settings: dict[str, Any]) -> Path:
    """The generated downstream data (`synthetic_tasks.py`), a folder apart from the retrieval data."""
    from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig

    cfg = TaskGeneratorConfig.from_mapping(settings.get("task_generator"))
    return data_dir() / "synthetic" / f"albef-tasks-{cfg.key()}"


def paper_sources(config: ALBEFConfig, datasets: list[str]) -> Sources:
    """The paper-scale files under the data folder, checked: the first missing one is named with the
    command that gets it. ALBEF's json files (`repro download albef-data`: `data/*.json`) name the
    retrieval images relative to the data set's folder (Flickr30K: `flickr30k-images/<id>.jpg`, COCO:
    `val2014/...`); the pre-training files name absolute paths, which the user rewrites to where the
    images are (ALBEF's README), or paths relative to `albef-data/images`."""
    root = data_dir()
    albef = root / "albef-data" / "data"
    vocab = root / "bert-base-uncased"
    need = [(vocab / "vocab.txt", "repro download bert-base-uncased")]
    initial = None
    if config.init == "pretrain":  # ALBEF pre-trains from DeiT-B/16 and bert-base-uncased
        initial = (root / "deit-b16" / DEIT_FILE, vocab / "pytorch_model.bin")
        need += [(initial[0], "repro download deit-b16"), (initial[1], "repro download bert-base-uncased")]
    corpus = [] if config.init == "albef" else PRETRAIN_FILES[config.pretrain]  # released weights: no corpus
    pretrain = tuple((albef / name, root / "albef-data" / "images") for name in corpus)
    need += [(path, "repro download albef-data") for path, _ in pretrain]
    retrieval = {}
    for dataset in datasets:
        name = RETRIEVAL_NAMES[dataset]
        retrieval[dataset] = (albef / f"{name}_train.json", albef / f"{name}_test.json", root / IMAGE_FOLDERS[dataset])
        need += [(path, "repro download albef-data") for path in retrieval[dataset][:2]]
    for path, command in need:
        if not path.is_file():
            raise ReproError(f"{path} is missing: get it with `{command}`")
    return Sources(vocab=vocab, pretrain=pretrain, retrieval=retrieval, augment=True, initial=initial)


def read_split(path: Path, kind: str, image_root: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """An ALBEF json file's entries (the first `limit`), its first image checked before any training."""
    from repro.families.ace_rpe.data import read_annotations

    entries = read_annotations(path, kind)[:limit]
    first = image_root / entries[0]["image"]
    if not first.is_file():
        raise ReproError(
            f"{first} is missing (the first image of {path.name}): the images are yours to put in place "
            f"(`repro run ... --dry-run` says where)"
        )
    return entries


def run_vocabulary(data: dict[str, Path]) -> Path:
    """The vocabulary folder a generated run tokenizes with (`prepare_data`'s folders): the one whose vocab.txt holds
    every word of the others: the tasks' (it adds their words to the captions'), or the pre-training folder's where
    its generator says `task_words` (it adds the tasks' words, and the place words of `place_captions`)."""
    folders = [data[k] for k in ("tasks", "root") if k in data]
    words = [set((f / "vocab" / "vocab.txt").read_text().split()) for f in folders]
    for folder, own in zip(folders, words):
        if all(own >= other for other in words):
            return folder / "vocab"
    raise ReproError(
        f"{folders[1]}: its captions have words the tasks' vocabulary lacks; set generator.task_words: true so that "
        f"one vocabulary holds both"
    )


def synthetic_sources(root: Path, datasets: list[str]) -> Sources:
    retrieval = {d: (root / f"{n}_train.json", root / f"{n}_test.json", root) for d, n in RETRIEVAL_NAMES.items()}
    return Sources(vocab=root / "vocab", pretrain=((root / "pretrain.json", root),), retrieval=retrieval)


# --- the downstream heads (`tasks.py`) ------------------------------------------------------------

TASK_FILES = {  # ALBEF's configs/{VQA,VE,NLVR,Grounding}.yaml: train_file, val_file, test_file (data/)
    "vqa": ("vqa_train.json", "vqa_val.json", "vg_qa.json", "answer_list.json"),
    "snli-ve": ("ve_train.json", "ve_dev.json", "ve_test.json"),
    "nlvr2": ("nlvr_train.json", "nlvr_dev.json", "nlvr_test.json"),
    "grounding": ("refcoco+_train.json", "refcoco+_val.json", "refcoco+_test.json", "refcoco+/dets.json"),
}
TASK_IMAGES = {  # the image folder of each task's json files, under the data folder (ALBEF's *_root)
    "vqa": "coco-images",  # vqa_root: train2014/, val2014/, test2015/
    "vg": "vg-images",  # vg_root: the Visual Genome images as vg_qa.json names them
    "snli-ve": "flickr30k/flickr30k-images",  # image_root: <Flickr30K id>.jpg
    "nlvr2": "nlvr2",  # image_root: the NLVR2 images as nlvr_*.json name them
    "grounding": "coco-images",  # image_root: train2014/ (RefCOCO+ is on COCO train2014)
}
REFER_FOLDER = "refcoco-plus/refcoco+"  # `repro download refcoco-plus`: refs(unc).p, instances.json


@dataclass(frozen=True)
class TaskFiles:
    """Where the downstream heads read: ALBEF's json files (`json`: name -> path), each task's image folder
    (`images`: "vqa", "vg", "snli-ve", "nlvr2", "grounding"), the server's test2015 question file (VQA's test
    set, ALBEF's `vqa_test.json` holding test-dev only), the refer annotations' folder, the NLVR2
    text-assignment pairs (ALBEF's configs/NLVR_pretrain.yaml: the 4M corpus with their image folder), whether
    they are ALBEF's files (paper scale: its training augmentations, its test batch sizes) and --limit."""

    json: dict[str, Path]
    images: dict[str, Path]
    questions: Path
    refer: Path
    assign: tuple[tuple[Path, Path], ...]
    paper: bool = False
    limit: int | None = None  # --limit N: the first N entries of each file


def generated_task_files(root: Path, pretrain_root: Path | None = None) -> TaskFiles:
    """The generated downstream files (`synthetic_tasks.py`): every json and image under `root`."""
    names = [name for files in TASK_FILES.values() for name in files] + ["vqa_test.json", "vqa_test_answers.json"]
    root = Path(root)
    pretrain = pretrain_root or root
    return TaskFiles(
        json={name: root / name for name in names},
        images={task: root for task in TASK_IMAGES},
        questions=root / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json",
        refer=root / "refcoco+",
        assign=((pretrain / "pretrain.json", pretrain),),
    )


def paper_task_files(tasks: list[str], limit: int | None = None) -> TaskFiles:
    """The paper-scale files of the heads `tasks` under the data folder, checked before any training: the
    first missing json file, question file or image folder is named with the command that gets it. The
    first image each json file names is checked too (the first `limit` entries are what a --limit run reads)."""
    from repro.datasets.vqa_server import question_file

    root = data_dir()
    albef = root / "albef-data" / "data"
    names = [name for files in TASK_FILES.values() for name in files]
    files = TaskFiles(
        json={name: albef / name for name in names},
        images={task: root / folder for task, folder in TASK_IMAGES.items()},
        questions=question_file(root, "vqa2", "test"),
        refer=root / REFER_FOLDER,
        assign=tuple((albef / name, root / "albef-data" / "images") for name in PRETRAIN_FILES["4m"]),
        paper=True,
        limit=limit,
    )
    for task in tasks:
        need = [(files.json[name], "repro download albef-data") for name in TASK_FILES[task]]
        if task == "vqa":
            need.append((files.questions, "repro download vqa2"))
        elif task == "nlvr2":  # the text-assignment step reads the 4M pre-training corpus (NLVR_pretrain.yaml)
            need += [(path, "repro download albef-data") for path, _ in files.assign]
        elif task == "grounding":
            need += [(files.refer / name, "repro download refcoco-plus") for name in ("refs(unc).p", "instances.json")]
        for path, command in need:
            if not path.is_file():
                raise ReproError(f"{path} is missing: get it with `{command}`")
    return files


def check_first_image(path: Path, image: Path, command: str | None = None) -> None:
    """The first image a json file names, before any training: missing, one line saying where it goes."""
    if not image.is_file():
        how = f"get it with `{command}`" if command else "the images are yours to put in place"
        raise ReproError(
            f"{image} is missing (the first image of {path.name}): {how} (`repro run ... --dry-run` says where)"
        )
