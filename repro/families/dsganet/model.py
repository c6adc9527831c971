"""DSGANet (Liu et al.): MCAN's encoder-decoder with DSGA in the image encoder (Sec. IV, Eqs. 2-28).

Question: BERT (a `transformers.BertModel` built from a `BertConfig`) or a GRU gives the word
embeddings S and the question vector q (Sec. IV-B); S goes through L SA+FFN layers (Eqs. 7-8).
Image: node features are the region (or grid cell) features concatenated with their box (Sec. IV-A),
projected to d_h, then L layers of DSGA -> GA -> FFN with residual + LN (Eqs. 9-11). The head is
MCAN's: AttFlat on S^L and O^L, LayerNorm(W_o o + W_s s), a linear layer before the sigmoid (Eqs. 25-28).

DSGA's attention map is a sum of score matrices (Eq. 15 for objects, Eq. 19 for grids):

- SA: MCAN's multi-head scaled dot product (Eq. 2).
- DAA (objects, Eq. 16): Q'_i . R^spatial_ij / sqrt(d_s), the key omitted, with R^spatial =
  ReLU(FC([r^bbox; r^depth])) (Eqs. 3-6) from the relations switched on.
- SGA (objects, Eqs. 17-18): w^T ReLU(W1 q + W2 W^s[Q''_i; R_ij; K''_j]).
- DAA^bbox (grids, Eqs. 20-21): f^dx(Q')[|x_i - x_j|] + f^dy(Q')[|y_i - y_j|];
  DAA^depth (grids, Eqs. 22-24): (W^Q[Q'; dep_hist]) . (W^K[K'; dep_hist]) / sqrt(d_s); both times alpha.

DAA and SGA give one N x N map each, added to the logits of every head (Eq. 15 speaks of N x N score
matrices; d_s = 160 does not split over 12 heads). The choices are listed in the family README.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from repro.errors import ReproError
from repro.families.mcan_pa.model import AttFlat, GuidedLayer, SelfAttentionLayer
from repro.nn.attention import LayerNorm, bert_padding_mask

# Sizes at the paper's settings (Sec. V-B: L = 6, d_h = 768, d_s = 160, k = 16); MCAN's rules where the
# paper is silent (64-d heads, FFN 4 d_h, AttFlat MLP 512 and output 2 d_h, 14 tokens, GloVe 300-d for the
# GRU); bert-base-uncased for BERT; grid offsets up to 32 cells (608 = 19 x 32 cells at most).
PAPER_SIZES: dict[str, Any] = {
    "d_model": 768,
    "layers": 6,
    "heads": 12,
    "ffn": 3072,
    "spatial_dim": 160,
    "flat_out": 1536,
    "flat_mlp": 512,
    "embed_dim": 300,
    "max_tokens": 14,
    "max_boxes": 100,
    "max_grids": 608,
    "feature_dim": 2048,
    "dropout": 0.1,
    "depth_bins": 16,
    "grid_size": 32,
    "bert_layers": 12,
    "bert_hidden": 768,
    "bert_heads": 12,
    "bert_ffn": 3072,
    "bert_vocab": 30522,
    "bert_cls": 101,
}
DEPTH_KEYS = {"peak-bin-mean": "depth_mean", "mode": "depth_mode"}  # batch keys of the scalar depth readings


# --- relations (Sec. IV-A) -----------------------------------------------------------------------


def box_geometry(boxes: torch.Tensor, image_size: torch.Tensor, eps: float) -> tuple[torch.Tensor, ...]:
    """Centres and sizes of pixel boxes [B, N, 4], normalised by the image size [B, 2]; sizes at least eps."""
    scale = image_size[:, None, :].repeat(1, 1, 2)
    b = boxes / scale
    w = (b[..., 2] - b[..., 0]).clamp(min=eps)
    h = (b[..., 3] - b[..., 1]).clamp(min=eps)
    return (b[..., 0] + b[..., 2]) / 2, (b[..., 1] + b[..., 3]) / 2, w, h


def bbox_relation(boxes: torch.Tensor, image_size: torch.Tensor, eps: float) -> torch.Tensor:
    """Eq. 3: r^bbox_ij = (log|xc_i - xc_j|/w_i, log|yc_i - yc_j|/h_i, log w_j/w_i, log h_j/h_i), [B, N, N, 4].

    The paper has no guard; log(max(., eps)) as ReGAT and Relation Networks (log 0 on the diagonal)."""
    xc, yc, w, h = box_geometry(boxes, image_size, eps)
    dx = ((xc[:, :, None] - xc[:, None, :]).abs() / w[:, :, None]).clamp(min=eps).log()
    dy = ((yc[:, :, None] - yc[:, None, :]).abs() / h[:, :, None]).clamp(min=eps).log()
    rw = (w[:, None, :] / w[:, :, None]).log()
    rh = (h[:, None, :] / h[:, :, None]).log()
    return torch.stack([dx, dy, rw, rh], dim=-1)


def depth_relation(boxes: torch.Tensor, image_size: torch.Tensor, depth: torch.Tensor, eps: float) -> torch.Tensor:
    """Eq. 4: (log dep_j/dep_i, log w_j dep_j/(w_i dep_i), log h_j dep_j/(h_i dep_i), S^inter_ij/(w_i h_i)).

    `depth` [B, N] are gray values 0..255, divided by 255 and floored at eps (no guard in the paper)."""
    xc, yc, w, h = box_geometry(boxes, image_size, eps)
    dep = (depth / 255.0).clamp(min=eps)
    ratio = dep[:, None, :] / dep[:, :, None]
    rd = ratio.log()
    rwd = (ratio * w[:, None, :] / w[:, :, None]).log()
    rhd = (ratio * h[:, None, :] / h[:, :, None]).log()
    b = boxes / image_size[:, None, :].repeat(1, 1, 2)
    iw = torch.minimum(b[:, :, None, 2], b[:, None, :, 2]) - torch.maximum(b[:, :, None, 0], b[:, None, :, 0])
    ih = torch.minimum(b[:, :, None, 3], b[:, None, :, 3]) - torch.maximum(b[:, :, None, 1], b[:, None, :, 1])
    inter = iw.clamp(min=0) * ih.clamp(min=0) / (w * h)[:, :, None]
    return torch.stack([rd, rwd, rhd, inter], dim=-1)


def depth_scalar(batch: dict[str, torch.Tensor], reading: str, bins: int) -> torch.Tensor:
    """dep_i [B, N] in gray values by the config's `depth_value` reading (Sec. IV-A; README: choices)."""
    if reading == "peak-bin-centre":
        if "depth_peak" not in batch:
            raise ReproError("the depth relation needs `depth_peak` per box in the batch (a store with depth)")
        width = 256.0 / bins
        return batch["depth_peak"].float() * width + (width - 1) / 2
    key = DEPTH_KEYS[reading]
    if key not in batch:
        raise ReproError(
            f"depth_value {reading!r} needs `{key}` per box in the batch; the feature store has "
            f"no such extra (use depth_value: peak-bin-centre, or add {key} to the store)"
        )
    return batch[key].float()


