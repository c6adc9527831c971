"""Weakly supervised grounding on RefCOCO+: box hit rate, as ALBEF's `Grounding.py` scores it.

Function API::

    from repro.metrics import grounding
    boxes = grounding.select_boxes(heatmaps, detections, alpha=0.5)   # optional: heat map -> box
    result = grounding.evaluate(gold_boxes, boxes, splits=["val", "testA", ...])
    result.aggregate["overall"], result.aggregate["testA"]            # percent

Boxes are [x, y, w, h] in pixels: four finite numbers with w > 0 and h > 0 (`check_box`; anything
else, a NaN, a null gold box or a box with no area, is a ReproError). A predicted box may be None:
no box, a miss. A reference is a hit when IoU(gold, predicted) >= 0.5, with
ALBEF's `computeIoU`: the intersection runs from max(x1) to min(x + w - 1) with both ends counted
(+1), but only when the corners are *strictly* ordered (boxes overlapping by a single pixel row or
column count as no overlap); the union is w*h + w*h - intersection (no +1 there).

`select_boxes` is ALBEF's ranking of detection proposals on a heat map already resized to the
image: score = sum of the map over the box rows int(y):int(y+h), columns int(x):int(x+w), divided
by area ** alpha; the highest strictly positive score wins. When no proposal scores above 0 ALBEF
keeps the box chosen for the previous reference (a stale variable); `select_boxes` does the same,
and gives None (a miss) when there is no previous box.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from numbers import Real
from typing import Any

import numpy as np

from repro.errors import ReproError
from repro.metrics.base import MetricResult, shown

IOU_HIT = 0.5


def check_box(box: Any, what: str) -> list[float]:
    """`box` as four floats, or a ReproError "<what> ..." saying why it is not [x, y, w, h] with
    finite values, w > 0 and h > 0 and a finite, non-zero area."""
    if (
        not isinstance(box, (list, tuple))
        or len(box) != 4
        or any(isinstance(v, bool) or not isinstance(v, Real) for v in box)
    ):
        raise ReproError(f"{what} must be [x, y, w, h], four numbers, not {shown(box)}")
    try:
        values = [float(v) for v in box]
    except OverflowError:  # an integer too large for a float
        values = [math.inf]
    if not all(map(math.isfinite, values)) or not math.isfinite(values[2] * values[3]):
        raise ReproError(f"{what} {shown(box)} must hold finite numbers")
    if not (values[2] > 0 and values[3] > 0 and values[2] * values[3] > 0):
        raise ReproError(f"{what} {shown(box)} has no area: [x, y, w, h] needs w > 0 and h > 0")
    return values


def iou(box1: Sequence[float], box2: Sequence[float]) -> float:
    inter_x1 = max(box1[0], box2[0])
    inter_y1 = max(box1[1], box2[1])
    inter_x2 = min(box1[0] + box1[2] - 1, box2[0] + box2[2] - 1)
    inter_y2 = min(box1[1] + box1[3] - 1, box2[1] + box2[3] - 1)
    if inter_x1 < inter_x2 and inter_y1 < inter_y2:
        inter = (inter_x2 - inter_x1 + 1) * (inter_y2 - inter_y1 + 1)
    else:
        inter = 0
    union = box1[2] * box1[3] + box2[2] * box2[3] - inter
    return float(inter) / union


def select_boxes(
    heatmaps: Sequence[np.ndarray], detections: Sequence[Sequence[Sequence[float]]], alpha: float = 0.5
) -> list[list[float] | None]:
    chosen: list[list[float] | None] = []
    previous = None
    for heat, dets in zip(heatmaps, detections):
        best_score = 0
        for det in dets:
            x, y, w, h = det[:4]
            score = heat[int(y) : int(y + h), int(x) : int(x + w)].sum() / (w * h) ** alpha
            if score > best_score:
                previous = list(det[:4])
                best_score = score
        chosen.append(previous)
    return chosen


def evaluate(
    gold_boxes: Sequence[Sequence[float]],
    pred_boxes: Sequence[Sequence[float] | None],
    splits: Sequence[str] | None = None,
    ref_ids: Sequence[Hashable] | None = None,
) -> MetricResult:
    if len(gold_boxes) != len(pred_boxes):
        raise ReproError(f"grounding: {len(gold_boxes)} references but {len(pred_boxes)} predicted boxes")
    ids = list(ref_ids) if ref_ids is not None else list(range(len(gold_boxes)))
    hits = []
    for qid, gold, pred in zip(ids, gold_boxes, pred_boxes):
        # as floats: the same IoU for every box of pixel values, and no overflow on huge integers
        gold = check_box(gold, f"grounding: reference {shown(qid)}: the gold box")
        if pred is None:
            hits.append(0.0)
            continue
        pred = check_box(pred, f"grounding: reference {shown(qid)}: the predicted box")
        hits.append(1.0 if iou(gold, pred) >= IOU_HIT else 0.0)
    aggregate: dict = {"overall": 100 * sum(hits) / len(hits) if hits else float("nan")}
    if splits is not None:
        groups: dict[str, list[float]] = {}
        for s, h in zip(splits, hits):
            groups.setdefault(str(s), []).append(h)
        aggregate.update({s: 100 * sum(v) / len(v) for s, v in groups.items()})
    return MetricResult("grounding", aggregate, {r: 100 * h for r, h in zip(ids, hits)}, len(hits))
