"""PSAC (Li et al., AAAI 2019): VPSA video encoder, QPSA question encoder, video-question co-attention.

Equation numbers are the paper's (Sec. 3); where the paper gives no size or multiplicity the
official code's is used (lixiangpengcs/PSAC). Every choice is listed in the
family README. Two networks (`network`): `paper`, the modules as Sec. 3 writes them, and `official`,
the released code's network, which produced the paper's numbers; where the two differ the official
module is its own class (`OfficialVPSA`, `OfficialQPSA`) or a switch of the shared one, each citing the
equation it departs from. One model answers one TGIF-QA task; the task fixes the answer head:

  action / transition  one score per candidate (Eq. 15), 5 candidates; multi-class hinge loss
  frameqa              logits over the answer vocabulary (Eq. 16); cross-entropy
  count                one real number (Eq. 17); MSE, evaluated after clipping to 1..10 and rounding

Batch format (`repro.families.psac.data.collate`):
  video  float (B, N, d_v)       frame features
  words  long  (B, C, M)         word ids of question (+ candidate, multiple choice), 0 = padding
  chars  long  (B, C, M, r)      character ids, 0 = padding
  C = 5 candidates for action/transition (question words followed by the candidate's), else 1.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from repro.nn.attention import unbiased_std

# Sizes of the paper's model (Sec. 4.3) and, where the paper is silent, of the official code.
PAPER_SIZES: dict[str, Any] = {
    "video_dim": 2048,  # d_v, ResNet-152 pool5 (Sec. 4.3)
    "frames": 35,  # N (Sec. 4.3; the code uses 36)
    "heads": 8,  # l (Sec. 4.3)
    "question_heads": None,  # the official question block's own head count (the code's Nh, 8); None: `heads`
    "vpsa_ffn": 512,  # inner size of the two convolutions of Eq. 7 in VPSA (code: d_inner_hid 512)
    "video_pos_dim": 300,  # sinusoid width before its learned projection to d_v (code); 0 = Eq. 5-6 at d_v
    "hidden": 512,  # rho, the common space of Sec. 3.4 (code: D = 512); also the question width
    "word_dim": 300,  # d_w, GloVe (Sec. 4.3)
    "char_dim": 64,  # d_c (Sec. 4.3)
    "char_kernel": 5,  # width of the Conv2D over characters of Eq. 10 (code: (1, 5))
    "highway_layers": 2,  # two-layer highway after the concatenation (Sec. 3.3)
    "ds_convs": 4,  # depthwise separable convolutions of Eq. 11 (code: 4)
    "ds_kernel": 7,  # their kernel (code: 7)
    "qpsa_ffn": 512,  # inner size of Eq. 7 in QPSA (code: 512)
    "max_words": 20,  # M (code)
    "max_chars": 15,  # r (code)
    "classifier_hidden": 1024,  # the answer MLP's hidden layer (code: 512 -> 1024 -> out)
    "classifier_dropout": 0.5,  # the answer MLP's dropout (code)
    "dropout": 0.2,  # "for all CNN layers, the dropout rate is 0.2" (Sec. 4.3)
    "attention_dropout": 0.1,  # code
    "char_dropout": 0.01,  # official network only: the code's dropout on the character embeddings
    "bilstm_hidden": 1024,  # Table 4, per direction
}


NETWORKS = ("official", "paper")


def sinusoid(length: int, dim: int) -> torch.Tensor:
    """P of Eq. 5-6: p[pos, 2j] = sin(pos / 10000^(2j/d)), p[pos, 2j+1] = cos(...)."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    j = torch.arange(0, dim, 2, dtype=torch.float32)
    angle = pos / torch.pow(10000.0, j / dim)
    out = torch.zeros(length, dim)
    out[:, 0::2] = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return out


def official_video_table(length: int, dim: int) -> torch.Tensor:
    """The official video encoder's P before its projection: Eq. 5-6 with row 0 all zeros (code)."""
    table = sinusoid(length, dim)
    table[0] = 0
    return table