# --- question representation (Sec. IV-B) ----------------------------------------------------------


class GRUQuestion(nn.Module):
    """Word embeddings -> one GRU layer of d_h: S = its outputs, q = the output at the last word."""

    def __init__(self, num_tokens: int, s: dict[str, Any], embeddings: torch.Tensor | None = None):
        super().__init__()
        self.embedding = nn.Embedding(num_tokens, s["embed_dim"])
        if embeddings is not None:
            if tuple(embeddings.shape) != (num_tokens, s["embed_dim"]):
                raise ReproError(
                    f"word embeddings have shape {tuple(embeddings.shape)}, expected ({num_tokens}, {s['embed_dim']})"
                )
            with torch.no_grad():
                self.embedding.weight.copy_(embeddings)
        self.gru = nn.GRU(s["embed_dim"], s["d_model"], batch_first=True)

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        tokens = batch["tokens"]
        mask = tokens == 0
        words, _ = self.gru(self.embedding(tokens))
        last = (~mask).sum(1).clamp(min=1) - 1
        q = words[torch.arange(words.shape[0], device=words.device), last]
        return words, mask, q


class BertQuestion(nn.Module):
    """`transformers.BertModel` (no pooler): S = the outputs at the words, q = the output at [CLS].

    Input ids are `batch["bert_ids"]` when the data gives WordPiece ids ([CLS] first, 0 = [PAD]); otherwise
    the prepared word ids with a [CLS] id put in front (`bert_cls`, or num_tokens for a word-level vocabulary,
    where `bert_vocab` is None). BERT is fine-tuned with the rest (the paper does not say)."""

    def __init__(self, num_tokens: int, s: dict[str, Any]):
        super().__init__()
        from transformers import BertConfig, BertModel

        vocab = s["bert_vocab"] or num_tokens + 1
        self.cls_id = s["bert_cls"] if s["bert_vocab"] else num_tokens
        if self.cls_id >= vocab:
            raise ReproError(f"bert_cls {self.cls_id} is outside a BERT vocabulary of {vocab}")
        self.config = BertConfig(
            vocab_size=vocab,
            hidden_size=s["bert_hidden"],
            num_hidden_layers=s["bert_layers"],
            num_attention_heads=s["bert_heads"],
            intermediate_size=s["bert_ffn"],
            max_position_embeddings=512,
            hidden_dropout_prob=s["dropout"],
            attention_probs_dropout_prob=s["dropout"],
            pad_token_id=0,
        )
        self.bert = BertModel(self.config, add_pooling_layer=False)
        self.proj = nn.Linear(s["bert_hidden"], s["d_model"]) if s["bert_hidden"] != s["d_model"] else nn.Identity()

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if "bert_ids" in batch:
            ids = batch["bert_ids"]
        else:
            tokens = batch["tokens"]
            ids = torch.cat([torch.full_like(tokens[:, :1], self.cls_id), tokens], dim=1)
        attention = bert_padding_mask(ids == 0, self.bert.embeddings.word_embeddings.weight.dtype)
        out = self.proj(self.bert(input_ids=ids, attention_mask=attention).last_hidden_state)
        return out[:, 1:], ids[:, 1:] == 0, out[:, 0]


