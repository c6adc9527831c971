"""Shared attention building blocks: multi-head attention with a per-head additive bias and a key mask.

Every paper in this toolkit changes the attention logits of a transformer: MCAN+PA adds positional
maps (Eq. 8) or multiplies them in (Relation Networks), SA-M4C restricts heads with relation masks,
DSGANet adds depth and semantic biases, ACE-RPE adds relative-position terms. All of them are a
bias added to `q·k·scale` before the softmax, which is what `scaled_dot_product_attention` takes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# Masked logits are filled with this value, as the official MCAN code does (-1e9 rather than -inf,
# so a row whose keys are all padding gives a uniform map instead of NaN).
MASK_VALUE = -1e9


def mask_value(dtype: torch.dtype) -> float:
    """MASK_VALUE where `dtype` holds it; in fp16 (whose largest magnitude is 65,504) half its most negative value,
    which leaves room for a bias added to it without reaching -inf (a row of -inf alone would give NaN)."""
    return max(MASK_VALUE, torch.finfo(dtype).min / 2)


def bert_padding_mask(padded: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A `transformers` BERT's attention mask in its additive 4D form [B, 1, 1, L]: 0 at words, the dtype's minimum
    at padding (`padded` True). `transformers` takes a 4D mask as given; from a 2D one it first asks whether
    anything is padded, a data-dependent branch that seeds trained together (`torch.func.vmap`) cannot take.
    The attention it gives is the 2D mask's."""
    return padded[:, None, None, :].to(dtype) * torch.finfo(dtype).min


def unbiased_std(centred: torch.Tensor) -> torch.Tensor:
    """The unbiased std over the last dimension of a tensor already centred there (`x - x.mean(-1, keepdim=True)`),
    from its sum of squares: `x.std(-1, keepdim=True)` to rounding (1e-7 relative), and on a CPU 5-20 times faster
    for the synthetic scale's widths, where aten's std reduces a short last dimension slowly."""
    return (centred.square().sum(-1, keepdim=True) / (centred.shape[-1] - 1)).sqrt()


class LayerNorm(nn.Module):
    """MCAN's layer normalisation: a·(x − mean)/(std + eps) + b, with the unbiased std and eps on the std."""

    def __init__(self, size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(-1, keepdim=True)
        return self.weight * centred / (unbiased_std(centred) + self.eps) + self.bias


class FeedForward(nn.Module):
    """FC(d, ffn) - ReLU - Dropout - FC(ffn, d) (paper §IV-B)."""

    def __init__(self, d_model: int, ffn: int, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, ffn), nn.ReLU(inplace=True), nn.Dropout(dropout), nn.Linear(ffn, d_model)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def attention_bias(
    bias: torch.Tensor | None, key_padding_mask: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor | None:
    """One additive float mask for SDPA: `bias` (broadcastable to [B, h, Nq, Nk]) plus MASK_VALUE on padded keys.

    `key_padding_mask` is [B, Nk], True where the key is padding.
    """
    if key_padding_mask is None:
        return None if bias is None else bias.to(dtype)
    pad = torch.zeros(key_padding_mask.shape, dtype=dtype, device=key_padding_mask.device)
    pad = pad.masked_fill(key_padding_mask, mask_value(dtype))[:, None, None, :]
    return pad if bias is None else bias.to(dtype) + pad


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Eq. 5–7, 9–10) taking an additive bias and a key mask.

    forward(query [B, Nq, d], key [B, Nk, d], value [B, Nk, d], bias=None, key_padding_mask=None,
    scale=None) -> [B, Nq, d]. `bias` is added to the logits of every head it is given for: shape
    [B or 1, h or 1, Nq, Nk]. `scale` replaces 1/sqrt(d_head) (Eq. 8 uses 1/sqrt(2·d_head)).
    Dropout is applied to the attention map, as in MCAN.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.1):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not divisible by {heads} heads")
        self.heads = heads
        self.d_head = d_model // heads
        self.dropout = dropout
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.d_head).transpose(1, 2)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        *,
        bias: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        scale: float | None = None,
    ) -> torch.Tensor:
        q, k, v = self.split(self.q(query)), self.split(self.k(key)), self.split(self.v(value))
        mask = attention_bias(bias, key_padding_mask, q.dtype)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, scale=scale
        )
        b, _, n, _ = out.shape
        return self.out(out.transpose(1, 2).reshape(b, n, self.heads * self.d_head))
