"""Positional features and positional attention maps of MCAN+PA (Mao et al. 2022, §III-B to III-E).

* Word positions: a learnable embedding of the 14 positions (PWA's X_pos/Y_pos, PMA's Y_pos, and
  the BERT-style PE of the MCAN+PE row).
* Box feature (PMA's X_pos): (x1/W, y1/H, x2/W, y2/H, area), linearly projected to d.
* Relative geometry (POA, Eq. 13-14): R_ij, its sinusoidal embedding E_G and W^G.
* Fusion of the raw positional map A_pos with the semantic logits A_sem: Eq. (8), or the
  Relation-Network rule used by the MCAN+PA* row. Both become an additive bias plus a logit scale,
  so one `MultiHeadAttention` serves all of them.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# POA's guard for log(0) in Eq. (14): |x_i - x_j| / w_i (and the y term) is clamped to at least
# RATIO_FLOOR before the log, as the official Relation Networks code does (1e-3). It bites on the
# diagonal and for boxes with the same centre. Widths and heights are clamped to MIN_SIDE pixels
# so padded (all-zero) boxes give finite values; their keys are masked anyway.
RATIO_FLOOR = 1e-3
MIN_SIDE = 1.0
# Relation Networks' sinusoid constants: wavelength base 1000 and input scale 100.
WAVE_BASE = 1000.0
WAVE_SCALE = 100.0
# Relation-Network fusion: log(max(ReLU(A_pos), POS_FLOOR)) keeps the log finite (official value 1e-6).
POS_FLOOR = 1e-6

FUSIONS = ("eq8", "relation-network")


def box_feature(boxes: torch.Tensor, image_size: torch.Tensor) -> torch.Tensor:
    """PMA's 5-d box feature (x1/W, y1/H, x2/W, y2/H, area) (§III-E).

    boxes [B, N, 4] in pixels, image_size [B, 2] as (W, H). The paper does not say how the area is
    scaled; we use the normalised area (x2-x1)(y2-y1)/(W·H) so all five values lie in [0, 1].
    """
    w = image_size[:, 0].clamp(min=1.0)[:, None]
    h = image_size[:, 1].clamp(min=1.0)[:, None]
    x1, y1, x2, y2 = boxes.unbind(-1)
    x1, x2, y1, y2 = x1 / w, x2 / w, y1 / h, y2 / h
    area = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    return torch.stack([x1, y1, x2, y2, area], dim=-1)


def relative_geometry(boxes: torch.Tensor) -> torch.Tensor:
    """R_ij of Eq. (14) for every pair of boxes: [B, N, 4] -> [B, N, N, 4].

    R_ij = (log(|x_i - x_j| / w_i), log(|y_i - y_j| / h_i), log(w_j / w_i), log(h_j / h_i)) with
    (x, y) the box centre; i is the query row, j the key column. The paper's w_j/w_i is kept (the
    official Relation Networks code uses w_i/w_j, a sign flip of the last two terms). See RATIO_FLOOR
    and MIN_SIDE for the guards.
    """
    x1, y1, x2, y2 = boxes.unbind(-1)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    w = (x2 - x1).clamp(min=MIN_SIDE)
    h = (y2 - y1).clamp(min=MIN_SIDE)
    dx = (cx[:, :, None] - cx[:, None, :]).abs() / w[:, :, None]
    dy = (cy[:, :, None] - cy[:, None, :]).abs() / h[:, :, None]
    dw = w[:, None, :] / w[:, :, None]
    dh = h[:, None, :] / h[:, :, None]
    return torch.stack([dx.clamp(min=RATIO_FLOOR).log(), dy.clamp(min=RATIO_FLOOR).log(), dw.log(), dh.log()], -1)


def sinusoid_embedding(geometry: torch.Tensor, dim: int) -> torch.Tensor:
    """E_G: each of the 4 terms of R_ij to dim/4 values, sin then cos of dim/8 wavelengths ([35], RN constants).

    [..., 4] -> [..., dim], laid out term-major: for term t, sin(100·g_t/1000^(k/K)) for k < K = dim/8,
    then the cosines.
    """
    if dim % 8:
        raise ValueError(f"the geometry embedding size {dim} must be divisible by 8")
    k = dim // 8
    freq = WAVE_BASE ** (-torch.arange(k, dtype=geometry.dtype, device=geometry.device) / k)
    angles = WAVE_SCALE * geometry[..., None] * freq  # [..., 4, K]
    emb = torch.cat([angles.sin(), angles.cos()], dim=-1)  # [..., 4, 2K]
    return emb.flatten(-2)


class PositionalScores(nn.Module):
    """Raw positional attention map of PWA and PMA: multi-head Eq. (5-7) on positional features.

    A_pos[h] = (X_pos W_h^Q)(Y_pos W_h^K)^T / sqrt(d_head). Each layer owns its W^Q, W^K (the paper's
    W_G^query, W_G^key, §IV-E). Inputs [B or 1, Nq, d] and [B or 1, Nk, d]; output [B or 1, h, Nq, Nk].
    """

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.d_head = d_model // heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)

    def forward(self, x_pos: torch.Tensor, y_pos: torch.Tensor) -> torch.Tensor:
        q = self.q(x_pos).unflatten(-1, (self.heads, self.d_head)).transpose(-3, -2)
        k = self.k(y_pos).unflatten(-1, (self.heads, self.d_head)).transpose(-3, -2)
        return q @ k.transpose(-1, -2) / math.sqrt(self.d_head)


class GeometryScores(nn.Module):
    """POA's raw positional maps for every decoder layer at once (Eq. 13): a^G = E_G(b_i, b_j) W^G.

    Each layer has its own W^G in R^{dim x h} (one column per head, no bias as in Eq. 13). They are held
    as one [dim, layers·h] linear map so E_G, which depends only on the boxes, is embedded once.
    boxes [B, N, 4] -> [layers, B, h, N, N].
    """

    def __init__(self, dim: int, heads: int, layers: int):
        super().__init__()
        self.dim, self.heads, self.layers = dim, heads, layers
        self.w_g = nn.Linear(dim, layers * heads, bias=False)

    def forward(self, boxes: torch.Tensor) -> torch.Tensor:
        emb = sinusoid_embedding(relative_geometry(boxes), self.dim)  # [B, N, N, dim]
        scores = self.w_g(emb.to(self.w_g.weight.dtype))  # [B, N, N, L·h]
        b, n, m, _ = scores.shape
        return scores.view(b, n, m, self.layers, self.heads).permute(3, 0, 4, 1, 2)


def fuse(a_pos: torch.Tensor, d_head: int, fusion: str) -> tuple[torch.Tensor, float]:
    """Turn a raw positional map into (bias, scale) for `MultiHeadAttention`.

    eq8: A = softmax((A_pos + A_sem) / sqrt(2)) with A_sem = q·k / sqrt(d_head) (Eq. 5, 8), i.e.
         bias A_pos / sqrt(2) and logit scale 1 / sqrt(2·d_head).
    relation-network: the paper writes softmax(A_pos · exp(A_sem)); we read it as Relation Networks
         defines it, A ∝ max(0, A_pos) · exp(A_sem) normalised over the keys, which equals
         softmax(A_sem + log(max(ReLU(A_pos), 1e-6))): bias log(max(ReLU(A_pos), 1e-6)), scale 1/sqrt(d_head).
    """
    if fusion == "eq8":
        return a_pos / math.sqrt(2.0), 1.0 / math.sqrt(2.0 * d_head)
    if fusion == "relation-network":
        return a_pos.relu().clamp(min=POS_FLOOR).log(), 1.0 / math.sqrt(d_head)
    raise ValueError(f"unknown fusion {fusion!r}")