def load_bert_weights(encoder: BertQuestion, folder: Path) -> bool:
    """Copy bert-base-uncased weights from a local folder (config.json + pytorch_model.bin / model.safetensors)
    into the encoder; False when the folder has no weights. The sizes must be bert-base's."""
    from transformers import BertModel

    from repro.nn.pretrained import bert_from_folder

    pretrained = bert_from_folder(BertModel, folder, add_pooling_layer=False)
    if pretrained is None:
        return False
    missing, unexpected = encoder.bert.load_state_dict(pretrained.state_dict(), strict=False)
    if missing:
        raise ReproError(f"{folder}: BERT weights miss {len(missing)} tensors of the model (e.g. {missing[0]})")
    return True


# --- DSGA (Sec. IV-C) ------------------------------------------------------------------------------


class SpatialRelation(nn.Module):
    """Eqs. 5-6: R^spatial = ReLU(FC([r^bbox; r^depth])), [B, N, N, d_s]; one FC shared by all layers."""

    def __init__(self, relations: tuple[str, ...], d_s: int, depth_value: str, bins: int, eps: float):
        super().__init__()
        self.relations, self.depth_value, self.bins, self.eps = relations, depth_value, bins, eps
        self.fc = nn.Linear(4 * len(relations), d_s)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = []
        if "bbox" in self.relations:
            parts.append(bbox_relation(batch["boxes"], batch["image_size"], self.eps))
        if "depth" in self.relations:
            dep = depth_scalar(batch, self.depth_value, self.bins)
            parts.append(depth_relation(batch["boxes"], batch["image_size"], dep, self.eps))
        return F.relu(self.fc(torch.cat(parts, dim=-1)))