def timing_signal(length: int, dim: int) -> torch.Tensor:
    """The official question block's P (QANet's timing signal): sines of the first dim/2 channels, cosines of
    the rest, timescales geometric from 1 to 10^4 (not Eq. 5-6's interleaving); an odd last channel is 0."""
    half = dim // 2
    increment = math.log(1.0e4) / max(half - 1, 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float32) * -increment)
    angle = torch.arange(length, dtype=torch.float32).unsqueeze(1) * inv.unsqueeze(0)
    return F.pad(torch.cat([torch.sin(angle), torch.cos(angle)], dim=1), (0, dim % 2))


def layer_drop(branch: torch.Tensor, residual: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """The official question block's residual: in training the whole branch is skipped with probability p
    (one draw per batch), else dropped out at rate p and added; in evaluation branch + residual. No data-dependent
    branching, so a stacked ensemble (`torch.func.vmap`) runs it."""
    if not training or p == 0:
        return branch + residual
    skip = torch.rand((), device=branch.device) < p
    return torch.where(skip, residual, F.dropout(branch, p, training=True) + residual)


class OfficialLayerNorm(nn.Module):
    """The official video encoder's layer normalisation (Eq. 4 as coded): (z - mean) / (std + 1e-3) * a + b with
    the unbiased std and eps outside the root; a sequence of one item passes unchanged."""

    def __init__(self, dim: int, eps: float = 1e-3):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        if z.shape[1] == 1:
            return z
        centred = z - z.mean(-1, keepdim=True)
        return centred / (unbiased_std(centred) + self.eps) * self.weight + self.bias


class PositionalSelfAttention(nn.Module):
    """Eq. 2-8: multi-head self-attention, residual + LayerNorm, positional matrix P, two convolutions.

    J = concat(h_1..h_l) W_o (Eq. 2), h_i = SDPA(F W_i^Q, F W_i^K, F W_i^V) (Eq. 3, 1), O = LN(J + F)
    (Eq. 4), O_f = ReLU((O + P) W_1 + b_1) W_2 + b_2 (Eq. 7). The SDPA scale is 1/sqrt(d_k) with d_k the
    feature size of F, as Eq. 1 defines it (the official video encoder does the same). With `pos_dim`
    different from d, P is a sinusoid of width pos_dim projected to d by a learned linear layer (the
    official code's video encoder); otherwise Eq. 5-6 at width d, no parameters.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        ffn: int,
        max_len: int,
        pos_dim: int = 0,
        dropout: float = 0.2,
        attention_dropout: float = 0.1,
    ):
        super().__init__()
        if dim % heads:
            raise ValueError(f"feature size {dim} is not divisible by {heads} heads")
        self.dim, self.heads = dim, heads
        self.w_q = nn.Linear(dim, dim, bias=False)  # W_i^Q of the l heads, side by side
        self.w_k = nn.Linear(dim, dim, bias=False)
        self.w_v = nn.Linear(dim, dim, bias=False)
        self.w_o = nn.Linear(dim, dim)  # Eq. 2
        self.norm = nn.LayerNorm(dim)  # Eq. 4
        use_proj = bool(pos_dim) and pos_dim != dim
        self.register_buffer("table", sinusoid(max_len, pos_dim if use_proj else dim), persistent=False)
        self.pos_proj = nn.Linear(pos_dim, dim) if use_proj else None
        self.w_1 = nn.Conv1d(dim, ffn, 1)  # Eq. 7, W_1 b_1
        self.w_2 = nn.Conv1d(ffn, dim, 1)  # Eq. 7, W_2 b_2
        self.attn_drop = nn.Dropout(attention_dropout)
        self.drop = nn.Dropout(dropout)

    def positional(self, n: int) -> torch.Tensor:
        if n > self.table.shape[0]:
            table = sinusoid(n, self.table.shape[1]).to(self.table.device)
        else:
            table = self.table[:n]
        return self.pos_proj(table) if self.pos_proj is not None else table

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, h, d // h).transpose(1, 2)

        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
        logits = q @ k.transpose(-1, -2) / math.sqrt(d)  # Eq. 1
        if mask is not None:
            logits = logits.masked_fill(~mask[:, None, None, :], torch.finfo(logits.dtype).min)
        heads = self.attn_drop(logits.softmax(-1)) @ v  # Eq. 3
        j = self.w_o(heads.transpose(1, 2).reshape(b, n, d))  # Eq. 2
        o = self.norm(self.drop(j) + x)  # Eq. 4
        o = o + self.positional(n).to(o.dtype)  # O + P (Eq. 7)
        out = self.w_2(self.drop(F.relu(self.w_1(o.transpose(1, 2))))).transpose(1, 2)  # Eq. 7
        return out


class VPSA(nn.Module):
    """Video-based positional self-attention (Sec. 3.2, Eq. 9): L blocks of Eq. 8 applied in turn."""

    def __init__(self, sizes: dict[str, Any], layers: int):
        super().__init__()
        self.blocks = nn.ModuleList(
            PositionalSelfAttention(
                sizes["video_dim"],
                sizes["heads"],
                sizes["vpsa_ffn"],
                sizes["frames"],
                pos_dim=sizes["video_pos_dim"],
                dropout=sizes["dropout"],
                attention_dropout=sizes["attention_dropout"],
            )
            for _ in range(layers)
        )

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            video = block(video)
        return video


class OfficialVPSALayer(nn.Module):
    """One layer of the official video encoder: Eq. 1-4 (scale 1/sqrt(d_v), as Eq. 1), then Eq. 7's two
    convolutions with a residual and a second LayerNorm, which Eq. 7 has not; both norms `OfficialLayerNorm`.
    Dropout after W_o and after the convolutions; P is added before the layer (`OfficialVPSA`)."""

    def __init__(self, dim: int, heads: int, ffn: int, dropout: float, attention_dropout: float):
        super().__init__()
        if dim % heads:
            raise ValueError(f"feature size {dim} is not divisible by {heads} heads")
        self.dim, self.heads = dim, heads
        self.w_q = nn.Linear(dim, dim, bias=False)  # code: w_qs, one (d_v, d_v/l) matrix per head
        self.w_k = nn.Linear(dim, dim, bias=False)
        self.w_v = nn.Linear(dim, dim, bias=False)
        std = math.sqrt(2.0 / ((dim // heads) * (dim + heads)))  # code: Xavier-normal of the (l, d_v, d_v/l) tensor
        for w in (self.w_q, self.w_k, self.w_v):
            nn.init.normal_(w.weight, 0.0, std)
        self.w_o = nn.Linear(dim, dim)  # Eq. 2 (code: proj, Xavier-normal)
        nn.init.xavier_normal_(self.w_o.weight)
        self.norm = OfficialLayerNorm(dim)  # Eq. 4
        self.w_1 = nn.Conv1d(dim, ffn, 1)  # Eq. 7, W_1 b_1
        self.w_2 = nn.Conv1d(ffn, dim, 1)  # Eq. 7, W_2 b_2
        self.ffn_norm = OfficialLayerNorm(dim)  # code: LayerNorm(O_f + O); Eq. 7 has none
        self.attn_drop = nn.Dropout(attention_dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, h, d // h).transpose(1, 2)

        q, k, v = split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x))
        heads = self.attn_drop((q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1)) @ v  # Eq. 1, 3; no mask (code)
        o = self.norm(self.drop(self.w_o(heads.transpose(1, 2).reshape(b, n, d))) + x)  # Eq. 2, 4
        f = self.w_2(F.relu(self.w_1(o.transpose(1, 2)))).transpose(1, 2)  # Eq. 7 without P
        return self.ffn_norm(self.drop(f) + o)  # code: residual + LayerNorm


class OfficialVPSA(nn.Module):
    """VPSA as the official code builds it: P (Eq. 5-6 of width 300, row 0 zeros, a trainable table) projected to
    d_v and added to the frames before the first layer (Eq. 7 adds it after the attention), L `OfficialVPSALayer`s,
    and an outer residual V_o = layers(V + P) + V (Eq. 9 has none)."""

    def __init__(self, sizes: dict[str, Any], layers: int):
        super().__init__()
        d, pos_dim = sizes["video_dim"], sizes["video_pos_dim"]
        use_proj = bool(pos_dim) and pos_dim != d
        self.table = nn.Parameter(official_video_table(sizes["frames"], pos_dim if use_proj else d))  # code: trained
        self.pos_proj = nn.Linear(pos_dim, d) if use_proj else None
        self.blocks = nn.ModuleList(
            OfficialVPSALayer(d, sizes["heads"], sizes["vpsa_ffn"], sizes["dropout"], sizes["attention_dropout"])
            for _ in range(layers)
        )

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        n = video.shape[1]
        if n > self.table.shape[0]:
            raise ValueError(f"{n} frames, but the official video encoder's position table has {self.table.shape[0]}")
        p = self.table[:n]
        x = video + (self.pos_proj(p) if self.pos_proj is not None else p)  # V + P, before the attention (code)
        for block in self.blocks:
            x = block(x)
        return x + video  # outer residual (code)


class BiLSTMEncoder(nn.Module):
    """Table 4: a bidirectional LSTM in place of VPSA; its hidden states (both directions) are V_o."""

    def __init__(self, sizes: dict[str, Any]):
        super().__init__()
        self.lstm = nn.LSTM(sizes["video_dim"], sizes["bilstm_hidden"], batch_first=True, bidirectional=True)

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        return self.lstm(video)[0]


class Highway(nn.Module):
    """Two-layer highway network after the word-character concatenation (Sec. 3.3); `official`: the code's
    Xavier-uniform weights."""

    def __init__(self, dim: int, layers: int, dropout: float, official: bool = False):
        super().__init__()
        self.gates = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.transforms = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.drop = nn.Dropout(dropout)
        if official:
            for layer in (*self.transforms, *self.gates):
                nn.init.xavier_uniform_(layer.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for gate, transform in zip(self.gates, self.transforms):
            g = torch.sigmoid(gate(x))
            x = g * self.drop(transform(x)) + (1 - g) * x
        return x


class DepthwiseSeparableConv(nn.Module):
    """Eq. 11: Q_d = ReLU((Q_e W_d + b_d) W_b + b_p), with a pre-LayerNorm and a residual (code)."""

    def __init__(self, dim: int, kernel: int, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.depthwise = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)  # W_d, b_d
        self.pointwise = nn.Conv1d(dim, dim, 1)  # W_b, b_p
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = self.drop(self.norm(x)).transpose(1, 2)
        y = F.relu(self.pointwise(self.depthwise(y))).transpose(1, 2)
        return (x + y) * mask.unsqueeze(-1)


class OfficialQPSA(nn.Module):
    """QPSA after the highway as the official code builds it (QANet's encoder block): P, the `timing_signal`, added
    to its input (Eq. 7 adds Eq. 5-6's P after the attention); the depthwise separable convolutions of Eq. 11,
    each pre-LayerNorm + residual, depthwise without bias, no padding mask; self-attention with no output
    projection W_o (Eq. 2 has one) and the per-head scale 1/sqrt(d/l) (Eq. 1: 1/sqrt(d)), pre-LayerNorm + residual;
    Eq. 7's two convolutions as a pre-LayerNorm residual feed-forward. Every residual branch l = 1..L (L = convs
    + 2) goes through `layer_drop` at rate dropout * l / (convs + 1) (code)."""

    def __init__(self, sizes: dict[str, Any]):
        super().__init__()
        d, convs, kernel, p = sizes["hidden"], sizes["ds_convs"], sizes["ds_kernel"], sizes["dropout"]
        heads = sizes.get("question_heads") or sizes["heads"]
        if d % heads:
            raise ValueError(f"feature size {d} is not divisible by {heads} heads")
        self.heads, self.p = heads, p
        self.conv_norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(convs))
        self.depthwise = nn.ModuleList(
            nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d, bias=False) for _ in range(convs)
        )  # W_d of Eq. 11; b_d absent (code)
        self.pointwise = nn.ModuleList(nn.Conv1d(d, d, 1) for _ in range(convs))  # W_b, b_p
        self.norm_1 = nn.LayerNorm(d)
        self.w_q = nn.Linear(d, d, bias=False)  # Eq. 3's W^Q (code: query_conv)
        self.w_k = nn.Linear(d, d, bias=False)  # W^K and W^V: one (2d, d) convolution in the code (mem_conv)
        self.w_v = nn.Linear(d, d, bias=False)
        for w, fan_out in ((self.w_q, d), (self.w_k, 2 * d), (self.w_v, 2 * d)):  # code: Xavier-uniform
            bound = math.sqrt(6.0 / (d + fan_out))
            nn.init.uniform_(w.weight, -bound, bound)
        # The code's attention constructs a logit bias it never adds (bias=False where it is called); kept so the
        # parameters and the checkpoint's keys are the code's.
        self.unused_bias = nn.Parameter(torch.zeros(1))
        self.norm_2 = nn.LayerNorm(d)
        self.w_1 = nn.Linear(d, sizes["qpsa_ffn"])  # Eq. 7, W_1 b_1 (code: Kaiming-normal, ReLU)
        self.w_2 = nn.Linear(sizes["qpsa_ffn"], d)  # Eq. 7, W_2 b_2 (code: Xavier-uniform)
        nn.init.kaiming_normal_(self.w_1.weight, nonlinearity="relu")
        nn.init.xavier_uniform_(self.w_2.weight)
        self.drop = nn.Dropout(p)

    def attention(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, h, d // h).transpose(1, 2)

        q, k, v = split(self.w_q(x)) * (d // h) ** -0.5, split(self.w_k(x)), split(self.w_v(x))
        logits = q @ k.transpose(-1, -2) + -1e30 * (1 - mask[:, None, None, :].to(x.dtype))  # padded words (code)
        heads = self.drop(logits.softmax(-1)) @ v
        return heads.transpose(1, 2).reshape(b, n, d)  # concat(h_1..h_l), no W_o

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        total = len(self.depthwise) + 1
        out = x + timing_signal(x.shape[1], x.shape[2]).to(x)  # P, before the convolutions (code)
        layer = 1
        for i, (norm, depthwise, pointwise) in enumerate(zip(self.conv_norms, self.depthwise, self.pointwise)):
            y = norm(out)
            y = self.drop(y) if i % 2 == 0 else y  # the code drops out before every other convolution
            y = F.relu(pointwise(depthwise(y.transpose(1, 2)))).transpose(1, 2)  # Eq. 11
            out = layer_drop(y, out, self.p * layer / total, self.training)
            layer += 1
        y = self.attention(self.drop(self.norm_1(out)), mask)  # Eq. 1-3
        out = layer_drop(y, out, self.p * layer / total, self.training)
        layer += 1
        y = self.w_2(F.relu(self.w_1(self.drop(self.norm_2(out)))))  # Eq. 7 without P
        return layer_drop(y, out, self.p * layer / total, self.training)  # Q_o


class QuestionEncoder(nn.Module):
    """QPSA (Sec. 3.3): word (frozen GloVe) + character embedding (Eq. 10), highway, depthwise separable
    convolutions (Eq. 11), positional self-attention (Eq. 12). `official`: the code's embedding (character
    table without a padding row, dropout 0.01 on characters, Conv2D(C) before W in the concatenation, the
    code's initialisation) and `OfficialQPSA` after the highway."""

    def __init__(
        self,
        sizes: dict[str, Any],
        num_words: int,
        num_chars: int,
        char_embedding: bool,
        word_vectors: torch.Tensor | None = None,
        official: bool = False,
    ):
        super().__init__()
        d, dropout = sizes["hidden"], sizes["dropout"]
        self.official = official
        self.word_emb = nn.Embedding(num_words, sizes["word_dim"], padding_idx=0)
        if word_vectors is not None:
            self.word_emb.weight.data.copy_(word_vectors)
        self.word_emb.weight.requires_grad_(False)  # GloVe, frozen (code: freeze=True)
        self.char_embedding = char_embedding
        width = sizes["word_dim"]
        if char_embedding:
            # the code's table has no padding row: index 0 trains like any character
            self.char_emb = nn.Embedding(num_chars, sizes["char_dim"], padding_idx=None if official else 0)
            nn.init.normal_(self.char_emb.weight)
            self.char_conv = nn.Conv2d(sizes["char_dim"], d, (1, sizes["char_kernel"]))  # Conv2D(C), Eq. 10
            if official:
                nn.init.kaiming_normal_(self.char_conv.weight, nonlinearity="relu")
            width += d
        self.fuse = nn.Conv1d(width, d, 1, bias=False)  # 1x1 convolution to rho (code)
        if official:
            nn.init.xavier_uniform_(self.fuse.weight)
            self.char_drop = nn.Dropout(sizes["char_dropout"])
        self.highway = Highway(d, sizes["highway_layers"], dropout, official=official)
        self.drop = nn.Dropout(dropout)
        if official:
            self.block = OfficialQPSA(sizes)
            return
        self.convs = nn.ModuleList(
            DepthwiseSeparableConv(d, sizes["ds_kernel"], dropout) for _ in range(sizes["ds_convs"])
        )
        self.qpsa = PositionalSelfAttention(
            d,
            sizes["heads"],
            sizes["qpsa_ffn"],
            sizes["max_words"],
            pos_dim=0,
            dropout=dropout,
            attention_dropout=sizes["attention_dropout"],
        )

    def forward(self, words: torch.Tensor, chars: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.official:
            return self._official(words, chars)
        mask = words != 0
        mask[:, 0] = True  # an empty question still has one position to attend to
        q = self.drop(self.word_emb(words))  # W
        if self.char_embedding:
            c = self.char_emb(chars).permute(0, 3, 1, 2)  # (B, d_c, M, r)
            c = F.relu(self.char_conv(c)).max(dim=-1).values.transpose(1, 2)  # (B, M, rho)
            q = torch.cat([q, c], dim=-1)  # Q_e = Concat(W, Conv2D(C)), Eq. 10
        q = self.highway(self.fuse(q.transpose(1, 2)).transpose(1, 2))
        for conv in self.convs:
            q = conv(q, mask)  # Eq. 11
        return self.qpsa(q, mask), mask  # Q_o, Eq. 12

    def _official(self, words: torch.Tensor, chars: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mask = words != 0  # padded words masked in the attentions; no position forced in (code)
        q = self.drop(self.word_emb(words))  # W
        if self.char_embedding:
            c = self.char_drop(self.char_emb(chars)).permute(0, 3, 1, 2)  # (B, d_c, M, r)
            c = F.relu(self.char_conv(c)).max(dim=-1).values.transpose(1, 2)  # (B, M, rho)
            q = torch.cat([c, q], dim=-1)  # Q_e = Concat(Conv2D(C), W): the code's order
        q = self.highway(self.fuse(q.transpose(1, 2)).transpose(1, 2))
        return self.block(q, mask), mask  # Q_o


class CoAttention(nn.Module):
    """Video-question co-attention (Sec. 3.4): similarity S (Eq. 13), V2Q gives A = S_q Q_o, Q2V gives
    B = S_v S_v^T V_o, fused by Eq. 14. Ablations (Table 6): q2v only fuses Concat(V_o, V_o*B) W_f; none
    fuses Concat(V_o, q, V_o*q) W_f with q the mean of Q_o over the question's words. `official`: the code's
    B = S_q S_v^T V_o (QANet's context-to-query product; S_v over all words), S computed on dropped-out V_o and
    Q_o, and the code's initialisation."""

    def __init__(self, dim: int, directions: tuple[str, ...], official: bool = False, dropout: float = 0.0):
        super().__init__()
        self.directions = tuple(sorted(directions))
        self.official = official
        self.w_v = nn.Parameter(torch.empty(dim))  # W_s = [w_v, w_q, w_vq] (Eq. 13)
        self.w_q = nn.Parameter(torch.empty(dim))
        self.w_vq = nn.Parameter(torch.empty(dim))
        self.bias = nn.Parameter(torch.zeros(1))
        for p in (self.w_v, self.w_q, self.w_vq):
            nn.init.uniform_(p, -1 / math.sqrt(dim), 1 / math.sqrt(dim))
        parts = {("q2v", "v2q"): 4, ("q2v",): 2, (): 3}
        if self.directions not in parts:
            raise ValueError(f"co-attention {list(directions)} is not one of Table 6's: [v2q, q2v], [q2v], []")
        self.w_f = nn.Linear(parts[self.directions] * dim, dim, bias=False)  # W_f, Eq. 14
        if official:  # code: Xavier-uniform of its (d, 1), (d, 1), (1, 1, d) and (d, 4d, 1) tensors
            for p, bound in ((self.w_v, math.sqrt(6 / (dim + 1))), (self.w_q, math.sqrt(6 / (dim + 1)))):
                nn.init.uniform_(p, -bound, bound)
            nn.init.uniform_(self.w_vq, -math.sqrt(3 / dim), math.sqrt(3 / dim))
            nn.init.xavier_uniform_(self.w_f.weight)
            self.drop = nn.Dropout(dropout)

    def forward(self, v: torch.Tensor, q: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
        if not self.directions:
            m = q_mask.unsqueeze(-1).to(q.dtype)
            qbar = ((q * m).sum(1) / m.sum(1).clamp(min=1)).unsqueeze(1).expand_as(v)
            return self.w_f(torch.cat([v, qbar, v * qbar], dim=-1))
        if self.official:
            return self._official(v, q, q_mask)
        s = (
            (v @ self.w_v).unsqueeze(2) + (q @ self.w_q).unsqueeze(1) + (v * self.w_vq) @ q.transpose(1, 2) + self.bias
        )  # S (B, N, M), Eq. 13
        s_v = s.masked_fill(~q_mask[:, None, :], -1e4).softmax(dim=1)  # columns normalised (Q2V)
        s_v = s_v * q_mask[:, None, :].to(s_v.dtype)  # padded words attend to nothing
        b = s_v @ (s_v.transpose(1, 2) @ v)  # B = S_v S_v^T V_o (Q2V)
        if self.directions == ("q2v",):
            return self.w_f(torch.cat([v, v * b], dim=-1))
        s_q = s.masked_fill(~q_mask[:, None, :], torch.finfo(s.dtype).min).softmax(dim=2)  # rows (V2Q)
        a = s_q @ q  # A = S_q Q_o (V2Q)
        return self.w_f(torch.cat([v, a, v * a, v * b], dim=-1))  # O_f, Eq. 14

    def _official(self, v: torch.Tensor, q: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
        vd, qd = self.drop(v), self.drop(q)  # code: S on dropped-out features, A and B on the features
        s = (
            (vd @ self.w_v).unsqueeze(2)
            + (qd @ self.w_q).unsqueeze(1)
            + (vd * self.w_vq) @ qd.transpose(1, 2)
            + self.bias
        )  # S (B, N, M), Eq. 13
        s_q = (s + -1e30 * (1 - q_mask[:, None, :].to(s.dtype))).softmax(dim=2)  # rows (V2Q)
        s_v = s.softmax(dim=1)  # columns (Q2V); the code's video mask is all ones, padded words are columns too
        b = (s_q @ s_v.transpose(1, 2)) @ v  # B = S_q S_v^T V_o (code; the paper prints S_v S_v^T V_o^T)
        if self.directions == ("q2v",):
            return self.w_f(torch.cat([v, v * b], dim=-1))
        a = s_q @ q  # A = S_q Q_o (V2Q)
        return self.w_f(torch.cat([v, a, v * a, v * b], dim=-1))  # O_f, Eq. 14


class AnswerHead(nn.Module):
    """Eq. 15-17 on the frame-averaged O_f: 2-layer MLP (code's 512 -> 1024 -> out), out = 1 score
    (multiple choice, count) or the answer vocabulary (FrameQA). `weight_normed`: both layers weight-normalised
    with one scale per matrix (the official classifier, weight_norm dim=None)."""

    def __init__(self, dim: int, hidden: int, out: int, dropout: float = 0.5, weight_normed: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, out)
        if weight_normed:
            self.fc1, self.fc2 = weight_norm(self.fc1, dim=None), weight_norm(self.fc2, dim=None)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class PSAC(nn.Module):
    """One PSAC model for one task; `forward(batch)` gives (B, 5) scores, (B, A) logits or (B,) counts."""

    def __init__(
        self,
        task: str,
        sizes: dict[str, Any],
        *,
        video_encoder: str = "vpsa",
        vpsa_layers: int = 1,
        char_embedding: bool = True,
        co_attention: tuple[str, ...] = ("q2v", "v2q"),
        num_words: int = 2,
        num_chars: int = 2,
        num_answers: int = 1,
        word_vectors: torch.Tensor | None = None,
        network: str = "paper",
    ):
        super().__init__()
        if network not in NETWORKS:
            raise ValueError(f"network {network!r} is not one of {', '.join(NETWORKS)}")
        self.task, self.sizes, self.network = task, dict(sizes), network
        official = network == "official"
        # the official question block's `unused_bias` gets no gradient: DDP must not wait for it (under torchrun it
        # would skip the gradients' all-reduce at the first step and stop at the second)
        self.find_unused_parameters = official
        if video_encoder == "vpsa":
            self.video_encoder: nn.Module | None = (
                OfficialVPSA(sizes, vpsa_layers) if official else VPSA(sizes, vpsa_layers)
            )
            video_out = sizes["video_dim"]
        elif video_encoder == "bilstm":
            self.video_encoder = BiLSTMEncoder(sizes)
            video_out = 2 * sizes["bilstm_hidden"]
        else:
            self.video_encoder = None  # Table 3 "w/o VPSA": the raw frame features
            video_out = sizes["video_dim"]
        self.question_encoder = QuestionEncoder(
            sizes, num_words, num_chars, char_embedding, word_vectors, official=official
        )
        self.video_proj = nn.Linear(video_out, sizes["hidden"])  # V_o to the rho-dimensional space (Sec. 3.4)
        if official:
            self.video_proj = weight_norm(self.video_proj)  # code: weight-normed, one scale per output row
        self.co_attention = CoAttention(sizes["hidden"], co_attention, official=official, dropout=sizes["dropout"])
        out = num_answers if task == "frameqa" else 1
        self.head = AnswerHead(
            sizes["hidden"], sizes["classifier_hidden"], out, sizes["classifier_dropout"], weight_normed=official
        )
        self.drop = nn.Dropout(sizes["dropout"])

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        video, words, chars = batch["video"], batch["words"], batch["chars"]
        b, c, m = words.shape
        if self.network == "official":
            v = self._official_video(video, c)
        else:
            v = self.video_encoder(video) if self.video_encoder is not None else video  # V_o (Eq. 9)
            v = self.video_proj(self.drop(v))
        if c > 1 and self.network != "official":  # every candidate sees the same video: encoded once, repeated
            v = v.unsqueeze(1).expand(b, c, *v.shape[1:]).reshape(b * c, *v.shape[1:])
        q, q_mask = self.question_encoder(words.reshape(b * c, m), chars.reshape(b * c, m, chars.shape[-1]))
        fused = self.co_attention(v, q, q_mask).mean(dim=1)  # O_f averaged over the frames (code)
        out = self.head(fused)
        if self.task in ("action", "transition"):
            return out.view(b, c)  # Eq. 15, one score per candidate
        if self.task == "count":
            return out.view(b)  # Eq. 17
        return out  # Eq. 16 (softmax in the loss)

    def _official_video(self, video: torch.Tensor, c: int) -> torch.Tensor:
        # The code tiles the video once per candidate before encoding it: in training each copy draws its own
        # dropout masks (in evaluation the copies are equal); no dropout before the projection.
        if c > 1:
            video = video.unsqueeze(1).expand(-1, c, -1, -1).reshape(-1, *video.shape[1:])
        v = self.video_encoder(video) if self.video_encoder is not None else video  # V_o
        return self.video_proj(v)


def count_prediction(raw: torch.Tensor) -> torch.Tensor:
    """Count evaluation: the regressed number clipped to 1..10, then rounded (official code)."""
    return raw.clamp(1, 10).round()
