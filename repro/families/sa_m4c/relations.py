"""The spatial graph of SA-M4C (Sec. 4.1, Fig. 2a) and the per-head masks it gives (Sec. 4.2, Eq. 5).

`spatial_relations(boxes)` labels every ordered pair (i, j) of object/OCR boxes with one of the 12
relation types T^spa, or 0 for no edge, by the rules of the released code (yashkant/sam-textvqa), which
follow Yao et al. (ECCV 2018). Boxes are normalised [x1, y1, x2, y2] in [0, 1] (y points down); a box
whose four coordinates sum to 0 is padding and has no relation at all. For a valid pair, in this order:

   12  self (i == j)
    1  i covers j: j strictly inside i on all four sides      2  i inside j (the converse)
    3  overlap: IoU >= overlap_iou (plain area IoU)
 4-11  direction: the centre distance d is below distance_threshold x the image diagonal (sqrt 2);
       theta = the angle of (cx_i - cx_j, cy_i - cy_j) in [0, 2 pi), label ceil(theta / (pi/4)) + 3,
       one label per 45 degree sector
    0  otherwise (far apart)

Quirks of the released code kept here, because the published models were trained with them:
theta exactly 0 (j straight left of i, same centre height) gives ceil(0) + 3 = 3, the "overlap" label;
two distinct boxes with the same centre (d = 0, neither inside the other, IoU < 0.5) get 4 both ways;
the angle seen from j is theta + pi without a wrap, so theta = pi gives j the label 11, not 3.

`head_masks(relations, context)` turns the labels into the sets T^h of Sec. 4.2: head h (1-based)
attends along relations {t_h, t_(h+1), ..., t_(h+c-1)} (indices mod 12), as Fig. 3(c) draws for c = 2.
"""

from __future__ import annotations

import math

import numpy as np
import torch

NUM_RELATIONS = 12  # |T^spa|: covers, inside, overlap, 8 directions, self
SELF, COVERS, INSIDE, OVERLAP = 12, 1, 2, 3


def spatial_relations(boxes: np.ndarray, overlap_iou: float = 0.5, distance_threshold: float = 0.5) -> np.ndarray:
    """[N, 4] normalised boxes -> [N, N] int8 labels 0-12; entry (i, j) is the relation of j seen from i."""
    b = np.asarray(boxes, dtype=np.float64)
    n = b.shape[0]
    labels = np.zeros((n, n), dtype=np.int8)
    if n == 0:
        return labels
    valid = b.sum(axis=1) != 0
    x1, y1, x2, y2 = (b[:, k] for k in range(4))
    pair = valid[:, None] & valid[None, :]

    covers = (x1[:, None] < x1[None, :]) & (x2[:, None] > x2[None, :])
    covers &= (y1[:, None] < y1[None, :]) & (y2[:, None] > y2[None, :])
    inside = covers.T

    ix = np.clip(np.minimum(x2[:, None], x2[None, :]) - np.maximum(x1[:, None], x1[None, :]), 0, None)
    iy = np.clip(np.minimum(y2[:, None], y2[None, :]) - np.maximum(y1[:, None], y1[None, :]), 0, None)
    inter = ix * iy
    area = (x2 - x1) * (y2 - y1)
    union = area[:, None] + area[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union != 0, inter / union, 0.0)

    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    dx, dy = cx[:, None] - cx[None, :], cy[:, None] - cy[None, :]
    dist = np.sqrt(dx**2 + dy**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta, theta_j = _angles(dy / dist, dx / dist)
        sector = np.ceil(theta / (math.pi / 4)) + 3
        sector_j = np.ceil(theta_j / (math.pi / 4)) + 3
    # The upper triangle is labelled from i's side, the lower one from j's side of the same pair.
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    direction = np.where(upper, sector, sector_j.T)
    direction = np.where(np.isnan(direction), 4, direction)
    near = dist < distance_threshold * math.sqrt(2.0)

    out = np.where(near, direction, 0)
    out = np.where(iou >= overlap_iou, OVERLAP, out)
    out = np.where(inside, INSIDE, out)
    out = np.where(covers, COVERS, out)
    out = np.where(pair, out, 0)
    np.fill_diagonal(out, np.where(valid, SELF, 0))
    labels[:] = out.astype(np.int8)
    return labels


def _angles(sin: np.ndarray, cos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(theta, theta seen from the other box): theta in [0, 2 pi) quadrant by quadrant through arcsin /
    arccos, and theta + pi in the first two quadrants, theta - pi in the last two, unwrapped (NaN stays NaN)."""
    first = (sin >= 0) & (cos >= 0)
    fourth = (sin < 0) & (cos >= 0)
    second = (sin >= 0) & (cos < 0)
    with np.errstate(invalid="ignore"):
        theta = np.select(
            [first, fourth, second],
            [np.arcsin(sin), np.arcsin(sin) + 2 * math.pi, np.arccos(cos)],
            2 * math.pi - np.arccos(cos),
        )
    return theta, np.where(first | second, theta + math.pi, theta - math.pi)


def random_relations(valid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """M4C-Random (Table 2 row 4): every ordered pair of valid boxes gets one of the 12 relations or no
    edge (0) with equal probability."""
    valid = np.asarray(valid, dtype=bool)
    n = valid.shape[0]
    labels = rng.integers(0, NUM_RELATIONS + 1, size=(n, n)).astype(np.int8)
    return np.where(valid[:, None] & valid[None, :], labels, 0).astype(np.int8)


def relation_labels(boxes: np.ndarray, graph: str, rng_seed: list[int], overlap: float, distance: float) -> np.ndarray:
    """The [n, n] labels of one item's boxes: the spatial graph, or M4C-Random's draw from `rng_seed`."""
    if graph == "random":
        return random_relations(boxes.sum(1) != 0, np.random.default_rng(rng_seed))
    return spatial_relations(boxes, overlap, distance)


def head_relation_sets(context: int, heads: int = NUM_RELATIONS) -> torch.Tensor:
    """[heads, 13] bool: row h says which labels (column 1-12; column 0 = no edge, never) head h attends along.

    T^h = {t_h, ..., t_(h+c-1) mod 12} (Sec. 4.2); c >= 13 sees every relation (and t_imp, always)."""
    allowed = torch.zeros(heads, NUM_RELATIONS + 1, dtype=torch.bool)
    for h in range(heads):
        for k in range(min(context, NUM_RELATIONS)):
            allowed[h, (h + k) % NUM_RELATIONS + 1] = True
    return allowed


def head_masks(relations: torch.Tensor, context: int, heads: int = NUM_RELATIONS) -> torch.Tensor:
    """[B, N, N] labels -> [B, heads, N, N] bool: True where head h may attend from i to j (Eq. 5, b = 0)."""
    sets = head_relation_sets(context, heads).to(relations.device)
    return sets[:, relations.long()].permute(1, 0, 2, 3)
