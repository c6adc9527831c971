"""ALBEF's downstream models (Sec. 4.2 of the ACE-RPE paper, salesforce/ALBEF `models/model_*.py`),
each with the row's cross-modal position embedding in its fusion layers:

- `vqa`: the question encoded by the text encoder and the fusion layers, then a 6-layer answer
  decoder (`transformers.BertLMHeadModel`: its own embeddings, causal self-attention, every layer
  cross-attending to the question states, LM head with the decoder tied to its word embeddings),
  initialised from the pre-trained text embeddings, fusion layers and MLM head. Training: LM loss
  on each annotator answer, weighted by its share of the annotators; test: the k = 128 answers of
  the candidate list whose first token is likeliest, re-ranked by their whole-sequence likelihood.
- `snli-ve`: MLP 768 -> 768 -> ReLU -> 3 on the fusion [CLS] (contradiction, neutral, entailment).
- `nlvr2`: each fusion layer duplicated into two consecutive layers, the first cross-attending to
  the left image and the second to the right one, the pair sharing its cross-attention key and
  value projections; MLP 768 -> 768 -> ReLU -> 2 on the [CLS]. Its text-assignment pre-training
  step (`assign=True`) adds `ta_head` (768 -> 3: the text is about image 0, image 1 or neither)
  and keeps `vision_proj` to draw similar images as distractors.

Momentum distillation as ALBEF's `distill: True` for these tasks: momentum copies (`*_m`, EMA 0.995,
no gradients) of the encoders, fusion layers and head give soft targets, mixed in with weight alpha =
0.4 (`sizes["alpha"]`; 0 turns it off). ALBEF ramps alpha up over the first epoch for VQA and NLVR2
(`warm_up: True`); here it is constant, as ALBEF's SNLI-VE has it.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from repro.families.ace_rpe.model import ALBEF, Fusion, bert_config, fusion_layer, padding_mask, vit_config
from repro.families.ace_rpe.position import Injection

TASKS = ("vqa", "snli-ve", "nlvr2")
VE_LABELS = {"contradiction": 0, "neutral": 1, "entailment": 2}  # ALBEF's ve_dataset


def mlp(d: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, out))


class PairFusion(Fusion):
    """NLVR2's fusion encoder: 2 L layers, layer 2k + i cross-attends image i, both copies of pre-trained
    layer k; the pair shares the cross-attention key and value (ALBEF `share_cross_attention`) and
    layer k's position embedding (one W of Eq. 8 per pre-trained layer)."""

    def __init__(self, sizes: dict[str, Any], config) -> None:
        super().__init__(sizes, config)
        from transformers.models.bert.modeling_bert import BertLayer

        cfg = bert_config(sizes, 2 * sizes["fusion_layers"], cross=True)
        self.layer = nn.ModuleList(BertLayer(cfg, layer_idx=i) for i in range(2 * sizes["fusion_layers"]))
        for k in range(sizes["fusion_layers"]):
            first, second = self.layer[2 * k].crossattention.self, self.layer[2 * k + 1].crossattention.self
            first.key, first.value = second.key, second.value

    def forward(self, text: torch.Tensor, text_mask: torch.Tensor, images: list[torch.Tensor]) -> torch.Tensor:
        injections = [Injection(), Injection()]
        if self.position is not None:
            injections = [self.position(text, text_mask, image) for image in images]
            if injections[0].text_add is not None:  # APE/RPE: the text part does not depend on the image
                text = text + injections[0].text_add
                images = [image + inj.image_add for image, inj in zip(images, injections)]
        self_mask = (1.0 - text_mask[:, None, None, :].to(text.dtype)) * torch.finfo(text.dtype).min
        for j, layer in enumerate(self.layer):
            text = fusion_layer(layer, text, self_mask, images[j % 2], self.position, injections[j % 2], j // 2)
        return text


class TaskALBEF(nn.Module):
    """ALBEF's image and text encoders, fusion layers and one task head (`task` in TASKS)."""

    def __init__(self, config, sizes: dict[str, Any], task: str, assign: bool = False) -> None:
        super().__init__()
        from transformers import BertModel, ViTModel

        self.config, self.sizes, self.task, self.assign = config, dict(sizes), task, assign
        # the text-assignment step trains around the NLVR2 head (cls_head), which its loss leaves out
        self.find_unused_parameters = assign
        d = sizes["hidden_size"]
        self.visual_encoder = ViTModel(vit_config(sizes), add_pooling_layer=False)
        self.text_encoder = BertModel(bert_config(sizes, sizes["text_layers"], cross=False), add_pooling_layer=False)
        self.fusion = PairFusion(sizes, config) if task == "nlvr2" else Fusion(sizes, config)
        if task == "vqa":
            from transformers import BertLMHeadModel

            decoder = bert_config(sizes, sizes["fusion_layers"], cross=True)  # ALBEF: fusion_layer = 0, 6 layers
            self.text_decoder = BertLMHeadModel(decoder)
        elif task == "snli-ve":
            self.cls_head = mlp(d, 3)
        elif task == "nlvr2":
            self.cls_head = mlp(d, 2)
            if assign:
                self.ta_head = nn.Linear(d, 3)
                self.vision_proj = nn.Linear(d, sizes["embed_dim"])
                self.vision_proj.requires_grad_(False)  # only draws distractor images
        self.alpha = 0.0 if assign else float(sizes.get("alpha", 0.4))  # the text-assignment step has no distillation
        self.momentum_names = []
        if self.alpha > 0:
            head = "text_decoder" if task == "vqa" else "cls_head"
            self.momentum_names = ["visual_encoder", "text_encoder", "fusion", head]
            for name in self.momentum_names:
                setattr(self, f"{name}_m", copy.deepcopy(getattr(self, name)).requires_grad_(False))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training loss of a batch for the model's task (what DistributedDataParallel wraps under torchrun,
        so its gradients are synchronised): VQA's answer loss, SNLI-VE's or NLVR2's classification loss, or
        NLVR2's text-assignment loss."""
        if self.assign:
            return self.assign_loss(batch)
        if self.task == "vqa":
            return self.vqa_loss(batch)
        return self.classify_loss(batch)

    # --- momentum copies: ALBEF's own bookkeeping (model.ALBEF) over this model's pairs ---
    def pairs(self):
        return [(getattr(self, n), getattr(self, f"{n}_m")) for n in self.momentum_names]

    parameter_pairs = ALBEF.parameter_pairs
    copy_params = ALBEF.copy_params
    momentum_update = ALBEF.momentum_update

    # --- encoders ---
    def part(self, name: str, momentum: bool = False) -> nn.Module:
        return getattr(self, f"{name}_m" if momentum else name)

    def image_embeds(self, image: torch.Tensor, momentum: bool = False) -> torch.Tensor:
        return self.part("visual_encoder", momentum)(pixel_values=image).last_hidden_state

    def encode(self, image, ids, mask, image_right=None, momentum: bool = False) -> torch.Tensor:
        """Fusion states of a text with one image (VQA, SNLI-VE) or two (NLVR2: left and right)."""
        text = self.part("text_encoder", momentum)(input_ids=ids, attention_mask=padding_mask(mask)).last_hidden_state
        fusion = self.part("fusion", momentum)
        if self.task == "nlvr2":
            return fusion(text, mask, [self.image_embeds(image, momentum), self.image_embeds(image_right, momentum)])
        return fusion(text, mask, self.image_embeds(image, momentum))

    # --- classification heads (SNLI-VE, NLVR2: the batch's "image" is the left one, "image_right" the other) ---
    def logits(self, batch: dict[str, torch.Tensor], momentum: bool = False) -> torch.Tensor:
        ids, mask = batch["input_ids"], batch["attention_mask"]
        states = self.encode(batch["image"], ids, mask, batch.get("image_right"), momentum)
        return self.part("cls_head", momentum)(states[:, 0])

    def classify_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Cross-entropy; with distillation (1 - alpha) CE + alpha CE against the momentum model's softmax."""
        logits = self.logits(batch)
        loss = F.cross_entropy(logits, batch["label"])
        if self.alpha > 0:
            with torch.no_grad():
                self.momentum_update()
                soft = F.softmax(self.logits(batch, momentum=True), dim=1)
            distill = -(F.log_softmax(logits, dim=1) * soft).sum(1).mean()
            loss = (1 - self.alpha) * loss + self.alpha * distill
        return loss

    # --- NLVR2 text assignment (ALBEF model_pretrain_nlvr.py) ---
    def assign_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The caption's own image is put left (label 0) or right (1) of a similar image, or two
        similar images stand without it (2), with probability 1/3 each; 3-way cross-entropy."""
        image = self.image_embeds(batch["image"])
        b = image.shape[0]
        with torch.no_grad():
            feat = F.normalize(self.vision_proj(image[:, 0]), dim=-1)
            weights = F.softmax(feat @ feat.T / 0.07, dim=1)
            weights = weights.masked_fill(torch.eye(b, dtype=torch.bool, device=image.device), 0)
            weights = weights + 1e-9 * (weights.sum(1, keepdim=True) == 0)  # a batch of one: nothing else
        left, right, labels = [], [], []
        for i in range(b):
            if b > 2 and torch.rand(1).item() <= 1 / 3:
                pick = torch.multinomial(weights[i], 2)
                left.append(image[pick[0]]), right.append(image[pick[1]]), labels.append(2)
                continue
            other = image[torch.multinomial(weights[i], 1).item()] if b > 1 else image[i]
            if torch.rand(1).item() > 0.5:
                left.append(image[i]), right.append(other), labels.append(0)
            else:
                left.append(other), right.append(image[i]), labels.append(1)
        ids, mask = batch["input_ids"], batch["attention_mask"]
        text = self.text_encoder(input_ids=ids, attention_mask=padding_mask(mask)).last_hidden_state
        out = self.fusion(text, mask, [torch.stack(left), torch.stack(right)])
        return F.cross_entropy(self.ta_head(out[:, 0]), torch.tensor(labels, device=image.device))

    # --- VQA (ALBEF model_vqa.py) ---
    def answer_logits(self, states, states_mask, answer_ids, answer_mask, momentum: bool = False) -> torch.Tensor:
        """The decoder's next-token logits for each answer sequence ([CLS] answer [SEP] ...), shifted."""
        return self.part("text_decoder", momentum)(
            input_ids=answer_ids,
            attention_mask=answer_mask,
            encoder_hidden_states=states,
            encoder_attention_mask=states_mask,
        ).logits[:, :-1]

    def answer_nll(self, states, states_mask, answer_ids, answer_mask, soft=None) -> torch.Tensor:
        """Summed next-token negative log-likelihood of each answer sequence; with `soft` (the momentum
        decoder's distributions) ALBEF's mix (1 - alpha) NLL + alpha cross-entropy against them."""
        logits = self.answer_logits(states, states_mask, answer_ids, answer_mask)
        targets = answer_ids[:, 1:].masked_fill(answer_mask[:, 1:] == 0, -100)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        nll = nll.view(targets.shape).sum(1)
        if soft is None:
            return nll
        distill = (-(F.log_softmax(logits, dim=-1) * soft).sum(-1) * (targets != -100)).sum(1)
        return (1 - self.alpha) * nll + self.alpha * distill

    def vqa_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Each answer's LM loss times its weight (share of annotators), summed, over the batch size."""
        image, ids, mask = batch["image"], batch["input_ids"], batch["attention_mask"]
        answers, answer_mask = batch["answer_ids"], batch["answer_mask"]
        owner = batch["answer_owner"]  # which question each answer belongs to
        soft = None
        if self.alpha > 0:
            with torch.no_grad():
                self.momentum_update()
                states_m = self.encode(image, ids, mask, momentum=True)
                soft = F.softmax(self.answer_logits(states_m[owner], mask[owner], answers, answer_mask, True), dim=-1)
        states = self.encode(image, ids, mask)
        nll = self.answer_nll(states[owner], mask[owner], answers, answer_mask, soft)
        return (batch["answer_weight"] * nll).sum() / states.shape[0]

    @torch.no_grad()
    def rank_answers(self, batch, answer_ids, answer_mask, k: int = 128) -> torch.Tensor:
        """Index into the answer list of each question's answer: the top k by first-token probability,
        re-ranked by log p(first token) + log p(whole answer) as ALBEF's `rank_answer`."""
        states = self.encode(batch["image"], batch["input_ids"], batch["attention_mask"])
        mask = batch["attention_mask"]
        n, k = states.shape[0], min(k, answer_ids.shape[0])
        start = answer_ids[:1, :1].expand(n, 1)  # [CLS]
        first = self.text_decoder(input_ids=start, encoder_hidden_states=states, encoder_attention_mask=mask).logits[
            :, 0
        ]
        prob_first = F.softmax(first, dim=1).index_select(1, answer_ids[:, 1])
        top_probs, top_ids = prob_first.topk(k, dim=1)
        nll = self.answer_nll(
            states.repeat_interleave(k, 0),
            mask.repeat_interleave(k, 0),
            answer_ids[top_ids.reshape(-1)],
            answer_mask[top_ids.reshape(-1)],
        ).view(n, k)
        score = top_probs.log() - nll
        return top_ids.gather(1, score.argmax(1, keepdim=True)).squeeze(1)


