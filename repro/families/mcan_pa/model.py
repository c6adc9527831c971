"""MCAN (Yu et al. 2019) and its positional variants from MCAN+PA (Mao et al. 2022).

The encoder is 6 self-attention layers over the LSTM-encoded question; the decoder is 6 layers of
self-attention over the image regions followed by guided attention to the encoder's last output.
MCAN+PA replaces them by PWA (encoder), POA (decoder self-attention) and PMA (guided attention),
each one any subset; MCAN+PE instead adds position embeddings to the two inputs (Eq. 15).
The composite head is Eq. (1-3): attentional flattening of each modality, projection, sum,
LayerNorm and a linear classifier; training uses BCE-with-logits over soft scores (Eq. 4).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families.mcan_pa.positional import GeometryScores, PositionalScores, box_feature, fuse
from repro.nn.attention import FeedForward, LayerNorm, MultiHeadAttention, mask_value

# The paper's sizes (§IV-B) and MCAN-small's (MILVLG/mcan-vqa).
PAPER_SIZES: dict[str, Any] = {
    "d_model": 512,
    "layers": 6,
    "heads": 8,
    "ffn": 2048,
    "flat_out": 1024,
    "flat_mlp": 512,
    "embed_dim": 300,
    "max_tokens": 14,
    "max_boxes": 100,
    "feature_dim": 2048,
    "dropout": 0.1,
    # POA's E_G size: the paper embeds R_ij "with the dimension R^{1 x d}" (§III-D); Relation
    # Networks used 64. Must be divisible by 8.
    "geometry_dim": 512,
}


class SelfAttentionLayer(nn.Module):
    """MCAN's SA unit; given a positional bias it is PWA or POA (Eq. 11-12)."""

    def __init__(self, d: int, heads: int, ffn: int, dropout: float):
        super().__init__()
        self.att = MultiHeadAttention(d, heads, dropout)
        self.ffn = FeedForward(d, ffn, dropout)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm1, self.norm2 = LayerNorm(d), LayerNorm(d)

    def forward(self, x, mask, bias=None, scale=None):
        x = self.norm1(x + self.drop1(self.att(x, x, x, bias=bias, key_padding_mask=mask, scale=scale)))  # Eq. 11
        return self.norm2(x + self.drop2(self.ffn(x)))  # Eq. 12


class GuidedLayer(nn.Module):
    """MCAN's SGA unit: self-attention over regions (SA or POA), then guided attention to the question (GA or PMA)."""

    def __init__(self, d: int, heads: int, ffn: int, dropout: float):
        super().__init__()
        self.self_att = MultiHeadAttention(d, heads, dropout)
        self.guided_att = MultiHeadAttention(d, heads, dropout)
        self.ffn = FeedForward(d, ffn, dropout)
        self.drop1, self.drop2, self.drop3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d), LayerNorm(d), LayerNorm(d)

    def forward(self, x, y, x_mask, y_mask, self_bias=None, self_scale=None, guided_bias=None, guided_scale=None):
        x = self.norm1(
            x + self.drop1(self.self_att(x, x, x, bias=self_bias, key_padding_mask=x_mask, scale=self_scale))
        )
        x = self.norm2(
            x + self.drop2(self.guided_att(x, y, y, bias=guided_bias, key_padding_mask=y_mask, scale=guided_scale))
        )
        return self.norm3(x + self.drop3(self.ffn(x)))


class AttFlat(nn.Module):
    """Eq. (1): X' = sum_i softmax(MLP(X_i)) X_i over unmasked items, then the projection W of Eq. (2)."""

    def __init__(self, d: int, mlp: int, out: int, dropout: float):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d, mlp), nn.ReLU(inplace=True), nn.Dropout(dropout), nn.Linear(mlp, 1))
        self.merge = nn.Linear(d, out)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logits = self.mlp(x)
        logits = logits.masked_fill(mask[..., None], mask_value(logits.dtype))
        weights = torch.softmax(logits, dim=1)
        return self.merge((weights * x).sum(dim=1))


