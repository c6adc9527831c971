"""The 12 spatial relations (SA-M4C Sec. 4.1) by the released code's rules, and the heads' relation sets."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from repro.families.sa_m4c.relations import head_masks, head_relation_sets, random_relations, spatial_relations


def reference_label(a, b) -> tuple[int, int]:
    """(label of b seen from a, label of a seen from b), one pair at a time, from the written rules."""
    if sum(a) == 0 or sum(b) == 0:
        return 0, 0
    if a[0] < b[0] and a[2] > b[2] and a[1] < b[1] and a[3] > b[3]:
        return 1, 2
    if b[0] < a[0] and b[2] > a[2] and b[1] < a[1] and b[3] > a[3]:
        return 2, 1
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    if inter / union >= 0.5:
        return 3, 3
    dx, dy = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2, (a[1] + a[3]) / 2 - (b[1] + b[3]) / 2
    if math.hypot(dx, dy) >= 0.5 * math.sqrt(2):
        return 0, 0
    theta = math.atan2(dy, dx) % (2 * math.pi)
    back = theta + math.pi if theta <= math.pi else theta - math.pi
    return math.ceil(theta / (math.pi / 4)) + 3, math.ceil(back / (math.pi / 4)) + 3


def box(cx, cy, w=0.1, h=0.1):
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def labels_of(a, b):
    m = spatial_relations(np.array([a, b]))
    return int(m[0, 1]), int(m[1, 0])


def test_random_boxes_agree_with_the_rules_pair_by_pair():
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 0.8, (60, 2))
    wh = rng.uniform(0.01, 0.4, (60, 2))
    boxes = np.concatenate([xy, np.minimum(xy + wh, 1.0)], axis=1)
    boxes[[7, 33]] = 0.0  # padding
    boxes[12] = boxes[11] * np.array([1, 1, 1, 1]) + np.array([-0.01, -0.01, 0.01, 0.01])  # 11 strictly inside 12
    m = spatial_relations(boxes)
    for i in range(60):
        for j in range(i + 1, 60):
            assert (m[i, j], m[j, i]) == reference_label(boxes[i], boxes[j]), (i, j)
    valid = boxes.sum(1) != 0
    assert (np.diag(m) == np.where(valid, 12, 0)).all()
    assert set(np.unique(m)) <= set(range(13)) and {1, 2, 3, 12} <= set(np.unique(m))


@pytest.mark.parametrize("k", range(8))
def test_each_45_degree_sector_from_both_sides(k):
    theta = (k + 0.5) * math.pi / 4  # the middle of sector k: label k + 4 (y points down)
    j = box(0.5, 0.5)
    i = box(0.5 + 0.3 * math.cos(theta), 0.5 + 0.3 * math.sin(theta))
    assert labels_of(i, j) == (k + 4, (k + 4) % 8 + 4)


def test_documented_edge_cases():
    # containment is strict on all four sides; a shared edge is not containment
    assert labels_of([0.1, 0.1, 0.9, 0.9], [0.2, 0.2, 0.3, 0.3]) == (1, 2)
    assert labels_of([0.2, 0.2, 0.3, 0.3], [0.1, 0.1, 0.9, 0.9]) == (2, 1)
    assert labels_of([0.1, 0.1, 0.9, 0.9], [0.1, 0.2, 0.3, 0.3]) != (1, 2)
    # IoU exactly 0.5 overlaps, just below does not (then the centres decide a direction)
    assert labels_of([0.0, 0.0, 0.75, 0.5], [0.25, 0.0, 1.0, 0.5]) == (3, 3)  # 0.25 / 0.5, exact in floats
    assert labels_of([0.0, 0.0, 0.75, 0.5], [0.2501, 0.0, 1.0, 0.5]) == (7, 11)
    # the distance cut: centre distance below 0.5 * sqrt(2) of the unit image only
    assert labels_of(box(0.1, 0.1), box(0.1 + 0.7, 0.1))[0] > 0
    assert labels_of(box(0.05, 0.05), box(0.95, 0.05)) == (0, 0)
    # theta exactly 0 (j straight left of i) gives ceil(0) + 3 = 3, the overlap label; pi gives 7 and 11
    assert labels_of(box(0.6, 0.5), box(0.3, 0.5)) == (3, 7)
    assert labels_of(box(0.3, 0.5), box(0.6, 0.5)) == (7, 11)
    # straight below (theta = pi/2) and above (3 pi / 2), y pointing down
    assert labels_of(box(0.5, 0.8), box(0.5, 0.5)) == (5, 9)
    assert labels_of(box(0.5, 0.2), box(0.5, 0.5)) == (9, 5)
    # two crossing boxes with the same centre (no containment, IoU < 0.5): label 4 both ways
    assert labels_of(box(0.5, 0.5, 0.4, 0.02), box(0.5, 0.5, 0.02, 0.4)) == (4, 4)
    # padding has no relation at all, not even self
    m = spatial_relations(np.array([box(0.5, 0.5), [0, 0, 0, 0]]))
    assert m.tolist() == [[12, 0], [0, 0]]


def test_head_sets_follow_sec_4_2():
    one = head_relation_sets(1)
    assert [row.nonzero().flatten().tolist() for row in one] == [[h + 1] for h in range(12)]
    two = head_relation_sets(2)
    assert two[0].nonzero().flatten().tolist() == [1, 2]  # Fig. 3(c): head_1 looks at {t_1, t_2}
    assert two[11].nonzero().flatten().tolist() == [1, 12]  # wraps around mod 12
    assert head_relation_sets(13)[:, 1:].all() and not head_relation_sets(13)[:, 0].any()
    rel = torch.tensor([[[12, 5], [9, 0]]])
    masks = head_masks(rel, 1)
    assert masks.shape == (1, 12, 2, 2)
    assert masks[0, 11, 0, 0] and masks[0, 4, 0, 1] and masks[0, 8, 1, 0] and not masks[0, :, 1, 1].any()
    assert masks.sum() == 3


def test_random_graph_is_uniform_over_relations_and_no_edge():
    valid = np.ones(150, dtype=bool)
    valid[140:] = False
    labels = random_relations(valid, np.random.default_rng(0))
    assert (labels[140:] == 0).all() and (labels[:, 140:] == 0).all()
    counts = np.bincount(labels[:140, :140].ravel(), minlength=13) / 140**2
    assert np.abs(counts - 1 / 13).max() < 0.01
