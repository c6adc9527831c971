"""PWA/POA/PMA pieces pinned to the equations of mcan-pa §III on hand-checked inputs."""

import math

import pytest
import torch

from repro.families.mcan_pa.positional import (
    GeometryScores,
    PositionalScores,
    box_feature,
    fuse,
    relative_geometry,
    sinusoid_embedding,
)
from repro.nn.attention import MultiHeadAttention

# Box A: centre (5, 10), w 10, h 20.  Box B: centre (30, 20), w 20, h 20.
BOXES = torch.tensor([[[0.0, 0.0, 10.0, 20.0], [20.0, 10.0, 40.0, 30.0]]])


def test_poa_relative_geometry_eq14_for_two_known_boxes():
    r = relative_geometry(BOXES)[0]
    ln = math.log
    expected_ab = [ln(25 / 10), ln(10 / 20), ln(20 / 10), ln(20 / 20)]
    expected_ba = [ln(25 / 20), ln(10 / 20), ln(10 / 20), ln(20 / 20)]
    assert torch.allclose(r[0, 1], torch.tensor(expected_ab), atol=1e-6)
    assert torch.allclose(r[1, 0], torch.tensor(expected_ba), atol=1e-6)
    # the log(0) guard: |x_i - x_i| / w_i is floored at 1e-3 on the diagonal
    assert torch.allclose(r[0, 0], torch.tensor([ln(1e-3), ln(1e-3), 0.0, 0.0]), atol=1e-6)


def test_geometry_of_padded_boxes_is_finite():
    boxes = torch.cat([BOXES, torch.zeros(1, 2, 4)], dim=1)
    assert torch.isfinite(relative_geometry(boxes)).all()


def test_sinusoid_embedding_layout():
    g = torch.tensor([[0.0, 0.5, -1.0, 2.0]])
    emb = sinusoid_embedding(g, 16)  # 4 terms x (2 sin + 2 cos)
    assert emb.shape == (1, 16)
    # term 1 (0.5): frequencies 1000^0 = 1 and 1000^-0.5
    assert emb[0, 4].item() == pytest.approx(math.sin(100 * 0.5))
    assert emb[0, 5].item() == pytest.approx(math.sin(100 * 0.5 / math.sqrt(1000)), rel=1e-5)
    assert emb[0, 6].item() == pytest.approx(math.cos(100 * 0.5))
    # term 0 is zero: sines 0, cosines 1
    assert emb[0, :4].tolist() == pytest.approx([0.0, 0.0, 1.0, 1.0])


def test_geometry_scores_are_eq13_per_layer_and_head():
    torch.manual_seed(0)
    geo = GeometryScores(dim=8, heads=2, layers=3)
    scores = geo(BOXES)
    assert scores.shape == (3, 1, 2, 2, 2)
    emb = sinusoid_embedding(relative_geometry(BOXES), 8)[0, 0, 1]  # E_G(b_A, b_B)
    w = geo.w_g.weight.view(3, 2, 8)  # layer, head, dim
    for layer in range(3):
        for head in range(2):
            assert scores[layer, 0, head, 0, 1].item() == pytest.approx((emb @ w[layer, head]).item(), abs=1e-5)


def test_pma_box_feature():
    boxes = torch.tensor([[[64.0, 48.0, 320.0, 240.0]]])
    feat = box_feature(boxes, torch.tensor([[640.0, 480.0]]))
    assert feat[0, 0].tolist() == pytest.approx([0.1, 0.1, 0.5, 0.5, 0.16])


def test_positional_scores_are_multi_head_eq5_on_positions():
    torch.manual_seed(0)
    ps = PositionalScores(8, 2)
    x, y = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    got = ps(x, y)
    q, k = ps.q(x).view(1, 3, 2, 4), ps.k(y).view(1, 4, 2, 4)
    for h in range(2):
        expected = q[0, :, h] @ k[0, :, h].T / 2.0
        assert torch.allclose(got[0, h], expected, atol=1e-6)


def _attention_weights(att, x, y, bias, scale):
    """Attention map = output with identity value/out projections."""
    with torch.no_grad():
        att.v.weight.copy_(torch.eye(att.v.in_features))
        att.v.bias.zero_()
        att.out.weight.copy_(torch.eye(att.out.in_features))
        att.out.bias.zero_()
    return att(x, y, y, bias=bias, scale=scale)


def test_eq8_fusion_is_scaled_addition():
    torch.manual_seed(0)
    att = MultiHeadAttention(4, 1, dropout=0.0).eval()
    x = torch.randn(1, 2, 4)
    y = torch.eye(4)[None, :3]  # one-hot keys/values: the output rows are the attention weights
    a_pos = torch.randn(1, 1, 2, 3)
    bias, scale = fuse(a_pos, 4, "eq8")
    out = _attention_weights(att, x, y, bias, scale)[0, :, :3]
    a_sem = att.q(x) @ att.k(y).transpose(-1, -2) / 2.0  # Eq. 5, d_head = 4
    expected = torch.softmax((a_pos[0, 0] + a_sem[0]) / math.sqrt(2), dim=-1)  # Eq. 8
    assert torch.allclose(out, expected, atol=1e-5)


def test_relation_network_fusion_multiplies_relu_positions_into_exp_semantics():
    torch.manual_seed(1)
    att = MultiHeadAttention(4, 1, dropout=0.0).eval()
    x = torch.randn(1, 2, 4)
    y = torch.eye(4)[None, :3]
    a_pos = torch.tensor([[[[0.5, 2.0, -1.0], [1.0, 1.0, 3.0]]]])
    bias, scale = fuse(a_pos, 4, "relation-network")
    out = _attention_weights(att, x, y, bias, scale)[0, :, :3]
    a_sem = (att.q(x) @ att.k(y).transpose(-1, -2) / 2.0)[0]
    w = a_pos[0, 0].relu().clamp(min=1e-6) * a_sem.exp()
    assert torch.allclose(out, w / w.sum(-1, keepdim=True), atol=1e-5)
    assert out[0, 2].item() < 1e-5  # a negative positional score switches the pair off


def test_unknown_fusion_is_rejected():
    with pytest.raises(ValueError):
        fuse(torch.zeros(1), 4, "product")
