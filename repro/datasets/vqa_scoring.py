"""A model's answers on a VQA-family split and their scores against the official annotations.

The answer to a question is the argmax of the model's logits over the prepared answer vocabulary
(`answer_vocab.json`, `repro.datasets.vqa`). Scores are the VQA accuracy with the official rules
(`repro.metrics.vqa`): `overall`, one key per answer type (`yes/no`, `number`, `other`) and
`per_question_type`, percentages averaged in the order the questions are given. A spec's `vqa` columns
read those keys, from the one split scored or from the split each column names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

VQA_KEYS = ("overall", "yes/no", "number", "other")


def read_annotations(path: Path) -> dict[int, dict[str, Any]]:
    """An official annotation file (`{"annotations": [...]}`), by question id."""
    return {a["question_id"]: a for a in json.loads(Path(path).read_text())["annotations"]}


def predict_answers(
    model, dataset, answer_vocab: list[str], recipe, progress: bool = True
) -> tuple[list[int], list[str]]:
    """The question ids of a split, in order, and the model's answer to each (the argmax of its logits)."""
    from repro.train import predict

    batch = recipe.eval_batch_size or recipe.batch_size
    question_ids, logits = predict(model, dataset, batch, progress=progress, num_workers=recipe.num_workers)
    return [int(q) for q in question_ids], [answer_vocab[i] for i in logits.argmax(dim=1).tolist()]


def vqa_scores(ids: Sequence[int], predicted: Sequence[str], gold: Mapping[int, Mapping[str, Any]]):
    """VQA accuracy of answers to the questions `ids` against their official annotations (a `MetricResult`);
    the per-type scores where every annotation has its `answer_type` and `question_type`."""
    from repro.metrics import vqa as vqa_metric

    return vqa_metric.evaluate(
        [[a["answer"] for a in gold[q]["answers"]] for q in ids],
        predicted,
        ids,
        _every(gold, ids, "answer_type"),
        _every(gold, ids, "question_type"),
    )


def _every(gold: Mapping[int, Mapping[str, Any]], ids: Sequence[int], key: str) -> list[str] | None:
    values = [gold[q].get(key) for q in ids]
    return None if any(v is None for v in values) else values


def score(
    model, dataset, answer_vocab: list[str], gold: Mapping[int, Mapping[str, Any]], recipe, progress: bool = True
):
    """VQA accuracy of `model` on a split, against the official annotations."""
    return vqa_scores(*predict_answers(model, dataset, answer_vocab, recipe, progress), gold)


def columns(spec, aggregates: Mapping[str | None, Mapping[str, Any]]) -> dict[str, float]:
    """The spec's VQA columns from each split's VQA scores (key None: the one split scored, for every column)."""
    out = {}
    for col in spec.columns:
        aggregate = aggregates.get(None, aggregates.get(col.split))
        if col.metric == "vqa" and col.key in VQA_KEYS and aggregate is not None:
            out[col.name] = float(aggregate[col.key])
    return out
