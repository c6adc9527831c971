"""PSAC (Li et al., AAAI 2019): VPSA video encoder, QPSA question encoder, video-question co-attention.

Equation numbers are the paper's (Sec. 3); where the paper gives no size or multiplicity the
official code's is used (lixiangpengcs/PSAC). Every choice is listed in the
family README. One model answers one TGIF-QA task; the task fixes the answer head:

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

# Sizes of the paper's model (Sec. 4.3) and, where the paper is silent, of the official code.
PAPER_SIZES: dict[str, Any] = {
    "video_dim": 2048,  # d_v, ResNet-152 pool5 (Sec. 4.3)
    "frames": 35,  # N (Sec. 4.3; the code uses 36)
    "heads": 8,  # l (Sec. 4.3)
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
    "bilstm_hidden": 1024,  # Table 4, per direction
}


def sinusoid(length: int, dim: int) -> torch.Tensor:
    """P of Eq. 5-6: p[pos, 2j] = sin(pos / 10000^(2j/d)), p[pos, 2j+1] = cos(...)."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    j = torch.arange(0, dim, 2, dtype=torch.float32)
    angle = pos / torch.pow(10000.0, j / dim)
    out = torch.zeros(length, dim)
    out[:, 0::2] = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return out


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


class BiLSTMEncoder(nn.Module):
    """Table 4: a bidirectional LSTM in place of VPSA; its hidden states (both directions) are V_o."""

    def __init__(self, sizes: dict[str, Any]):
        super().__init__()
        self.lstm = nn.LSTM(sizes["video_dim"], sizes["bilstm_hidden"], batch_first=True, bidirectional=True)

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        return self.lstm(video)[0]


class Highway(nn.Module):
    """Two-layer highway network after the word-character concatenation (Sec. 3.3)."""

    def __init__(self, dim: int, layers: int, dropout: float):
        super().__init__()
        self.gates = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.transforms = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.drop = nn.Dropout(dropout)

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


class QuestionEncoder(nn.Module):
    """QPSA (Sec. 3.3): word (frozen GloVe) + character embedding (Eq. 10), highway, depthwise separable
    convolutions (Eq. 11), positional self-attention (Eq. 12)."""

    def __init__(
        self,
        sizes: dict[str, Any],
        num_words: int,
        num_chars: int,
        char_embedding: bool,
        word_vectors: torch.Tensor | None = None,
    ):
        super().__init__()
        d, dropout = sizes["hidden"], sizes["dropout"]
        self.word_emb = nn.Embedding(num_words, sizes["word_dim"], padding_idx=0)
        if word_vectors is not None:
            self.word_emb.weight.data.copy_(word_vectors)
        self.word_emb.weight.requires_grad_(False)  # GloVe, frozen (code: freeze=True)
        self.char_embedding = char_embedding
        width = sizes["word_dim"]
        if char_embedding:
            self.char_emb = nn.Embedding(num_chars, sizes["char_dim"], padding_idx=0)
            nn.init.normal_(self.char_emb.weight)
            self.char_conv = nn.Conv2d(sizes["char_dim"], d, (1, sizes["char_kernel"]))  # Conv2D(C), Eq. 10
            width += d
        self.fuse = nn.Conv1d(width, d, 1, bias=False)  # 1x1 convolution to rho (code)
        self.highway = Highway(d, sizes["highway_layers"], dropout)
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
        self.drop = nn.Dropout(dropout)

    def forward(self, words: torch.Tensor, chars: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


class CoAttention(nn.Module):
    """Video-question co-attention (Sec. 3.4): similarity S (Eq. 13), V2Q gives A = S_q Q_o, Q2V gives
    B = S_v S_v^T V_o, fused by Eq. 14. Ablations (Table 6): q2v only fuses Concat(V_o, V_o*B) W_f; none
    fuses Concat(V_o, q, V_o*q) W_f with q the mean of Q_o over the question's words."""

    def __init__(self, dim: int, directions: tuple[str, ...]):
        super().__init__()
        self.directions = tuple(sorted(directions))
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

    def forward(self, v: torch.Tensor, q: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
        if not self.directions:
            m = q_mask.unsqueeze(-1).to(q.dtype)
            qbar = ((q * m).sum(1) / m.sum(1).clamp(min=1)).unsqueeze(1).expand_as(v)
            return self.w_f(torch.cat([v, qbar, v * qbar], dim=-1))
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


class AnswerHead(nn.Module):
    """Eq. 15-17 on the frame-averaged O_f: 2-layer MLP (code's 512 -> 1024 -> out), out = 1 score
    (multiple choice, count) or the answer vocabulary (FrameQA)."""

    def __init__(self, dim: int, hidden: int, out: int, dropout: float = 0.5):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, out)
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
    ):
        super().__init__()
        self.task, self.sizes = task, dict(sizes)
        if video_encoder == "vpsa":
            self.video_encoder: nn.Module | None = VPSA(sizes, vpsa_layers)
            video_out = sizes["video_dim"]
        elif video_encoder == "bilstm":
            self.video_encoder = BiLSTMEncoder(sizes)
            video_out = 2 * sizes["bilstm_hidden"]
        else:
            self.video_encoder = None  # Table 3 "w/o VPSA": the raw frame features
            video_out = sizes["video_dim"]
        self.question_encoder = QuestionEncoder(sizes, num_words, num_chars, char_embedding, word_vectors)
        self.video_proj = nn.Linear(video_out, sizes["hidden"])  # V_o to the rho-dimensional space (Sec. 3.4)
        self.co_attention = CoAttention(sizes["hidden"], co_attention)
        out = num_answers if task == "frameqa" else 1
        self.head = AnswerHead(sizes["hidden"], sizes["classifier_hidden"], out, sizes["classifier_dropout"])
        self.drop = nn.Dropout(sizes["dropout"])

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        video, words, chars = batch["video"], batch["words"], batch["chars"]
        b, c, m = words.shape
        v = self.video_encoder(video) if self.video_encoder is not None else video  # V_o (Eq. 9)
        v = self.video_proj(self.drop(v))
        if c > 1:  # every candidate sees the same video: encoded once, repeated for the co-attention
            v = v.unsqueeze(1).expand(b, c, *v.shape[1:]).reshape(b * c, *v.shape[1:])
        q, q_mask = self.question_encoder(words.reshape(b * c, m), chars.reshape(b * c, m, chars.shape[-1]))
        fused = self.co_attention(v, q, q_mask).mean(dim=1)  # O_f averaged over the frames (code)
        out = self.head(fused)
        if self.task in ("action", "transition"):
            return out.view(b, c)  # Eq. 15, one score per candidate
        if self.task == "count":
            return out.view(b)  # Eq. 17
        return out  # Eq. 16 (softmax in the loss)


def count_prediction(raw: torch.Tensor) -> torch.Tensor:
    """Count evaluation: the regressed number clipped to 1..10, then rounded (official code)."""
    return raw.clamp(1, 10).round()
