"""From files to a MetricResult: read with `repro.metrics.io`, check the values fit the metric, score."""
from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from repro.errors import ReproError
from repro.metrics import get, io
from repro.metrics.base import MetricResult

DEFAULT_VARIANT = {"vqa": "2021", "anls": "rrc", "wups": "cocoqa", "mse": "psac"}


def _strings(values: list, metric: str, ids: list, what: str) -> None:
    for qid, value in zip(ids, values):
        if not isinstance(value, str):
            raise ReproError(f"{metric}: {what} of question {qid} is {type(value).__name__}, not a string")


def _answer_lists(gold: io.Gold, metric: str) -> list[list[str]]:
    out = []
    for qid, value in zip(gold.ids, gold.values):
        answers = value if isinstance(value, list) else [value]
        _strings(answers, metric, [qid] * len(answers), "a human answer")
        out.append(answers)
    return out


def _single(gold: io.Gold, metric: str) -> list:
    out = []
    for qid, value in zip(gold.ids, gold.values):
        if isinstance(value, list):
            if len(value) != 1:
                raise ReproError(f"{metric}: question {qid} has {len(value)} answers; {metric} needs one")
            value = value[0]
        out.append(value)
    return out


@contextmanager
def paused_gc() -> Iterator[None]:
    """Millions of small answer objects make the cyclic collector run again and again; none of
    them form cycles, so it is paused while they are built and scored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def evaluate_files(metric: str, annotations: Path, predictions: Path, questions: Optional[Path] = None,
                   threshold: float = 0.9, variant: Optional[str] = None,
                   step: Callable[[str], None] = lambda name: None) -> MetricResult:
    """Read, align and score. `step(name)` is called as each phase starts (for a progress display)."""
    if variant is not None and metric not in DEFAULT_VARIANT:
        raise ReproError(f"--variant applies to {', '.join(DEFAULT_VARIANT)}, not {metric}")
    get(metric)
    with paused_gc():
        step("reading annotations")
        gold = io.load_annotations(metric, Path(annotations), questions)
        step("reading predictions")
        if metric == "recall" and "txt2img" in gold.fields:
            i2t, t2i = io.load_score_matrices(Path(predictions))
            step("scoring")
            return get(metric).evaluate(i2t, t2i, gold.values, gold.fields["txt2img"])
        preds = io.load_predictions(Path(predictions))
        step("scoring")
        return score(metric, gold, preds, Path(predictions), threshold, variant)


def evaluate_data(metric: str, annotations: Any, predictions: Any, threshold: float = 0.9,
                  variant: Optional[str] = None) -> MetricResult:
    """The same from already-parsed JSON (what a caller holding the data in memory uses)."""
    with paused_gc():
        gold = io.annotations_from_data(metric, annotations, Path("<annotations>"))
        preds = io.predictions_from_data(predictions, Path("<predictions>"))
        return score(metric, gold, preds, Path("<predictions>"), threshold, variant)


def score(metric: str, gold: io.Gold, predictions: dict, where: Path, threshold: float = 0.9,
          variant: Optional[str] = None) -> MetricResult:
    """Align predictions to the gold order, check the values fit the metric, and score."""
    module = get(metric)
    variant = variant or DEFAULT_VARIANT.get(metric)
    preds = io.align(gold, predictions, where)
    f = gold.fields
    if metric == "vqa":  # vqa.evaluate checks its own inputs, on distinct strings only (fast)
        return module.evaluate(gold.values, preds, gold.ids, f.get("answer_type"),
                               f.get("question_type"), variant=variant)
    if metric in ("textvqa", "anls"):
        _strings(preds, metric, gold.ids, "the prediction")
        kwargs: dict[str, Any] = {"variant": variant} if metric == "anls" else {}
        return module.evaluate(_answer_lists(gold, metric), preds, gold.ids, **kwargs)
    if metric == "wups":
        answers = _single(gold, metric)
        _strings(answers, metric, gold.ids, "the answer")
        _strings(preds, metric, gold.ids, "the prediction")
        return module.evaluate(answers, preds, threshold, variant, gold.ids, f.get("type"))
    if metric == "mse":
        return module.evaluate(_single(gold, metric), preds, variant, gold.ids)
    if metric == "accuracy":
        return module.evaluate(_single(gold, metric), preds, gold.ids, f.get("type") or f.get("answer_type"))
    if metric == "recall":
        for qid, p in zip(gold.ids, preds):
            if not isinstance(p, list):
                raise ReproError(f"recall: the prediction for query {qid} must be a ranked list of ids")
        relevant = [v if isinstance(v, list) else [v] for v in gold.values]
        return module.evaluate_rankings(relevant, preds, gold.ids)
    if metric == "grounding":
        for qid, box in list(zip(gold.ids, gold.values)) + list(zip(gold.ids, preds)):
            if box is not None and not (isinstance(box, list) and len(box) == 4
                                        and all(isinstance(v, (int, float)) for v in box)):
                raise ReproError(f"grounding: the box of reference {qid} must be [x, y, w, h]")
        return module.evaluate(gold.values, preds, f.get("split"), gold.ids)
    raise ReproError(f"no file reader for metric {metric!r}")  # pragma: no cover
