"""From files to a MetricResult: read with `repro.metrics.io`, check the values fit the metric, score.

What each metric accepts (anything else is a ReproError naming the file and the question):

* vqa: a list of human answers per question (strings; vqa.evaluate checks those and the count);
  textvqa, anls: strings; wups: one string per question;
* mse: counts and predictions that are finite numbers. A NaN, null, infinite or text prediction is
  an error, not a missing item: the PSAC and TGIF-QA code never see one, and scoring it as a miss
  would put a number on a broken file;
* accuracy: a gold answer that is a string, a finite number or a boolean; any prediction (one that
  matches nothing scores 0, as in the reference scripts);
* gqa: a GQA questions file; predictions that are strings (anything else scores 0, as in eval.py);
* recall: ranked lists of string or integer ids;
* grounding: gold boxes [x, y, w, h] of four finite numbers with w > 0 and h > 0; a predicted box
  the same, or null (no box: a miss, as ALBEF scores a reference it chose no box for);
* copy-rate: each question's OCR tokens as its answers (strings); predictions that are strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.metrics import get, io
from repro.metrics.base import MetricResult, shown
from repro.metrics.grounding import check_box
from repro.metrics.mse import check_numbers
from repro.utils import paused_gc

DEFAULT_VARIANT = {"vqa": "2021", "anls": "rrc", "wups": "cocoqa", "mse": "psac"}


def _strings(values: list, metric: str, ids: list, what: str, path: Path) -> None:
    for qid, value in zip(ids, values):
        if not isinstance(value, str):
            raise ReproError(
                f"{path}: {metric}: {what} of question {shown(qid)} is {type(value).__name__} "
                f"{shown(value)}, not a string"
            )


def _answer_lists(gold: io.Gold, metric: str) -> list[list[str]]:
    out = []
    for qid, value in zip(gold.ids, gold.values):
        answers = value if isinstance(value, list) else [value]
        _strings(answers, metric, [qid] * len(answers), "a human answer", gold.path)
        out.append(answers)
    return out


def _single(gold: io.Gold, metric: str) -> list:
    out = []
    for qid, value in zip(gold.ids, gold.values):
        if isinstance(value, list):
            if len(value) != 1:
                raise ReproError(f"{gold.path}: question {shown(qid)} has {len(value)} answers; {metric} needs one")
            value = value[0]
        out.append(value)
    return out


def _is_answer(value: Any) -> bool:
    """A gold answer exact-match accuracy can compare: a string, a boolean or a finite number."""
    return isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value))  # bool is an int


def _ids(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) for v in values
    )


def evaluate_files(
    metric: str,
    annotations: Path,
    predictions: Path,
    questions: Path | None = None,
    threshold: float = 0.9,
    variant: str | None = None,
    step: Callable[[str], None] = lambda name: None,
) -> MetricResult:
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
            result = get(metric).evaluate(i2t, t2i, gold.values, gold.fields["txt2img"])
            result.sources = sources(annotations, predictions, questions)
            return result
        preds = io.load_predictions(Path(predictions))
        step("scoring")
        result = score(metric, gold, preds, Path(predictions), threshold, variant)
    result.sources = sources(annotations, predictions, questions)
    return result


def sources(annotations: Path, predictions: Path, questions: Path | None = None) -> tuple:
    """(role, path) of every file `evaluate_files` reads: what --per-item must not overwrite."""
    files = [("annotations", p) for p in io.annotation_files(Path(annotations))]
    files.append(("predictions", Path(predictions)))
    if questions is not None:
        files.append(("questions", Path(questions)))
    return tuple(files)


def evaluate_data(
    metric: str, annotations: Any, predictions: Any, threshold: float = 0.9, variant: str | None = None
) -> MetricResult:
    """The same from already-parsed JSON (what a caller holding the data in memory uses)."""
    with paused_gc():
        gold = io.annotations_from_data(metric, annotations, Path("<annotations>"))
        preds = io.predictions_from_data(predictions, Path("<predictions>"))
        return score(metric, gold, preds, Path("<predictions>"), threshold, variant)


def score(
    metric: str, gold: io.Gold, predictions: dict, where: Path, threshold: float = 0.9, variant: str | None = None
) -> MetricResult:
    """Align predictions to the gold order, check the values fit the metric, and score."""
    module = get(metric)
    variant = variant or DEFAULT_VARIANT.get(metric)
    preds = io.align(gold, predictions, where)
    f = gold.fields
    if metric == "vqa":  # vqa.evaluate checks its own inputs, on distinct strings only (fast)
        if not isinstance(gold.values, io.AnswerTable):
            for qid, value in zip(gold.ids, gold.values):
                if not isinstance(value, list):
                    raise ReproError(
                        f"{gold.path}: question {shown(qid)} has one answer {shown(value)}; "
                        f"the VQA score needs a list of {module.N_ANSWERS} human answers"
                    )
        return module.evaluate(
            gold.values, preds, gold.ids, f.get("answer_type"), f.get("question_type"), variant=variant
        )
    if metric in ("textvqa", "anls"):
        _strings(preds, metric, gold.ids, "the prediction", where)
        kwargs: dict[str, Any] = {"variant": variant} if metric == "anls" else {}
        return module.evaluate(_answer_lists(gold, metric), preds, gold.ids, **kwargs)
    if metric == "wups":
        answers = _single(gold, metric)
        _strings(answers, metric, gold.ids, "the answer", gold.path)
        _strings(preds, metric, gold.ids, "the prediction", where)
        return module.evaluate(answers, preds, threshold, variant, gold.ids, f.get("type"))
    if metric == "mse":
        counts = _single(gold, metric)
        check_numbers(counts, gold.ids, f"{gold.path}: the count")
        check_numbers(preds, gold.ids, f"{where}: the prediction")
        return module.evaluate(counts, preds, variant, gold.ids)
    if metric == "accuracy":
        answers = _single(gold, metric)
        for qid, value in zip(gold.ids, answers):
            if not _is_answer(value):
                raise ReproError(
                    f"{gold.path}: question {shown(qid)}: the answer {shown(value)} is not a string, "
                    f"a finite number or a boolean"
                )
        return module.evaluate(answers, preds, gold.ids, f.get("type") or f.get("answer_type"))
    if metric == "gqa":
        if "structural" not in f:  # a text or csv answer file has no question types
            raise ReproError(
                f"{gold.path}: the GQA score needs a GQA questions json (each question's answer and "
                f"types.structural), not {gold.path.suffix or 'a folder'}"
            )
        return module.evaluate(gold.values, preds, gold.ids, f["structural"], f["balanced"])
    if metric == "recall":
        relevant = [v if isinstance(v, list) else [v] for v in gold.values]
        for qid, rel, p in zip(gold.ids, relevant, preds):
            if not _ids(p):
                raise ReproError(
                    f"{where}: recall: the prediction for query {shown(qid)} must be a ranked list "
                    f"of string or integer ids"
                )
            if not _ids(rel):
                raise ReproError(
                    f"{gold.path}: recall: the relevant ids of query {shown(qid)} must be strings or integers"
                )
        return module.evaluate_rankings(relevant, preds, gold.ids)
    if metric == "grounding":
        for qid, box in zip(gold.ids, gold.values):
            check_box(box, f"{gold.path}: reference {shown(qid)}: the gold box")
        for qid, box in zip(gold.ids, preds):
            if box is not None:
                check_box(box, f"{where}: reference {shown(qid)}: the predicted box")
        return module.evaluate(gold.values, preds, f.get("split"), gold.ids)
    if metric == "copy-rate":
        _strings(preds, metric, gold.ids, "the prediction", where)
        return module.evaluate_answers(preds, _answer_lists(gold, metric), gold.ids)
    raise ReproError(f"no file reader for metric {metric!r}")  # pragma: no cover
