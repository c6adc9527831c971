"""VL-BERT (Su et al., ICLR 2020) as its code computes it, and VL-BERT+PA (mcan-pa Table IV).

The network is jackroos/VL-BERT's (commit 4373674): `vqa/modules/resnet_vlbert_for_vqa.py` `ResNetVLBERT` with
precomputed box features (`common/fast_rcnn.py` `FastRCNN`, `common/utils/bbox.py` `coordinate_embeddings`) and
`common/visual_linguistic_bert.py` `VisualLinguisticBert`, at the settings of the released configs
(`object_word_embed_mode` 2, `visual_ln` true, `visual_size` = `hidden_size`, `obj_pos_id_relative` true, no
pooler). `pretraining.py` adds the heads of its pre-training model. The BERT parts are `transformers`'
(`BertEmbeddings`, `BertLayer`, `BertPredictionHeadTransform`); what is VL-BERT's own is written here.

One VQA forward (`vqa_logits`, the official `inference_forward`):

* boxes [B, N, 4 + F]: (x1, y1, x2, y2) in pixels then the RoI feature, box 0 the whole image (its feature the
  mean of the others), padded rows -2; `official_inputs` builds them from this project's batch as VL-BERT's
  dataset does (`ADD_IMAGE_AS_A_BOX`, boxes clamped to the image);
* every box: ReLU(FC(Dropout([coordinate embedding; RoI feature]))) (`obj_downsample`); the coordinate embedding
  is sin/cos of (centre x, centre y, width, height) x 100 / image size at 1000^(i / K) for K = dim / 8;
* text: [CLS] question [SEP] [MASK] [SEP], segments 0 (question) and 1 (the answer: [MASK] and its [SEP]); every
  text element adds the whole-image box's representation through its own LayerNorm (`visual_ln_text`);
* objects: the one object word embedding plus the box's representation through `visual_ln_object`, segment 2,
  all at the one position after the text; then the [END] element (segment 2, one position further);
* text, objects and [END] concatenated without gaps per item (padding after [END]), BERT's embedding sum and
  LayerNorm, the BERT layers under a key mask, and the answer read at [MASK] by the classifier: "mlm" (BERT's
  prediction-head transform, dropout, a linear layer over the answers; the released configs) or "2fc" (dropout,
  linear, ReLU, dropout, linear; the code's default).

PA (the spec's choice, the paper does not describe it): every attention map of every layer gets a positional term
fused by Eq. (8), by blocks of the single-stream sequence — word-word PWA (text positions, `PositionalScores`),
region-region POA (relative box geometry, `GeometryScores`, Eq. 13-14), word-region and region-word PMA (text
positions against the 5-d box feature, `PositionalScores`). The whole-image box is a region; [END] and padding have
no positional term. Eq. (8)'s 1/sqrt(2) temperature applies to the whole map.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.families.mcan_pa.positional import GeometryScores, PositionalScores, box_feature, fuse

# VL-BERT_BASE and _LARGE (cfgs/vqa/base_4x16G_fp32.yaml, large_4x16G_fp32.yaml) with 2048-d bottom-up features
VLBERT_BASE_SIZES: dict[str, Any] = {
    "vocab": 30522,  # bert-base-uncased WordPiece; 0 = word-level ids of the prepared vocabulary
    "hidden": 768,
    "layers": 12,
    "heads": 12,
    "ffn": 3072,
    "max_positions": 512,
    "max_tokens": 14,  # question tokens (MCAN's preparation); the text adds [CLS], [SEP], [MASK], [SEP]
    "max_boxes": 100,
    "feature_dim": 2048,
    "visual_geometry_dim": 2048,  # fast_rcnn.py: 4 coordinates x sin/cos x 256 frequencies
    "head_hidden": 1024,  # the "2fc" classifier's CLASSIFIER_HIDDEN_SIZE (vqa/function/config.py)
    "dropout": 0.1,
    "geometry_dim": 64,  # POA's E_G (Relation Networks' 64; MCAN+PA uses d = 512 at d_model 512)
}
VLBERT_LARGE_SIZES: dict[str, Any] = {**VLBERT_BASE_SIZES, "hidden": 1024, "layers": 24, "heads": 16, "ffn": 4096}
VLBERT_SIZES = {"base": VLBERT_BASE_SIZES, "large": VLBERT_LARGE_SIZES}
CLASSIFIERS = ("mlm", "2fc")
# bert-base-uncased's special tokens (vocab.txt)
WORDPIECE_SPECIALS = {"pad": 0, "cls": 101, "sep": 102, "mask": 103}
SEGMENTS = 3  # type_vocab_size: 0 question, 1 answer, 2 objects and [END]
PADDED_BOX = -2.0  # VL-BERT's collate pads boxes with -2; a box is there when its x1 > -1.5
VISUAL_SCALE_INIT = 0.0  # visual_scale_{text,object}_init: the visual LayerNorms' gains start at zero
MASKED_KEY = -10000.0  # the official additive key mask


def coordinate_embedding(boxes: torch.Tensor, image_size: torch.Tensor, dim: int) -> torch.Tensor:
    """`common/utils/bbox.py` `coordinate_embeddings`: boxes [..., 4] (x1, y1, x2, y2) in pixels, image_size
    [..., 2] (W, H) -> [..., 4 * 2 * dim]: for centre x, centre y, width, height (x 100 / W or H) in turn, the
    sines then the cosines of the value over 1000^(i / dim), i < dim."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    w, h = image_size.unbind(-1)
    position = torch.stack([(x1 + x2) / 2 / w * 100, (y1 + y2) / 2 / h * 100, (x2 - x1) / w * 100, (y2 - y1) / h * 100])
    frequencies = 1000 ** (torch.arange(dim, dtype=boxes.dtype, device=boxes.device) / dim)
    angles = position.movedim(0, -1)[..., None] / frequencies  # [..., 4, dim]
    return torch.cat([angles.sin(), angles.cos()], dim=-1).flatten(-2)


