"""DSGANet model: shapes, the switches of Tables VI-VIII, the DAA/SGA score maps, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from repro.families.dsganet import build as dsganet
from repro.families.dsganet.model import (
    GridRelationScores,
    ObjectRelationScores,
    SpatialRelation,
    bbox_relation,
    depth_relation,
    grid_coordinates,
)

TINY = dict(
    d_model=32,
    layers=2,
    heads=4,
    ffn=64,
    spatial_dim=16,
    flat_out=64,
    flat_mlp=32,
    embed_dim=16,
    max_boxes=6,
    max_grids=12,
    feature_dim=16,
    dropout=0.0,
    grid_size=6,
    bert_layers=1,
    bert_hidden=32,
    bert_heads=2,
    bert_ffn=64,
    bert_vocab=None,
)
TOKENS, ANSWERS = 40, 7


def build(**cfg):
    torch.manual_seed(0)
    config = {"arch": "dsganet", **cfg}
    return dsganet.build_model(config, TOKENS, ANSWERS, sizes=TINY), dsganet.example_batch(
        3, TINY, config=config, num_tokens=TOKENS
    )


def names(model) -> set[str]:
    return {n for n, _ in model.named_parameters()}


@pytest.mark.parametrize(
    "cfg",
    [
        {},
        {"question_encoder": "gru", "daa": [], "sga": False},
        {"daa": [], "sga": True},
        {"daa": ["depth"], "sga": False},
        {"features": "grids"},
        {"features": "grids", "question_encoder": "gru", "daa": []},
    ],
)
def test_forward_shape_and_gradients(cfg):
    model, batch = build(**cfg)
    out = model(batch)
    assert out.shape == (3, ANSWERS) and torch.isfinite(out).all()
    out.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing


def test_switches_change_the_parameter_set():
    base, _ = build(daa=[], sga=False)
    assert not any(n.startswith(("relation", "relation_scores")) for n in names(base))
    bbox, _ = build(daa=["bbox"], sga=False)
    both, _ = build(daa=["bbox", "depth"], sga=False)
    new = names(bbox) - names(base)
    assert new and all(n.startswith(("relation.", "relation_scores.")) for n in new)
    assert all(".daa_q." in n or n.startswith("relation.") for n in new)
    # depth adds four inputs to the FC of Eq. 6 and nothing else
    assert names(both) == names(bbox)
    assert both.relation.fc.in_features == 8 and bbox.relation.fc.in_features == 4
    sga, _ = build(daa=["bbox", "depth"], sga=True)
    added = names(sga) - names(both)
    assert {n.split(".")[2] for n in added} == {"sga_q", "sga_k", "w_s", "w1", "w2", "w"}
    assert sga.relation_scores[0].w_s.in_features == 3 * TINY["spatial_dim"]  # W^s in R^{d_s x 3 d_s}
    sga_only, _ = build(daa=[], sga=True)
    assert not any(".daa_q." in n for n in names(sga_only))
    assert sga_only.relation.fc.in_features == 8  # SGA alone still has R^spatial of both relations


def test_question_encoder_switch():
    bert, _ = build(question_encoder="bert", daa=[], sga=False)
    gru, _ = build(question_encoder="gru", daa=[], sga=False)
    assert any(n.startswith("question.bert.") for n in names(bert))
    assert any(n.startswith("question.gru.") for n in names(gru)) and not any("bert" in n for n in names(gru))
    assert names(bert) - {n for n in names(bert) if n.startswith("question.")} == names(gru) - {
        n for n in names(gru) if n.startswith("question.")
    }


def test_grid_switches():
    none, _ = build(features="grids", daa=[])
    bbox, _ = build(features="grids", daa=["bbox"])
    depth, _ = build(features="grids", daa=["depth"])
    assert none.relation_scores is None and none.relation is None
    layer = bbox.relation_scores[0]
    assert layer.f_x[2].out_features == TINY["grid_size"] and not hasattr(layer, "wq")
    d = TINY["d_model"]
    assert depth.relation_scores[0].wq.in_features == d + 16  # W^Q on [Q'; dep_hist] (Eq. 23)
    assert not hasattr(depth.relation_scores[0], "f_x")


def test_relations_are_finite_and_match_eq3_eq4():
    boxes = torch.tensor([[[0.0, 0.0, 10.0, 20.0], [10.0, 0.0, 30.0, 20.0], [0.0, 0.0, 0.0, 0.0]]])
    size = torch.tensor([[100.0, 100.0]])
    r = bbox_relation(boxes, size, 1e-3)
    assert r.shape == (1, 3, 3, 4) and torch.isfinite(r).all()
    assert r[0, 0, 1, 0].item() == pytest.approx(math.log(15 / 10))  # |xc_0 - xc_1| / w_0
    assert r[0, 0, 1, 2].item() == pytest.approx(math.log(2.0))  # w_1 / w_0
    assert r[0, 0, 0, 0].item() == pytest.approx(math.log(1e-3))  # guarded log 0
    depth = torch.tensor([[100.0, 200.0, 0.0]])
    rd = depth_relation(boxes, size, depth, 1e-3)
    assert torch.isfinite(rd).all()
    assert rd[0, 0, 1, 0].item() == pytest.approx(math.log(2.0))
    assert rd[0, 0, 1, 1].item() == pytest.approx(math.log(4.0))  # w_j dep_j / (w_i dep_i)
    assert rd[0, 0, 1, 3].item() == pytest.approx(0.0)  # touching boxes do not intersect
    assert rd[0, 0, 0, 3].item() == pytest.approx(1.0)  # S^inter_ii / (w_i h_i)


def test_daa_and_sga_bias_shapes():
    b, n, d, ds = 2, 5, 32, 16
    x, q = torch.randn(b, n, d), torch.randn(b, d)
    boxes = torch.rand(b, n, 2) * 50
    batch = {
        "boxes": torch.cat([boxes, boxes + 10], -1),
        "image_size": torch.tensor([[100.0, 80.0]] * b),
        "depth_peak": torch.randint(0, 16, (b, n)),
    }
    rel = SpatialRelation(("bbox", "depth"), ds, "peak-bin-centre", 16, 1e-3)(batch)
    assert rel.shape == (b, n, n, ds) and (rel >= 0).all()
    for daa, sga in ((True, False), (False, True), (True, True)):
        assert ObjectRelationScores(d, ds, daa, sga)(x, rel, q).shape == (b, 1, n, n)
    grid = GridRelationScores(d, ds, ("bbox", "depth"), 16, 4, 1 / 3)
    xy = torch.randint(0, 3, (b, n, 2))
    assert grid(x, xy, torch.rand(b, n, 16)).shape == (b, 1, n, n)


def test_daa_changes_attention_with_depth_only_through_depth():
    model, batch = build(daa=["depth"], sga=False)
    model.eval()
    other = dict(batch)
    other["depth_mean"] = batch["depth_mean"].flip(1)
    assert not torch.allclose(model(batch), model(other))
    base, _ = build(daa=[], sga=False)
    base.eval()
    assert torch.allclose(base(batch), base(other))


def test_grid_coordinates_from_cells():
    from repro.datasets.depth import grid_regions

    cells = torch.from_numpy(grid_regions((48, 64), 3, 4)).float()[None]
    xy = grid_coordinates(cells)
    assert xy[0, :, 0].tolist() == [0, 1, 2, 3] * 3
    assert xy[0, :, 1].tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_grid_coordinates_count_distinct_edges_per_image():
    # two images of one batch, cells given out of order, repeated edges, another image's edges in between
    boxes = torch.zeros(2, 5, 4)
    boxes[0, :, 0] = torch.tensor([30.0, 10.0, 30.0, 20.0, 10.0])
    boxes[1, :, 0] = torch.tensor([15.0, 15.0, 25.0, 5.0, 40.0])
    boxes[:, :, 1] = torch.tensor([7.0, 7.0, 7.0, 7.0, 9.0])
    xy = grid_coordinates(boxes)
    assert xy[0, :, 0].tolist() == [2, 0, 2, 1, 0]
    assert xy[1, :, 0].tolist() == [1, 1, 2, 0, 3]
    assert xy[..., 1].tolist() == [[0, 0, 0, 0, 1]] * 2
    # per image, as seeds trained together map it (torch.func.vmap)
    assert torch.equal(torch.func.vmap(grid_coordinates)(boxes[:, None]).squeeze(1), xy)


def test_missing_depth_reading_is_a_clear_error():
    from repro.errors import ReproError

    model, batch = build(daa=["depth"], sga=False)
    del batch["depth_mean"]
    with pytest.raises(ReproError, match="depth_mean"):
        model(batch)


def test_bert_ignores_padded_words():
    model, batch = build(question_encoder="bert")
    model.eval()
    tokens = batch["tokens"][:1].clone()
    tokens[0, 5:] = 0  # [PAD] after five words
    with torch.no_grad():
        words, pad, q = model.question({"tokens": tokens})
        short_words, _, short_q = model.question({"tokens": tokens[:, :5]})
    assert pad[0].tolist() == [False] * 5 + [True] * (tokens.shape[1] - 5)
    assert torch.allclose(words[:, :5], short_words, atol=1e-6) and torch.allclose(q, short_q, atol=1e-6)