class ObjectRelationScores(nn.Module):
    """DAA (Eq. 16) and SGA (Eqs. 17-18) of one layer, summed: [B, 1, N, N], added to every head's logits."""

    def __init__(self, d: int, d_s: int, daa: bool, sga: bool):
        super().__init__()
        self.d_s = d_s
        self.daa_q = nn.Linear(d, d_s) if daa else None  # Q' (K' is omitted, following NG-SAN)
        if sga:
            self.sga_q, self.sga_k = nn.Linear(d, d_s), nn.Linear(d, d_s)  # Q'', K''
            self.w_s = nn.Linear(3 * d_s, d_s)  # W^s of Eq. 18 on [Q''_i; R_ij; K''_j]
            self.w1 = nn.Linear(d, d_s)  # W1^a of Eq. 17, on q in R^{d_h} (the paper writes d_s x d_s)
            self.w2 = nn.Linear(d_s, d_s, bias=False)  # W2^a
            self.w = nn.Linear(d_s, 1, bias=False)  # w^T
        else:
            self.sga_q = None

    def forward(self, x: torch.Tensor, relation: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        score = x.new_zeros(x.shape[0], x.shape[1], x.shape[1])
        if self.daa_q is not None:  # Eq. 16, divided by sqrt(d_s): Q' and R are d_s-dimensional
            score = score + torch.einsum("bid,bijd->bij", self.daa_q(x), relation) / math.sqrt(self.d_s)
        if self.sga_q is not None:  # Eq. 18 as W^s_q Q''_i + W^s_r R_ij + W^s_k K''_j (the same linear map)
            wq, wr, wk = self.w_s.weight.split(self.d_s, dim=1)
            sem = (
                F.linear(relation, wr, self.w_s.bias)
                + F.linear(self.sga_q(x), wq)[:, :, None]
                + F.linear(self.sga_k(x), wk)[:, None, :]
            )
            hidden = F.relu(self.w1(q)[:, None, None, :] + self.w2(sem))  # Eq. 17
            score = score + self.w(hidden).squeeze(-1)
        return score[:, None]


class GridRelationScores(nn.Module):
    """alpha [DAA^bbox + DAA^depth] of Eq. 19 for one layer: [B, 1, N, N].

    Q', K' are d_h-dimensional here, as W1^t in R^{d_h/2 x d_h} (Eq. 21) and W^Q, W^K in R^{d_s x (d_k + d_h)}
    (Eqs. 23-24, d_k read as the k = 16 bins) need."""

    def __init__(self, d: int, d_s: int, relations: tuple[str, ...], bins: int, grid_size: int, alpha: float):
        super().__init__()
        self.alpha, self.d_s, self.grid_size = alpha, d_s, grid_size
        self.q = nn.Linear(d, d)  # Q'
        self.bbox = "bbox" in relations
        if self.bbox:  # f^dx, f^dy: W2 ReLU(W1 Q'), G_s scores per query, one per absolute offset
            self.f_x = nn.Sequential(nn.Linear(d, d // 2), nn.ReLU(inplace=True), nn.Linear(d // 2, grid_size))
            self.f_y = nn.Sequential(nn.Linear(d, d // 2), nn.ReLU(inplace=True), nn.Linear(d // 2, grid_size))
        self.depth = "depth" in relations
        if self.depth:
            self.k = nn.Linear(d, d)  # K'
            self.wq, self.wk = nn.Linear(d + bins, d_s), nn.Linear(d + bins, d_s)  # W^Q, W^K

    def forward(self, x: torch.Tensor, xy: torch.Tensor, hist: torch.Tensor | None) -> torch.Tensor:
        qp = self.q(x)
        score = x.new_zeros(x.shape[0], x.shape[1], x.shape[1])
        if self.bbox:
            offset = (xy[:, :, None, :] - xy[:, None, :, :]).abs().clamp(max=self.grid_size - 1)  # [B, N, N, 2]
            score = score + self.f_x(qp).gather(2, offset[..., 0]) + self.f_y(qp).gather(2, offset[..., 1])
        if self.depth:
            q2 = self.wq(torch.cat([qp, hist], dim=-1))
            k2 = self.wk(torch.cat([self.k(x), hist], dim=-1))
            score = score + q2 @ k2.transpose(1, 2) / math.sqrt(self.d_s)  # Eq. 22
        return (self.alpha * score)[:, None]


def grid_coordinates(boxes: torch.Tensor) -> torch.Tensor:
    """Integer (x, y) of grid cells [B, N, 2] from their pixel rectangles: the rank of each cell's left and top
    edges among the image's (row-major cells of equal size give column and row numbers)."""
    return torch.stack([_rank_of_edges(boxes[..., 0]), _rank_of_edges(boxes[..., 1])], dim=-1)


def _rank_of_edges(edge: torch.Tensor) -> torch.Tensor:
    """For each cell, how many distinct edge values of its image are smaller than its own: [B, N] long. Counted
    over the cells whose value no earlier cell has (one per distinct value), without a per-image unique, so that
    it batches (and seeds trained together, torch.func.vmap, can map it)."""
    same = edge[..., :, None] == edge[..., None, :]  # [B, N, N]
    earlier = torch.ones_like(same[0]).tril(-1)  # [N, N]: cell k before cell j
    first = ~(same & earlier).any(-1)  # [B, N]: no earlier cell has this value
    smaller = edge[..., None, :] < edge[..., :, None]  # [B, N(i), N(j)]: edge_j < edge_i
    return (smaller & first[..., None, :]).sum(-1)


# --- the model -------------------------------------------------------------------------------------


class DSGANet(nn.Module):
    """forward(batch) -> answer logits [B, num_answers]. Switches: `features` (objects/grids), `encoder`
    (bert/gru), `daa` (relations), `sga`, `alpha`; `sizes` as PAPER_SIZES."""

    def __init__(
        self,
        num_tokens: int,
        num_answers: int,
        sizes: dict[str, Any],
        *,
        features: str = "objects",
        encoder: str = "bert",
        daa: tuple[str, ...] = ("bbox", "depth"),
        sga: bool = True,
        alpha: float = 1 / 3,
        depth_value: str = "peak-bin-mean",
        log_eps: float = 1e-3,
        embeddings: torch.Tensor | None = None,
    ):
        super().__init__()
        s = dict(sizes)
        d, heads, layers, p, d_s = s["d_model"], s["heads"], s["layers"], s["dropout"], s["spatial_dim"]
        self.sizes, self.features, self.daa, self.sga = s, features, tuple(daa), sga
        self.depth_value = depth_value

        self.question = BertQuestion(num_tokens, s) if encoder == "bert" else GRUQuestion(num_tokens, s, embeddings)
        self.img_proj = nn.Linear(s["feature_dim"] + 4, d)  # [region feature; box] -> d_h (Sec. IV-A)
        self.relation: SpatialRelation | None = None
        self.relation_scores: nn.ModuleList | None = None
        if features == "objects" and (daa or sga):
            # SGA without DAA (Table VII row 4) still needs R^spatial (Eq. 18): both relations then.
            self.relation = SpatialRelation(self.daa or ("bbox", "depth"), d_s, depth_value, s["depth_bins"], log_eps)
            self.relation_scores = nn.ModuleList(ObjectRelationScores(d, d_s, bool(daa), sga) for _ in range(layers))
        elif features == "grids" and daa:
            self.relation_scores = nn.ModuleList(
                GridRelationScores(d, d_s, self.daa, s["depth_bins"], s["grid_size"], alpha) for _ in range(layers)
            )

        self.encoder = nn.ModuleList(SelfAttentionLayer(d, heads, s["ffn"], p) for _ in range(layers))  # Eqs. 7-8
        self.decoder = nn.ModuleList(GuidedLayer(d, heads, s["ffn"], p) for _ in range(layers))  # Eqs. 9-11
        self.flat_lang = AttFlat(d, s["flat_mlp"], s["flat_out"], p)  # Eqs. 25-26, W_s of Eq. 27
        self.flat_img = AttFlat(d, s["flat_mlp"], s["flat_out"], p)  # W_o
        self.norm = LayerNorm(s["flat_out"])  # Eq. 27
        self.classifier = nn.Linear(s["flat_out"], num_answers)  # Eq. 28 before the sigmoid

    def relation_bias(self, batch: dict[str, torch.Tensor], q: torch.Tensor):
        """Per layer, a function of the layer input giving the DAA/SGA score map [B, 1, N, N] (or None)."""
        if self.relation_scores is None:
            return [None] * len(self.decoder)
        if self.features == "objects":
            relation = self.relation(batch)
            return [lambda x, m=m: m(x, relation, q) for m in self.relation_scores]
        xy = batch["grid_xy"] if "grid_xy" in batch else grid_coordinates(batch["boxes"])
        hist = batch.get("depth_hist")
        if "depth" in self.daa and hist is None:
            raise ReproError("DAA^depth on grids needs `depth_hist` per cell in the batch")
        return [lambda x, m=m: m(x, xy, hist) for m in self.relation_scores]

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        tokens, features = batch["tokens"], batch["features"]
        if tokens.shape[1] > self.sizes["max_tokens"]:
            raise ReproError(
                f"questions have {tokens.shape[1]} tokens, the model takes at most {self.sizes['max_tokens']}"
            )
        lang, lang_mask, q = self.question(batch)
        img_mask = features.abs().sum(-1) == 0  # zero rows are padding
        box = batch["boxes"] / batch["image_size"][:, None, :].repeat(1, 1, 2)
        img = self.img_proj(torch.cat([features, box], dim=-1))

        for layer in self.encoder:
            lang = layer(lang, lang_mask)
        for layer, bias in zip(self.decoder, self.relation_bias(batch, q), strict=True):
            img = layer(img, lang, img_mask, lang_mask, bias(img) if bias is not None else None)

        fused = self.flat_lang(lang, lang_mask) + self.flat_img(img, img_mask)
        return self.classifier(self.norm(fused))
