"""What a spec's columns ask of an ace-rpe row: the retrieval data sets it fine-tunes on (recall columns)
and the downstream models it fine-tunes (VQA v2, SNLI-VE, NLVR2 and RefCOCO+ grounding columns)."""

from __future__ import annotations

from repro.specs import Spec

TASK_OF_DATASET = {"vqa2": "vqa", "snli-ve": "snli-ve", "nlvr2": "nlvr2"}  # spec dataset -> downstream model


def spec_tasks(spec: Spec | None) -> list[str]:
    """The models a spec's columns fine-tune, in column order: retrieval (recall columns), grounding
    (the retrieval model, fine-tuned on RefCOCO+), vqa, snli-ve, nlvr2."""
    if spec is None:
        return ["retrieval"]
    tasks = [
        "grounding" if c.metric == "grounding" else TASK_OF_DATASET.get(c.dataset or "", "retrieval")
        for c in spec.columns
        if c.metric != "flops"
    ]
    return list(dict.fromkeys(tasks)) or ["retrieval"]


def column_dataset(spec: Spec, column) -> str:
    """A recall column's data set; Table 7's columns name none: MS-COCO, the spec's only one."""
    if column.dataset:
        return column.dataset
    return "coco-retrieval" if "coco-images" in spec.datasets else "flickr30k"


def recall_datasets(spec: Spec) -> list[str]:
    """The retrieval data sets of a spec's recall columns, in column order."""
    return list(dict.fromkeys(column_dataset(spec, c) for c in spec.columns if c.metric == "recall"))


def downstream(column) -> bool:
    """Whether a column is a downstream one (VQA, SNLI-VE, NLVR2, grounding: `tasks.py`)."""
    return column.dataset in TASK_OF_DATASET or column.metric == "grounding"


def has_tasks(spec: Spec) -> bool:
    """Whether the spec has downstream columns (VQA, SNLI-VE, NLVR2, grounding: `tasks.py`)."""
    return any(downstream(c) for c in spec.columns)


def downstream_names(spec: Spec) -> list[str]:
    """The downstream columns' data sets (VQA v2, SNLI-VE, NLVR2, RefCOCO+) in column order."""
    names = {"vqa2": "VQA v2", "snli-ve": "SNLI-VE", "nlvr2": "NLVR2"}
    out = [names[c.dataset] if c.dataset in names else "RefCOCO+" for c in spec.columns if downstream(c)]
    return list(dict.fromkeys(out))


def spec_heads(spec: Spec) -> list[str]:
    """The heads a spec's columns ask for, in column order (VQA, SNLI-VE, NLVR2), then grounding."""
    columns = spec.columns
    wanted = list(dict.fromkeys(TASK_OF_DATASET[c.dataset] for c in columns if c.dataset in TASK_OF_DATASET))
    if any(c.metric == "grounding" for c in columns):
        wanted.append("grounding")
    return wanted
