"""VL-BERT's pre-training model (jackroos/VL-BERT `pretrain/modules/resnet_vlbert_for_pretraining_multitask.py`
`ResNetVLBERTForPretrainingMultitask` with `VisualLinguisticBertForPretraining`), at the released pre-training
config's settings (`cfgs/pretrain/base_prec_4x16G_fp32.yaml`: precomputed features, masked language modelling and
masked RoI classification, no caption-image relationship head, no pooler): the network of `vl-bert-base-prec.model`,
which Table IV's VL-BERT_BASE row fine-tunes from (`init: vl-bert-base`).

Its forward (eval mode) takes the caption batch and the text-only batches as the official forward does and returns
its outputs and losses: the masked regions' RoI features replaced by one learnt feature and their object word by
one learnt word, the text-only rows' visual embedding one learnt vector, MLM logits of every text position (the
caption rows and the text-only rows; BERT's MLM head, its decoder tied to the word embeddings), the masked RoI
classification logits of every region, cross-entropy and soft cross-entropy losses. This project does not run
VL-BERT's pre-training; the model is what the released file's weights mean.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from repro.errors import ReproError
from repro.families.mcan_pa.vlbert import PADDED_BOX, VLBert, longest

REGION_CLASSES = 1601  # visual_region_classes: Visual Genome's 1,600 object classes and background
PADDED_LOGIT = -10000.0  # the official forward pads its logits with -10000


class VLBertPretraining(VLBert):
    """VL-BERT with its pre-training heads instead of a VQA classifier (WordPiece vocabulary)."""

    def __init__(self, sizes: dict[str, Any], region_classes: int = REGION_CLASSES):
        from transformers.models.bert.modeling_bert import BertOnlyMLMHead

        if not sizes["vocab"]:
            raise ReproError("VL-BERT's pre-training model reads WordPiece ids: sizes.vocab must be set")
        super().__init__(0, 1, sizes, classifier=None)
        d = self.sizes["hidden"]
        self.masked_feature = nn.Embedding(1, self.sizes["feature_dim"])  # object_mask_visual_embedding
        self.masked_object_word = nn.Embedding(1, d)  # object_mask_word_embedding
        self.text_only_visual = nn.Embedding(1, d)  # aux_text_visual_embedding
        self.mlm = BertOnlyMLMHead(self.config)
        self.mlm.predictions.decoder.weight = self.embeddings.word_embeddings.weight  # tied, as in VL-BERT
        self.mlm.predictions.decoder.bias = self.mlm.predictions.bias
        # VisualLinguisticBertMVRCHead: dense, the hidden activation (GELU), the region classes
        self.mvrc = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, region_classes))
        std = 0.02
        for m in [*self.mlm.modules(), *self.mvrc.modules()]:
            if isinstance(m, nn.Linear) and m is not self.mlm.predictions.decoder:
                nn.init.normal_(m.weight, 0.0, std)
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.zeros_(self.mlm.predictions.bias)
        nn.init.zeros_(self.masked_feature.weight)
        nn.init.normal_(self.masked_object_word.weight, 0.0, std)
        nn.init.normal_(self.text_only_visual.weight, 0.0, std)

    def forward(self, boxes, im_info, text, mlm_labels, mvrc_ops, mvrc_labels, *aux) -> dict[str, torch.Tensor]:
        """The official forward: boxes [B, N, 4 + F] (VL-BERT's layout, padded rows -2), im_info [B, 4], text [B, T]
        ([CLS] words [SEP], 0 padding, [MASK] where masked), mlm_labels [B, T] (-1 where not masked), mvrc_ops [B, N]
        (1 = masked region), mvrc_labels [B, N, classes], then text-only batches as (text, mlm_labels) pairs."""
        aux_text, aux_labels = _stack_text_only(aux[0::2], aux[1::2])
        origin = boxes.shape[1]
        box_mask = boxes[:, :, 0] > PADDED_BOX + 0.5
        n = longest(box_mask.sum(1), boxes.shape[1])
        box_mask, boxes = box_mask[:, :n], boxes[:, :n]
        mvrc_ops, mvrc_labels = mvrc_ops[:, :n], mvrc_labels[:, :n]
        masked = mvrc_ops == 1
        features = torch.where(masked[..., None], self.masked_feature.weight[0], boxes[..., 4:])
        objects = self.regions(boxes[..., :4], features, box_mask, im_info[:, :2])
        object_words = self.object_embedding.weight[0].expand_as(objects)
        object_words = torch.where(masked[..., None], self.masked_object_word.weight[0], object_words)

        # the caption rows, then the text-only rows (no objects; their own visual embedding)
        b, rows = text.shape[0], text.shape[0] + aux_text.shape[0]
        width = max(text.shape[1], aux_text.shape[1])
        ids = text.new_zeros((rows, width))
        ids[:b, : text.shape[1]] = text
        ids[b:, : aux_text.shape[1]] = aux_text
        text_visual = objects.new_zeros((rows, width, objects.shape[-1]))
        text_visual[:b, : text.shape[1]] = objects[:, :1]
        text_visual[b:] = self.text_only_visual.weight[0]
        all_objects = objects.new_zeros((rows, *objects.shape[1:]))
        all_objects[:b] = objects
        all_words = object_words.new_zeros((rows, *object_words.shape[1:]))
        all_words[:b] = object_words
        all_mask = box_mask.new_zeros((rows, box_mask.shape[1]))
        all_mask[:b] = box_mask
        hidden, packed = self.encode(ids, torch.zeros_like(ids), text_visual, ids > 0, all_objects, all_words, all_mask)

        # output_text_and_object_separately: the first `width` elements, and the objects at their boxes' places
        mlm_logits = self.mlm(hidden[:, :width])
        object_out = packed.object_outputs(hidden, all_mask)
        mvrc_logits = self.mvrc(object_out)[:b]

        labels = mlm_labels.new_full((rows, width), -1)
        labels[:b, : mlm_labels.shape[1]] = mlm_labels
        labels[b:, : aux_labels.shape[1]] = aux_labels
        padded = mlm_logits.new_full((rows, width, mlm_logits.shape[-1]), PADDED_LOGIT)
        padded[:, : mlm_logits.shape[1]] = mlm_logits
        vocab = padded.shape[-1]
        out = {
            "mlm_logits_wvc": padded[:b],
            "mlm_logits_aux": padded[b:],
            "mlm_loss_wvc": F.cross_entropy(padded[:b].reshape(-1, vocab), labels[:b].reshape(-1), ignore_index=-1),
            "mlm_loss_aux": F.cross_entropy(padded[b:].reshape(-1, vocab), labels[b:].reshape(-1), ignore_index=-1),
            "mvrc_loss": soft_cross_entropy(mvrc_logits.reshape(-1, mvrc_logits.shape[-1]), mvrc_labels.flatten(0, 1)),
        }
        out["mvrc_logits"] = mvrc_logits.new_full((b, origin, mvrc_logits.shape[-1]), PADDED_LOGIT)
        out["mvrc_logits"][:, :n] = mvrc_logits
        out["loss"] = out["mlm_loss_wvc"] + out["mlm_loss_aux"] + out["mvrc_loss"]
        return out


def _stack_text_only(texts, labels) -> tuple[torch.Tensor, torch.Tensor]:
    """The text-only batches one under the other, padded to the longest (text 0, labels -1)."""
    rows, width = sum(t.shape[0] for t in texts), max(t.shape[1] for t in texts)
    text = texts[0].new_zeros((rows, width))
    label = labels[0].new_full((rows, width), -1)
    at = 0
    for t, lab in zip(texts, labels, strict=True):
        text[at : at + t.shape[0], : t.shape[1]] = t
        label[at : at + t.shape[0], : t.shape[1]] = lab
        at += t.shape[0]
    return text, label


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`common/utils/misc.py` `soft_cross_entropy` (mean): over the rows whose target sums to 1 (within 0.1),
    -sum(target * log_softmax(logits)); 0 when there is none."""
    valid = (target.sum(1) - 1).abs() < 0.1
    if not bool(valid.any()):
        return logits.new_zeros(())
    return (-F.log_softmax(logits[valid], 1) * target[valid]).sum(1).mean(0)