class RegionEmbedding(nn.Module):
    """`FastRCNN` with precomputed features: ReLU(FC(Dropout([coordinate embedding; RoI feature]))) per box
    (`obj_downsample`), zero for padded boxes. boxes [B, N, 4], features [B, N, F], mask [B, N], image_size
    [B, 2] -> [B, N, hidden]."""

    def __init__(self, feature_dim: int, geometry_dim: int, hidden: int, dropout: float):
        super().__init__()
        if geometry_dim % 8:
            raise ReproError(f"VL-BERT's box embedding size {geometry_dim} must be divisible by 8 (4 x sin/cos)")
        self.geometry_dim = geometry_dim
        self.project = nn.Sequential(nn.Dropout(dropout), nn.Linear(geometry_dim + feature_dim, hidden), nn.ReLU())

    def forward(self, boxes, features, mask, image_size) -> torch.Tensor:
        geometry = coordinate_embedding(boxes, image_size[:, None, :], self.geometry_dim // 8)
        out = self.project(torch.cat([geometry, features], dim=-1))
        return torch.where(mask[..., None], out, torch.zeros((), dtype=out.dtype, device=out.device))


def longest(lengths: torch.Tensor, bound: int) -> int:
    """The longest of `lengths` (a host sync, as VL-BERT's code does); on PyTorch's meta device, which holds no
    values (the plan's memory estimate), `bound`, the length when every element is present."""
    return bound if lengths.is_meta else int(lengths.max())


def firsts(mask: torch.Tensor) -> torch.Tensor:
    """[B, N] -> [B, N]: the indices of each row's True elements in order, then the others."""
    return torch.argsort((~mask).to(torch.int8), dim=1, stable=True)


class Packed:
    """Where each element of the concatenated sequence comes from: per item, its text (positions < text_end), its
    objects (text_end <= p < object_end), [END] (p = object_end), padding after; `text_source` and `object_source`
    the text element and box each position reads (what VL-BERT's boolean-mask assignments do, by gathers)."""

    def __init__(self, text_mask: torch.Tensor, object_mask: torch.Tensor):
        b, t, n = text_mask.shape[0], text_mask.shape[1], object_mask.shape[1]
        self.text_end = text_mask.sum(1, keepdim=True)
        self.object_end = self.text_end + object_mask.sum(1, keepdim=True)
        self.length = longest(self.object_end, t + n) + 1
        self.grid = torch.arange(self.length, device=text_mask.device).expand(b, -1)
        self.text = self.grid < self.text_end
        self.objects = (self.grid >= self.text_end) & (self.grid < self.object_end)
        self.end = self.grid == self.object_end
        self.valid = self.grid <= self.object_end
        self.text_source = firsts(text_mask).gather(1, self.grid.clamp(max=t - 1))
        rank = (self.grid - self.text_end).clamp(0, max(n - 1, 0))
        self.object_source = firsts(object_mask).gather(1, rank) if n else rank

    def object_outputs(self, hidden: torch.Tensor, object_mask: torch.Tensor) -> torch.Tensor:
        """The sequence's object elements back at their boxes' places [B, N, d], zero for padded boxes."""
        rank = (object_mask.cumsum(1) - 1).clamp(min=0)
        at = (self.text_end + rank).clamp(max=self.length - 1)
        out = hidden.gather(1, at[..., None].expand(-1, -1, hidden.shape[-1]))
        return out.masked_fill(~object_mask[..., None], 0.0)


class VLBert(nn.Module):
    """VL-BERT for VQA: forward(batch) -> answer logits [B, num_answers], batch as `VQADataset` gives it.

    With `sizes["vocab"] == 0` the text ids are the prepared word ids (PAD = 0) and [CLS], [SEP], [MASK] get ids
    after them; otherwise `batch["wordpiece"]` holds WordPiece ids of the question ([PAD] = 0, no specials) and
    bert-base-uncased's specials are used. `classifier=None` builds the network without a VQA head (the pre-training
    model, `pretraining.py`).
    """

    def __init__(
        self,
        num_tokens: int,
        num_answers: int,
        sizes: dict[str, Any],
        *,
        classifier: str | None = "mlm",
        positional=(),
        fusion: str = "eq8",
    ):
        super().__init__()
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertEmbeddings, BertLayer

        s = self.sizes = dict(sizes)
        self.positional, self.fusion, self.classifier = tuple(positional), fusion, classifier
        word_level = not s["vocab"]
        vocab = num_tokens + 3 if word_level else s["vocab"]
        if word_level:
            self.cls_id, self.sep_id, self.mask_id = range(num_tokens, num_tokens + 3)
        else:
            w = WORDPIECE_SPECIALS
            self.cls_id, self.sep_id, self.mask_id = w["cls"], w["sep"], w["mask"]
            if max(self.cls_id, self.sep_id, self.mask_id) >= vocab:
                raise ReproError(f"a WordPiece vocabulary of {vocab} has no [MASK] ({self.mask_id})")
        self.config = BertConfig(
            vocab_size=vocab,
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["ffn"],
            max_position_embeddings=s["max_positions"],
            hidden_dropout_prob=s["dropout"],
            attention_probs_dropout_prob=s["dropout"],
            type_vocab_size=SEGMENTS,
            hidden_act="gelu",
            layer_norm_eps=1e-12,
            pad_token_id=0,
        )
        self.config._attn_implementation = "eager"  # per-head additive biases, any device
        d, heads, layers = s["hidden"], s["heads"], s["layers"]
        self.embeddings = BertEmbeddings(self.config)  # word, position, segment; the sum's LayerNorm
        self.end_embedding = nn.Embedding(1, d)
        self.object_embedding = nn.Embedding(1, d)  # object_linguistic_embeddings (object_word_embed_mode 2)
        self.regions = RegionEmbedding(s["feature_dim"], s["visual_geometry_dim"], d, s["dropout"])
        self.visual_norm_text = nn.LayerNorm(d, eps=1e-12)
        self.visual_norm_object = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(self.config, layer_idx=i) for i in range(layers))
        self.head = None if classifier is None else answer_classifier(self.config, classifier, s, num_answers)
        # PA: the positional modules and, with them, Eq. 8's logit scale for the whole map
        self.d_head = d // heads
        uses_words = "pwa" in self.positional or "pma" in self.positional
        self.word_pos = nn.Parameter(torch.randn(s["max_tokens"] + 4, d) * 0.02) if uses_words else None
        self.box_proj = nn.Linear(5, d) if "pma" in self.positional else None
        self.pwa = (
            nn.ModuleList(PositionalScores(d, heads) for _ in range(layers)) if "pwa" in self.positional else None
        )
        self.poa = GeometryScores(s["geometry_dim"], heads, layers) if "poa" in self.positional else None
        self.pma = (
            nn.ModuleList(PositionalScores(d, heads) for _ in range(layers)) if "pma" in self.positional else None
        )
        self._init_weights()
        if self.positional:
            scale = fuse(torch.zeros(()), self.d_head, fusion)[1]
            for layer in self.layers:
                layer.attention.self.scaling = scale

    def _init_weights(self) -> None:
        """VL-BERT's initialisation: N(0, 0.02) for the BERT part's linear and embedding weights, zero biases,
        LayerNorms at one, the visual LayerNorms' gains at 0 (`visual_scale_*_init`), the object word N(0, 0.02),
        the classifier's linear layers Xavier-uniform; `obj_downsample` keeps PyTorch's default."""
        std = 0.02
        for module in [
            self.embeddings,
            self.end_embedding,
            *self.layers,
            self.visual_norm_text,
            self.visual_norm_object,
        ]:
            for m in module.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, std)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)
                if isinstance(m, nn.LayerNorm):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
        for norm in (self.visual_norm_text, self.visual_norm_object):
            nn.init.constant_(norm.weight, VISUAL_SCALE_INIT)
        nn.init.normal_(self.object_embedding.weight, 0.0, std)
        if self.head is not None:
            for m in self.head.modules():
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.zeros_(m.bias)

    # --- the official forward ------------------------------------------------------------------------

    def text(self, question: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """`prepare_text_from_qa` with the one [MASK] answer: ids, segments and mask of [CLS] question [SEP] [MASK]
        [SEP] (left-aligned, padded to the longest), and the [MASK]'s index."""
        question_mask = question > 0
        length = question_mask.sum(1, keepdim=True)
        width = longest(length, question.shape[1]) + 4
        if width + 2 > self.sizes["max_positions"]:
            raise ReproError(f"questions of {width - 4} tokens: VL-BERT's {self.sizes['max_positions']} positions")
        if self.word_pos is not None and width > self.word_pos.shape[0]:
            raise ReproError(f"questions of {width - 4} tokens, PA's word positions take {self.sizes['max_tokens']}")
        j = torch.arange(width, device=question.device).expand(question.shape[0], -1)
        q_end, a_end = 1 + length, 3 + length
        words = question.gather(1, firsts(question_mask)).gather(1, (j - 1).clamp(0, question.shape[1] - 1))
        ids = torch.where((j > 0) & (j < q_end), words, 0)
        ids = ids.masked_fill(j == 0, self.cls_id).masked_fill((j == q_end) | (j == a_end), self.sep_id)
        ids = ids.masked_fill(j == q_end + 1, self.mask_id)
        segments = ((j > q_end) & (j <= a_end)).long()
        return ids, segments, j <= a_end, (a_end - 1).squeeze(1)

    def encode(self, text_ids, segments, text_visual, text_mask, object_visual, object_words, object_mask, pa=None):
        """`VisualLinguisticBert.forward` (its embedding, then the layers): the last layer's output [B, L, d] over
        the concatenated sequence, and its `Packed` layout. `pa`: (boxes [B, N, 4], image_size [B, 2]) for PA."""
        text_vl = self.embeddings.word_embeddings(text_ids) + self.visual_norm_text(text_visual)
        object_vl = object_words + self.visual_norm_object(object_visual)
        packed = Packed(text_mask, object_mask)
        d = text_vl.shape[-1]

        def at(values, source):  # [B, n, ...] read at each position of the sequence
            index = source.reshape(*source.shape, *([1] * (values.dim() - 2)))
            return values.gather(1, index.expand(*source.shape, *values.shape[2:]))

        vl = torch.where(packed.text[..., None], at(text_vl, packed.text_source), 0.0)
        if object_vl.shape[1]:
            vl = torch.where(packed.objects[..., None], at(object_vl, packed.object_source), vl)
        vl = torch.where(packed.end[..., None], self.end_embedding.weight[0].to(vl.dtype).expand(d), vl)
        types = torch.where(packed.text, at(segments, packed.text_source), 0)
        types = types.masked_fill(packed.objects | packed.end, 2)
        positions = torch.where(packed.objects, packed.text_end, packed.grid)
        positions = torch.where(packed.end, packed.text_end + 1, positions)
        x = self.embeddings(inputs_embeds=vl, token_type_ids=types, position_ids=positions)
        keys = torch.zeros(packed.valid.shape, dtype=x.dtype, device=x.device).masked_fill(~packed.valid, MASKED_KEY)
        positional = self._positional(packed, text_ids.shape[1], *pa) if self.positional else None
        for i, layer in enumerate(self.layers):
            mask = keys[:, None, None, :] if positional is None else positional(i) + keys[:, None, None, :]
            x = layer(x, attention_mask=mask.to(x.dtype))
        return x, packed

    def vqa_logits(self, boxes: torch.Tensor, im_info: torch.Tensor, question: torch.Tensor) -> torch.Tensor:
        """`ResNetVLBERT.inference_forward(None, boxes, im_info, question)`'s label logits; boxes in VL-BERT's
        layout (`official_inputs`), im_info [B, 4] = (W, H, scale, scale), question ids [B, T] (0 = padding)."""
        box_mask = boxes[:, :, 0] > PADDED_BOX + 0.5
        n = longest(box_mask.sum(1), boxes.shape[1])
        box_mask, boxes = box_mask[:, :n], boxes[:, :n]
        image_size = im_info[:, :2]
        objects = self.regions(boxes[..., :4], boxes[..., 4:], box_mask, image_size)
        ids, segments, text_mask, answer_at = self.text(question)
        text_visual = objects[:, :1].expand(-1, ids.shape[1], -1)  # every text element: the whole image's box
        object_words = self.object_embedding.weight[0].expand_as(objects)
        hidden, _ = self.encode(
            ids, segments, text_visual, text_mask, objects, object_words, box_mask, pa=(boxes[..., :4], image_size)
        )
        return self.head(hidden[torch.arange(hidden.shape[0], device=hidden.device), answer_at])

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        boxes, im_info = official_inputs(batch)
        question = batch["wordpiece"] if self.sizes["vocab"] else batch["tokens"]
        return self.vqa_logits(boxes, im_info, question)

    # --- PA --------------------------------------------------------------------------------------------

    def _positional(self, packed: Packed, text_width: int, boxes: torch.Tensor, image_size: torch.Tensor):
        """layer -> the fused positional bias [B, h, L, L] of that layer, by blocks of the concatenated sequence."""
        b, h, length, t = packed.grid.shape[0], self.sizes["heads"], packed.length, text_width
        n = boxes.shape[1]
        words = self.word_pos[:t][None] if self.word_pos is not None else None
        boxes_pos = self.box_proj(box_feature(boxes, image_size)) if self.box_proj is not None else None
        geometry = self.poa(boxes) if self.poa is not None else None
        rows = packed.object_source[:, None, :, None]  # gathers box i's row / column at its place in the sequence
        cols = packed.object_source[:, None, None, :]
        text, objects = packed.text[:, :t], packed.objects

        def place(block, row_mask, col_mask):
            return block.masked_fill(~(row_mask[:, None, :, None] & col_mask[:, None, None, :]), 0.0)

        def bias(layer: int) -> torch.Tensor:
            out = boxes.new_zeros((b, h, length, length))
            if self.pwa is not None:  # word-word: PWA (Eq. 9, 11)
                ww = fuse(self.pwa[layer](words, words), self.d_head, self.fusion)[0].expand(b, -1, -1, -1)
                out[:, :, :t, :t] += place(ww, text, text)
            if geometry is not None:  # region-region: POA (Eq. 10, 12-14)
                rr = fuse(geometry[layer], self.d_head, self.fusion)[0]
                rr = rr.gather(2, rows.expand(b, h, length, n)).gather(3, cols.expand(b, h, length, length))
                out += place(rr, objects, objects)
            if self.pma is not None:  # word-region and region-word: PMA (Eq. 13)
                wr = fuse(self.pma[layer](words, boxes_pos), self.d_head, self.fusion)[0]
                out[:, :, :t, :] += place(wr.gather(3, cols.expand(b, h, t, length)), text, objects)
                rw = fuse(self.pma[layer](boxes_pos, words), self.d_head, self.fusion)[0]
                out[:, :, :, :t] += place(rw.gather(2, rows.expand(b, h, length, t)), objects, text)
            return out

        return bias


def answer_classifier(config, classifier: str, sizes: dict[str, Any], num_answers: int) -> nn.Sequential:
    """`final_mlp`: "mlm" = BERT's prediction-head transform (dense, GELU, LayerNorm), dropout, linear; "2fc" =
    dropout, linear to `head_hidden`, ReLU, dropout, linear."""
    from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

    d, p = sizes["hidden"], sizes["dropout"]
    if classifier == "mlm":
        return nn.Sequential(BertPredictionHeadTransform(config), nn.Dropout(p), nn.Linear(d, num_answers))
    if classifier == "2fc":
        hidden = sizes["head_hidden"]
        return nn.Sequential(
            nn.Dropout(p), nn.Linear(d, hidden), nn.ReLU(inplace=True), nn.Dropout(p), nn.Linear(hidden, num_answers)
        )
    raise ReproError(f"VL-BERT classifier {classifier!r}: one of {', '.join(CLASSIFIERS)}")


def official_inputs(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """This project's batch (features [B, N, F], boxes [B, N, 4] in pixels, box_count [B], image_size [B, 2]) in
    VL-BERT's layout, as its VQA dataset and collate make it: boxes [B, 1 + N, 4 + F] with the whole image first
    ([0, 0, W - 1, H - 1], its feature the mean of the image's boxes' features), every box clamped to the image,
    padded rows -2; im_info [B, 4] = (W, H, 1, 1)."""
    features, boxes, size = batch["features"].float(), batch["boxes"].float(), batch["image_size"].float()
    b, n = features.shape[:2]
    if "box_count" in batch:
        count = torch.as_tensor(batch["box_count"], device=features.device).reshape(b)
        valid = torch.arange(n, device=features.device)[None] < count[:, None]
    else:
        valid = features.abs().sum(-1) > 0
    w, h = size[:, :1], size[:, 1:]
    x = torch.minimum(boxes[..., 0::2].clamp(min=0), w[:, None] - 1)
    y = torch.minimum(boxes[..., 1::2].clamp(min=0), h[:, None] - 1)
    clamped = torch.stack([x[..., 0], y[..., 0], x[..., 1], y[..., 1]], dim=-1)
    keep = valid[..., None].float()
    mean = (features * keep).sum(1) / keep.sum(1).clamp(min=1.0)
    zero = torch.zeros_like(w)
    whole = torch.cat([zero, zero, w - 1, h - 1, mean], dim=-1)
    rows = torch.cat([clamped, features], dim=-1).masked_fill(~valid[..., None], PADDED_BOX)
    im_info = torch.cat([size, torch.ones_like(size)], dim=-1)
    return torch.cat([whole[:, None], rows], dim=1), im_info


def load_bert_weights(model: VLBert, folder) -> bool:
    """BERT's weights into VL-BERT as `load_language_pretrained_model` puts them: the word, position and segment
    embeddings (BERT's 2 segments into the first 2 of 3), the embedding LayerNorm, the layers; with the "mlm"
    classifier also `final_mlp.0` from BERT's `cls.predictions.transform` (`ResNetVLBERT.init_weight`). False when
    `folder` has no weights."""
    from transformers import BertForPreTraining

    from repro.nn.pretrained import bert_from_folder

    bert = bert_from_folder(BertForPreTraining, folder)
    if bert is None:
        return False
    config = bert.config
    if (config.hidden_size, config.num_hidden_layers) != (model.sizes["hidden"], model.sizes["layers"]):
        raise ReproError(
            f"{folder}: BERT of {config.num_hidden_layers} layers of width {config.hidden_size}, the model has "
            f"{model.sizes['layers']} of {model.sizes['hidden']}"
        )
    ours, theirs = model.embeddings, bert.bert.embeddings
    with torch.no_grad():
        ours.word_embeddings.weight.copy_(theirs.word_embeddings.weight)
        ours.position_embeddings.weight.copy_(theirs.position_embeddings.weight)
        segments = theirs.token_type_embeddings.weight
        ours.token_type_embeddings.weight[: segments.shape[0]] = segments
    ours.LayerNorm.load_state_dict(theirs.LayerNorm.state_dict())
    for mine, layer in zip(model.layers, bert.bert.encoder.layer, strict=True):
        mine.load_state_dict(layer.state_dict())
    if model.classifier == "mlm":
        model.head[0].load_state_dict(bert.cls.predictions.transform.state_dict())
    return True


def init_answer_classifier(model: VLBert, answers: list[str], vocab_file) -> None:
    """`CLASSIFIER_PRETRAINED` (vqa/function/train.py): the answer layer's weight row of each answer is the mean of
    its WordPiece tokens' word embeddings (the released configs set it, with the "mlm" classifier)."""
    from transformers import BertTokenizerFast

    tokenizer = BertTokenizerFast(vocab=str(vocab_file), do_lower_case=True)
    table = model.embeddings.word_embeddings.weight.detach()
    rows = []
    for answer in answers:
        ids = tokenizer(answer, add_special_tokens=False)["input_ids"] or [tokenizer.unk_token_id]
        rows.append(table[ids].mean(0))
    with torch.no_grad():
        model.head[-1].weight.copy_(torch.stack(rows))
