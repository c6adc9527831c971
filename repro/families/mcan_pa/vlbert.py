"""VL-BERT (Su et al., ICLR 2020) without visual-linguistic pre-training, and VL-BERT+PA (mcan-pa Table IV).

VL-BERT is one BERT stack over a single sequence: the text elements ([CLS], the question, the
[MASK] whose output answers, [SEP]) and one element per image region ([IMG] tokens). Every element's
input is the sum of (VL-BERT §3.2):

* the token embedding (the region elements share the [IMG] token),
* the visual feature embedding: FC([appearance feature; geometry embedding]) — a region's own RoI
  feature and the sinusoidal embedding of its normalised box (x1/W, y1/H, x2/W, y2/H); text elements
  get the whole image's (here the mean of the region features and the whole-image box, as no
  whole-image RoI feature is prepared),
* the segment embedding (text: 0, image: 1) and the sequence position embedding (text: 0, 1, ...;
  every region the one position after the text, as VL-BERT does).

The stack is `transformers`' `BertEmbeddings` and `BertLayer`s, so bert-base-uncased weights load
into it unchanged (`load_bert_weights`); the new parts (visual embedding, [IMG], VQA head) start
random. The answer is read at [MASK]: a two-layer MLP over its output (VL-BERT's VQA head).

PA (the spec's choice, the paper does not describe it): every attention map of every layer gets a
positional term fused by Eq. (8), by blocks of the single-stream sequence —
word-word PWA (text positions, `PositionalScores`), region-region POA (relative box geometry,
`GeometryScores`, Eq. 13-14), word-region and region-word PMA (text positions against the 5-d box
feature, `PositionalScores`). Eq. (8)'s 1/sqrt(2) temperature applies to the whole map; a block
whose module is off has A_pos = 0.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families.mcan_pa.positional import GeometryScores, PositionalScores, box_feature, fuse, sinusoid_embedding
from repro.nn.attention import MASK_VALUE

# VL-BERT_BASE: BERT-base (bert-base-uncased) with 2048-d bottom-up features (VL-BERT's VQA setting).
VLBERT_BASE_SIZES: dict[str, Any] = {
    "vocab": 30522,  # bert-base-uncased WordPiece; 0 = word-level ids of the prepared vocabulary
    "hidden": 768,
    "layers": 12,
    "heads": 12,
    "ffn": 3072,
    "max_positions": 512,
    "max_tokens": 14,  # question tokens (MCAN's preparation); the text adds [CLS], [MASK], [SEP]
    "max_boxes": 100,
    "feature_dim": 2048,
    "visual_geometry_dim": 2048,  # VL-BERT's box embedding, concatenated to the appearance feature
    "head_hidden": 1536,  # VL-BERT's VQA head: hidden -> 2 x hidden -> answers
    "dropout": 0.1,
    "geometry_dim": 64,  # POA's E_G (Relation Networks' 64; MCAN+PA uses d = 512 at d_model 512)
}
# bert-base-uncased's special tokens; [IMG] takes the first unused slot
WORDPIECE_SPECIALS = {"pad": 0, "unused0": 1, "cls": 101, "sep": 102, "mask": 103}


class VLBert(nn.Module):
    """forward(batch) -> answer logits [B, num_answers]; batch as `VQADataset` gives it.

    With `sizes["vocab"] == 0` the text ids are the prepared word ids (PAD = 0) and [CLS], [SEP],
    [MASK], [IMG] get ids after them; otherwise `batch["wordpiece"]` holds WordPiece ids of the
    question ([PAD] = 0, no specials) and bert-base-uncased's specials are used.
    """

    def __init__(self, num_tokens: int, num_answers: int, sizes: dict[str, Any], *, positional=(), fusion: str = "eq8"):
        super().__init__()
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertEmbeddings, BertLayer

        s = self.sizes = dict(sizes)
        self.positional, self.fusion = tuple(positional), fusion
        word_level = not s["vocab"]
        vocab = num_tokens + 4 if word_level else s["vocab"]
        if word_level:
            self.cls_id, self.sep_id, self.mask_id, self.img_id = range(num_tokens, num_tokens + 4)
        else:
            w = WORDPIECE_SPECIALS
            self.cls_id, self.sep_id, self.mask_id, self.img_id = w["cls"], w["sep"], w["mask"], w["unused0"]
        self.config = BertConfig(
            vocab_size=vocab,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["ffn"],
            max_position_embeddings=s["max_positions"],
            hidden_dropout_prob=s["dropout"],
            attention_probs_dropout_prob=s["dropout"],
            type_vocab_size=2,
            pad_token_id=0,
        )
        self.config._attn_implementation = "eager"  # per-head additive biases, any device
        self.embeddings = BertEmbeddings(self.config)
        self.layers = nn.ModuleList(BertLayer(self.config, layer_idx=i) for i in range(s["layers"]))
        # visual feature embedding: FC([appearance; geometry]) (VL-BERT §3.2)
        self.visual = nn.Linear(s["feature_dim"] + s["visual_geometry_dim"], s["hidden"])
        self.visual_norm = nn.LayerNorm(s["hidden"], eps=1e-12)
        d, heads, layers = s["hidden"], s["heads"], s["layers"]
        self.d_head = d // heads
        # with PA, the logit scale of Eq. 8 (or of the Relation-Network rule) for the whole map
        self.scale = fuse(torch.zeros(()), self.d_head, fusion)[1] if self.positional else None
        uses_words = "pwa" in self.positional or "pma" in self.positional
        self.word_pos = nn.Parameter(torch.randn(s["max_tokens"] + 3, d) * 0.02) if uses_words else None
        self.box_proj = nn.Linear(5, d) if "pma" in self.positional else None
        self.pwa = (
            nn.ModuleList(PositionalScores(d, heads) for _ in range(layers)) if "pwa" in self.positional else None
        )
        self.poa = GeometryScores(s["geometry_dim"], heads, layers) if "poa" in self.positional else None
        self.pma = (
            nn.ModuleList(PositionalScores(d, heads) for _ in range(layers)) if "pma" in self.positional else None
        )
        self.head = nn.Sequential(
            nn.Dropout(s["dropout"]),
            nn.Linear(d, s["head_hidden"]),
            nn.ReLU(inplace=True),
            nn.Dropout(s["dropout"]),
            nn.Linear(s["head_hidden"], num_answers),
        )

    # --- inputs -----------------------------------------------------------------------------------

    def _text(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """[CLS] question [MASK] [SEP], left-aligned and padded: ids [B, T + 3] and the [MASK] index [B]."""
        words = batch["wordpiece"] if self.sizes["vocab"] else batch["tokens"]
        t = words.shape[1]
        if t > self.sizes["max_tokens"]:
            raise ReproError(f"questions have {t} tokens, the model takes at most {self.sizes['max_tokens']}")
        b = words.shape[0]
        length = (words != 0).sum(1)
        ids = torch.zeros(b, t + 3, dtype=torch.long, device=words.device)
        ids[:, 0] = self.cls_id
        ids[:, 1 : t + 1] = words
        rows = torch.arange(b, device=words.device)
        ids[rows, length + 1] = self.mask_id
        ids[rows, length + 2] = self.sep_id
        return ids, length + 1

    def _visual(self, batch: dict[str, torch.Tensor], img_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Visual feature embeddings of the regions [B, N, d] and of the whole image [B, d]."""
        features, boxes, size = batch["features"], batch["boxes"], batch["image_size"]
        scale = torch.cat([size, size], dim=-1)[:, None]  # (W, H, W, H)
        geometry = sinusoid_embedding(boxes / scale.clamp(min=1.0), self.sizes["visual_geometry_dim"])
        regions = self.visual(torch.cat([features, geometry], dim=-1))
        keep = (~img_mask).float()[..., None]
        mean = (features * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        whole = sinusoid_embedding(torch.tensor([0.0, 0.0, 1.0, 1.0], device=features.device), geometry.shape[-1])
        image = self.visual(torch.cat([mean, whole.expand(mean.shape[0], -1)], dim=-1))
        return self.visual_norm(regions), self.visual_norm(image)

    def _bias(self, layer: int, text_mask, img_mask, words, boxes_pos, geometry) -> torch.Tensor:
        """The additive attention bias of one layer [B, h, L, L]: positional blocks (fused) and the key mask."""
        b, t, n = text_mask.shape[0], text_mask.shape[1], img_mask.shape[1]
        heads = self.sizes["heads"]
        bias = text_mask.new_zeros((b, heads, t + n, t + n), dtype=torch.float32)
        if self.pwa is not None:  # word-word: PWA (Eq. 9, 11)
            bias[:, :, :t, :t] = fuse(self.pwa[layer](words, words), self.d_head, self.fusion)[0]
        if geometry is not None:  # region-region: POA (Eq. 10, 12-14)
            bias[:, :, t:, t:] = fuse(geometry[layer], self.d_head, self.fusion)[0]
        if self.pma is not None:  # word-region and region-word: PMA (Eq. 13)
            bias[:, :, :t, t:] = fuse(self.pma[layer](words, boxes_pos), self.d_head, self.fusion)[0]
            bias[:, :, t:, :t] = fuse(self.pma[layer](boxes_pos, words), self.d_head, self.fusion)[0]
        keys = torch.cat([text_mask, img_mask], dim=1)
        return bias.masked_fill(keys[:, None, None, :], MASK_VALUE)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask_at = self._text(batch)
        features = batch["features"]
        b, t, n = ids.shape[0], ids.shape[1], features.shape[1]
        text_mask, img_mask = ids == 0, features.abs().sum(-1) == 0
        regions, image = self._visual(batch, img_mask)

        tokens = torch.cat([ids, torch.full((b, n), self.img_id, dtype=torch.long, device=ids.device)], dim=1)
        segments = torch.cat([torch.zeros_like(ids), torch.ones(b, n, dtype=torch.long, device=ids.device)], dim=1)
        positions = torch.cat(
            [
                torch.arange(t, device=ids.device).expand(b, t),
                ((~text_mask).sum(1, keepdim=True)).expand(b, n),  # every region: one position after the text
            ],
            dim=1,
        )
        visual = torch.cat([image[:, None].expand(b, t, -1), regions], dim=1)
        x = self.embeddings(
            inputs_embeds=self.embeddings.word_embeddings(tokens) + visual,
            token_type_ids=segments,
            position_ids=positions,
        )

        words = self.word_pos[:t][None] if self.word_pos is not None else None
        boxes_pos = (
            self.box_proj(box_feature(batch["boxes"], batch["image_size"])) if self.box_proj is not None else None
        )
        geometry = self.poa(batch["boxes"]) if self.poa is not None else None
        for i, layer in enumerate(self.layers):
            if self.scale is not None:
                layer.attention.self.scaling = self.scale
            x = layer(x, attention_mask=self._bias(i, text_mask, img_mask, words, boxes_pos, geometry).to(x.dtype))
        return self.head(x[torch.arange(b, device=x.device), mask_at])


def load_bert_weights(model: VLBert, folder) -> bool:
    """bert-base-uncased's embeddings and layers into VL-BERT (the text part); False when `folder` has no weights."""
    from pathlib import Path

    folder = Path(folder)
    if not any((folder / n).is_file() for n in ("pytorch_model.bin", "model.safetensors")):
        return False
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(folder), add_pooling_layer=False)
    if bert.config.hidden_size != model.sizes["hidden"] or bert.config.num_hidden_layers != model.sizes["layers"]:
        raise ReproError(
            f"{folder}: BERT of hidden size {bert.config.hidden_size}, the model has {model.sizes['hidden']}"
        )
    model.embeddings.load_state_dict(bert.embeddings.state_dict())
    for mine, theirs in zip(model.layers, bert.encoder.layer):
        mine.load_state_dict(theirs.state_dict())
    return True
