"""A row's TextVQA sets: where each split's questions, OCR tokens and region features are (the generated
data of `synthetic.py`, or the prepared real data of `prepare.py`), read into `data.TextVQADataset`s
with the row's spatial graph, and the model sizes the features decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.families.base import RunContext
from repro.families.sa_m4c.build import as_config, model_sizes


@dataclass(frozen=True)
class Splits:
    """A row's train, val and test sets, answer vocabulary, model sizes and BERT weights (paper scale)."""

    train: Any  # data.TextVQADataset
    val: Any
    test: Any
    vocab: list[str]
    sizes: dict[str, Any]
    bert: Path | None = None


def read_splits(ctx: RunContext) -> Splits:
    """The row's sets over the data its run prepared (`ctx.data`)."""
    config = as_config(ctx.config)
    if ctx.generated:
        inputs, bert = generated_inputs(ctx, ctx.data, config), None
    else:
        from repro.families.sa_m4c.prepare import paper_inputs, row_root

        root = row_root(ctx.spec, config, ctx.data)
        inputs, bert = paper_inputs(config, root, ctx.data), ctx.data["bert"]
        inputs["sizes"] = ctx.settings.get("sizes", {})  # `sizes.*` overrides (a variant) hold here too
    sets, vocab, sizes = datasets(ctx, config, inputs)
    return Splits(sets["train"], sets["val"], sets["test"], vocab, sizes, bert)


def generated_inputs(ctx: RunContext, data: dict[str, Path], config) -> dict[str, Any]:
    """Where each split's questions, OCR tokens and features are in generated data, and the vocabularies."""
    from transformers import BertTokenizerFast

    from repro.families.sa_m4c.data import (
        OCR_FILES,
        QUESTIONS_FILE,
        STVQA_OCR_FILES,
        WordVectors,
        read_answer_vocab,
        read_questions,
        read_stvqa,
    )

    root = data["root"]
    stvqa = ctx.spec.datasets[0] == "st-vqa"
    splits = {}
    for split in ("train", "val", "test"):
        splits[split] = {
            "questions": read_stvqa(root, split)
            if stvqa
            else read_questions(root / QUESTIONS_FILE.format(split=split)),
            "ocr": root
            / (STVQA_OCR_FILES[split].format(ocr=config.ocr) if stvqa else OCR_FILES[config.ocr].format(split=split)),
            "objects": root / f"{split}.objects.store",
            "regions": root / f"{split}.ocr.store",
        }
    return {
        "splits": splits,
        "tokenizer": BertTokenizerFast(vocab_file=str(data["bert_vocab"]), do_lower_case=True),
        "vocab": read_answer_vocab(data["answer_vocab"]),
        "words": WordVectors(data["words"]),
        "sizes": ctx.settings.get("sizes", {}),
        # generated splits are held as ready tensors, kept beside the data (ready.py)
        "ready": {"dir": root / "ready", "files": {k: data[k] for k in ("words", "answer_vocab", "bert_vocab")}},
    }


def datasets(ctx: RunContext, config, inputs: dict[str, Any]) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(split -> TextVQADataset, answer vocabulary, model sizes); the feature sizes come from the data."""
    from repro.data.store import FeatureStore
    from repro.families.sa_m4c.data import Features, TextVQADataset, read_ocr

    tokenizer, vocab, words = inputs["tokenizer"], inputs["vocab"], inputs["words"]
    sets, sizes = {}, None
    for split, where in inputs["splits"].items():
        objects, regions = FeatureStore.open(where["objects"]), FeatureStore.open(where["regions"])
        if sizes is None:
            derived = {"bert_vocab": len(tokenizer), "fasttext_dim": words.dim}
            derived.update(obj_dim=objects.dim, ocr_app_dim=regions.dim)
            sizes = model_sizes(config, {**inputs["sizes"], **derived})
        sets[split] = TextVQADataset(
            where["questions"][: ctx.limit],  # `repro run --limit N`: the first N questions of each split
            Features(objects, regions, read_ocr(where["ocr"]), words),
            tokenizer,
            vocab,
            sizes,
            graph=getattr(config, "graph", "spatial"),
            seed=ctx.seed,
            overlap_iou=getattr(config, "overlap_iou", 0.5),
            distance_threshold=getattr(config, "distance_threshold", 0.5),
        )
        ready = inputs.get("ready")
        if ready is not None:
            files = {**ready["files"], "ocr": where["ocr"], "objects": where["objects"], "regions": where["regions"]}
            sets[split].hold_ready(ready["dir"], files)
    return sets, vocab, sizes