class MCAN(nn.Module):
    """MCAN with optional PE, PWA, POA, PMA. forward(batch) -> logits [B, num_answers].

    `positional` is a subset of {"pwa", "poa", "pma"}; `fusion` is "eq8" (MCAN+PA) or
    "relation-network" (MCAN+PA*); `position_embedding` "bert" gives MCAN+PE.
    """

    def __init__(
        self,
        num_tokens: int,
        num_answers: int,
        sizes: dict[str, Any],
        *,
        positional: tuple[str, ...] = (),
        fusion: str = "eq8",
        position_embedding: str | None = None,
        embeddings: torch.Tensor | None = None,
    ):
        super().__init__()
        s = dict(sizes)
        d, heads, layers, p = s["d_model"], s["heads"], s["layers"], s["dropout"]
        self.sizes, self.positional, self.fusion, self.position_embedding = (
            s,
            tuple(positional),
            fusion,
            position_embedding,
        )
        self.d_head = d // heads

        self.embedding = nn.Embedding(num_tokens, s["embed_dim"])
        if embeddings is not None:
            if tuple(embeddings.shape) != (num_tokens, s["embed_dim"]):
                raise ReproError(
                    f"word embeddings have shape {tuple(embeddings.shape)}, expected ({num_tokens}, {s['embed_dim']})"
                )
            with torch.no_grad():
                self.embedding.weight.copy_(embeddings)
        self.lstm = nn.LSTM(s["embed_dim"], d, num_layers=1, batch_first=True)
        self.img_proj = nn.Linear(s["feature_dim"], d)

        uses_words = position_embedding == "bert" or "pwa" in self.positional or "pma" in self.positional
        uses_boxes = position_embedding == "bert" or "pma" in self.positional
        # Word positions: a learnable R^{14 x d} embedding (§III-C), shared by PE, PWA and PMA.
        self.word_pos = nn.Parameter(torch.randn(s["max_tokens"], d) * 0.02) if uses_words else None
        # PMA's X_pos: the 5-d box feature linearly transformed to d (§III-E); also PE's image positions.
        self.box_proj = nn.Linear(5, d) if uses_boxes else None
        self.pwa = (
            nn.ModuleList(PositionalScores(d, heads) for _ in range(layers)) if "pwa" in self.positional else None
        )
        self.pma = (
            nn.ModuleList(PositionalScores(d, heads) for _ in range(layers)) if "pma" in self.positional else None
        )
        self.poa = GeometryScores(s["geometry_dim"], heads, layers) if "poa" in self.positional else None

        self.encoder = nn.ModuleList(SelfAttentionLayer(d, heads, s["ffn"], p) for _ in range(layers))
        self.decoder = nn.ModuleList(GuidedLayer(d, heads, s["ffn"], p) for _ in range(layers))
        self.flat_lang = AttFlat(d, s["flat_mlp"], s["flat_out"], p)
        self.flat_img = AttFlat(d, s["flat_mlp"], s["flat_out"], p)
        self.norm = LayerNorm(s["flat_out"])  # Eq. 2
        self.classifier = nn.Linear(s["flat_out"], num_answers)  # ω_o of Eq. 3 (the sigmoid is in the loss)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        tokens, features = batch["tokens"], batch["features"]
        t = tokens.shape[1]
        if t > self.sizes["max_tokens"]:
            raise ReproError(f"questions have {t} tokens, the model takes at most {self.sizes['max_tokens']}")
        lang_mask = tokens == 0  # PAD = 0
        img_mask = features.abs().sum(-1) == 0  # zero rows are padding
        lang, _ = self.lstm(self.embedding(tokens))
        img = self.img_proj(features)

        words = self.word_pos[:t][None] if self.word_pos is not None else None
        boxes_pos = (
            self.box_proj(box_feature(batch["boxes"], batch["image_size"])) if self.box_proj is not None else None
        )
        if self.position_embedding == "bert":  # MCAN+PE: positions added to the inputs (Eq. 15)
            lang = lang + words
            img = img + boxes_pos

        for i, layer in enumerate(self.encoder):
            bias = scale = None
            if self.pwa is not None:  # PWA: A_pos from the word positions, fused by Eq. 8 (or RN)
                bias, scale = fuse(self.pwa[i](words, words), self.d_head, self.fusion)
            lang = layer(lang, lang_mask, bias, scale)

        geometry = self.poa(batch["boxes"]) if self.poa is not None else None
        for i, layer in enumerate(self.decoder):
            sb = ss = gb = gs = None
            if geometry is not None:  # POA: a^G = E_G W^G (Eq. 13), per head
                sb, ss = fuse(geometry[i], self.d_head, self.fusion)
            if self.pma is not None:  # PMA: X_pos = boxes, Y_pos = word positions
                gb, gs = fuse(self.pma[i](boxes_pos, words), self.d_head, self.fusion)
            img = layer(img, lang, img_mask, lang_mask, sb, ss, gb, gs)

        fused = self.flat_lang(lang, lang_mask) + self.flat_img(img, img_mask)  # Eq. 1-2
        return self.classifier(self.norm(fused))  # Eq. 3 before the sigmoid