def decoder_from_pretrained(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ALBEF's VQA initialisation of the answer decoder: its embeddings from the text encoder's, layer i
    from fusion layer i, its LM head from the MLM head (keys of the pre-training model)."""
    out = {}
    for key, value in weights.items():
        if key.startswith("text_encoder.embeddings."):
            out["text_decoder.bert." + key[len("text_encoder.") :]] = value
        elif key.startswith("fusion.layer."):
            out["text_decoder.bert.encoder." + key[len("fusion.") :]] = value
        elif key.startswith("mlm_head."):
            out["text_decoder.cls." + key[len("mlm_head.") :]] = value
    return out


def pair_from_pretrained(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ALBEF's NLVR2 initialisation: pre-trained fusion layer k copied into layers 2k and 2k + 1."""
    out = {}
    for key, value in weights.items():
        if key.startswith("fusion.layer."):
            k, rest = key[len("fusion.layer.") :].split(".", 1)
            for j in (2 * int(k), 2 * int(k) + 1):
                out[f"fusion.layer.{j}.{rest}"] = value
        else:
            out[key] = value
    return out


def resolution_dependent(key: str) -> bool:
    """A table whose size follows the image resolution: the ViT position embeddings, APE's and RPE's patch tables."""
    vit = key.startswith("visual_encoder") and key.endswith("embeddings.position_embeddings")
    return vit or key.endswith(("image_absolute.weight", "image_relative.weight"))


def load_resized(model: nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """The keys `model` shares with `weights` loaded: equal shapes as they are, the resolution-dependent tables
    resized bicubically (pre-training at 256 px, fine-tuning at 384: `keymap.transfer`), the rest left."""
    from repro.families.ace_rpe.keymap import transfer

    own = model.state_dict()
    kept = {}
    for key, value in weights.items():
        if key in own and (
            own[key].shape == value.shape or (resolution_dependent(key) and own[key].dim() == value.dim())
        ):
            kept[key] = value
    transfer(kept, model)


def load_pretrained(model: TaskALBEF, weights: dict[str, torch.Tensor]) -> None:
    """Start a task model from a pre-trained ALBEF's state dict (the keys they share, as ALBEF's loaders; the
    resolution-dependent tables resized to the model's images)."""
    weights = dict(weights)
    if model.task == "vqa":
        weights.update(decoder_from_pretrained(weights))
    if model.task == "nlvr2":
        weights = pair_from_pretrained(weights)
    load_resized(model, weights)
    model.copy_params()  # the momentum copies start as the loaded weights
