"""How a trained sa-m4c model is scored on a split: its decoded answers (from the answer vocabulary or copied from an
OCR token), each question's TextVQA accuracy, and the accuracy per kind of generated question."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def predict_step(model: nn.Module, batch: dict[str, torch.Tensor], beam: int = 1) -> torch.Tensor:
    """The decoded indices into vocabulary ‖ OCR, [B, steps] (as floats, the trainer's output type)."""
    return model.decode(batch, beam).float()


def split_answers(model, dataset, beam: int, recipe, progress: bool) -> dict[int, tuple[str, bool]]:
    """{question_id: (answer, copied from an OCR token)} of a split."""
    from repro.train import predict

    ids, indices = predict(
        model,
        dataset,
        recipe.eval_batch_size or recipe.batch_size,
        predict_step=lambda m, b: predict_step(m, b, beam),
        progress=progress,
        num_workers=recipe.num_workers,
    )
    index = {q["question_id"]: k for k, q in enumerate(dataset.questions)}
    return {int(q): dataset.answer_of(index[int(q)], row.long().tolist()) for q, row in zip(ids.tolist(), indices)}


def val_scores(dataset, answers: dict[int, tuple[str, bool]]) -> dict[int, dict[str, Any]]:
    """Per val question: answer, copied, TextVQA score (percent)."""
    from repro.metrics import textvqa

    out = {}
    for q in dataset.questions:
        answer, copied = answers[q["question_id"]]
        out[q["question_id"]] = {
            "answer": answer,
            "copied": copied,
            "score": 100 * textvqa.score_one(answer, q["answers"]),
        }
    return out


def per_kind(val, scores: dict[int, dict[str, Any]]) -> dict[str, float]:
    """Accuracy per kind of generated question (spatial, control); empty for real data, which has no kinds."""
    kinds: dict[str, list[float]] = {}
    for q in val.questions:
        if "question_kind" in q:
            kinds.setdefault(str(q["question_kind"]), []).append(scores[q["question_id"]]["score"])
    return {kind: sum(v) / len(v) for kind, v in sorted(kinds.items())}
