"""ALBEF (Li et al. 2021) with a cross-modal position embedding: the ACE-RPE paper's backbone (Sec. 3).

Parts, each built from its configuration by a maintained library, never loaded from a hub:
- `visual_encoder`: ViT-B/16 (`transformers.ViTModel`, no pooler; qkv bias, LayerNorm eps 1e-6);
- `text_encoder`: BERT-base layers 0-5 (`transformers.BertModel`, no pooler);
- `fusion`: BERT layers 6-11, each `transformers.BertLayer` with its cross-attention block; the layers'
  submodules are called here so the cross-attention can take the position embedding (Eq. 9-12);
- `vision_proj`, `text_proj` (768 -> 256), `temp`, `itm_head` (768 -> 2), as ALBEF;
- momentum copies (`*_m`, EMA 0.995, no gradients) and the feature queues (`image_queue`,
  `text_queue`, `idx_queue`, `queue_ptr`) of ALBEF's ITC with momentum distillation;
- pre-training only: `mlm_head` (BertOnlyMLMHead, decoder tied to the word embeddings), `mim_head`
  (one linear layer to raw pixels, Sec. 3.3) and the ViT's mask token.

Objectives: ITC with momentum distillation (ALBEF Eq. 1-3 and Sec. 3.4), ITM with one in-batch hard
negative per image and per text, MLM (15 %, 80/10/10, momentum soft targets), MIM (L1 on the masked
patches' pixels) and the anchor loss L_ace (ACE-RPE Eq. 1-2).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from repro.families.ace_rpe.position import Injection, build_position

# ALBEF's sizes (configs/config_bert.json, Retrieval_*.yaml, Pretrain.yaml).
PAPER_SIZES: dict[str, Any] = {
    "hidden_size": 768,
    "heads": 12,
    "intermediate_size": 3072,
    "image_layers": 12,
    "text_layers": 6,
    "fusion_layers": 6,
    "patch_size": 16,
    "image_size": 384,  # fine-tuning resolution; pre-training uses 256
    "vocab_size": 30522,
    "max_positions": 512,
    "embed_dim": 256,
    "queue_size": 65536,
    "momentum": 0.995,
    "alpha": 0.4,
    "temp": 0.07,
    "mlm_probability": 0.15,
    "mim_probability": 0.6,  # SimMIM's mask ratio (Xie et al. 2021); the paper gives none
    "dropout": 0.1,
    "init_std": 0.02,  # BERT's and ViT's initializer_range (the released weights are loaded over it)
    # bert-base-uncased's special tokens
    "pad_token_id": 0,
    "cls_token_id": 101,
    "sep_token_id": 102,
    "mask_token_id": 103,
}
IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)  # ALBEF's normalisation
IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)


def bert_config(sizes: dict[str, Any], layers: int, cross: bool):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=sizes["vocab_size"],
        hidden_size=sizes["hidden_size"],
        num_hidden_layers=layers,
        num_attention_heads=sizes["heads"],
        intermediate_size=sizes["intermediate_size"],
        max_position_embeddings=sizes["max_positions"],
        hidden_dropout_prob=sizes["dropout"],
        attention_probs_dropout_prob=sizes["dropout"],
        layer_norm_eps=1e-12,
        initializer_range=sizes["init_std"],
        pad_token_id=0,
        is_decoder=cross,  # transformers adds cross-attention to decoder layers only; no causal mask is used here
        add_cross_attention=cross,
        attn_implementation="eager",
    )


def vit_config(sizes: dict[str, Any]):
    from transformers import ViTConfig

    return ViTConfig(
        hidden_size=sizes["hidden_size"],
        num_hidden_layers=sizes["image_layers"],
        num_attention_heads=sizes["heads"],
        intermediate_size=4 * sizes["hidden_size"],
        image_size=sizes["image_size"],
        patch_size=sizes["patch_size"],
        qkv_bias=True,
        layer_norm_eps=1e-6,
        initializer_range=sizes["init_std"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )


def fusion_layer(layer, hidden, self_mask, image, position, injection, index):
    """One fusion layer (BERT layer 6 + index): self-attention, cross-attention to the image with the
    position embedding (Eq. 9-12), feed-forward. The submodules are transformers' own."""
    hidden = layer.attention(hidden, self_mask)[0]
    ca = layer.crossattention.self
    b, n, _ = hidden.shape
    heads, size = ca.num_attention_heads, ca.attention_head_size
    query_in, key_in = hidden, image
    if position is not None:
        extra = position.query_add(injection, index)  # Eq. 10, text side
        query_in = query_in if extra is None else query_in + extra
        extra = position.key_add(injection, index)  # Eq. 10, image side
        key_in = key_in if extra is None else key_in + extra
    q = ca.query(query_in).view(b, n, heads, size).transpose(1, 2)
    k = ca.key(key_in).view(b, -1, heads, size).transpose(1, 2)
    v = ca.value(image).view(b, -1, heads, size).transpose(1, 2)
    logits = q @ k.transpose(-1, -2)  # Eq. 11
    if position is not None:
        bias = position.logit_bias(injection, index)  # Eq. 9
        if bias is not None:
            logits = logits + bias
    probs = F.softmax(logits * ca.scaling, dim=-1)
    if (
        getattr(ca, "save_attention", False) and probs.requires_grad
    ):  # Grad-CAM (grounding) reads the map and its gradient
        ca.attention_map = probs
        probs.retain_grad()
    out = ca.dropout(probs) @ v
    if position is not None:
        extra = position.value_add(injection, index, probs)  # Eq. 12
        if extra is not None:
            out = out + extra
    out = out.transpose(1, 2).reshape(b, n, heads * size)
    hidden = layer.crossattention.output(out, hidden)
    return layer.output(layer.intermediate(hidden), hidden)


class Fusion(nn.Module):
    """The cross-modal encoder: BERT layers 6-11 with cross-attention, and the position embedding."""

    def __init__(self, sizes: dict[str, Any], config) -> None:
        super().__init__()
        from transformers.models.bert.modeling_bert import BertLayer

        cfg = bert_config(sizes, sizes["fusion_layers"], cross=True)
        self.layer = nn.ModuleList(BertLayer(cfg, layer_idx=i) for i in range(sizes["fusion_layers"]))
        grid = sizes["image_size"] // sizes["patch_size"]
        self.position = build_position(
            config, sizes["hidden_size"], sizes["heads"], sizes["fusion_layers"], sizes["max_positions"], grid
        )

    def forward(self, text: torch.Tensor, text_mask: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        injection = Injection()
        if self.position is not None:
            injection = self.position(text, text_mask, image)
            if injection.text_add is not None:
                text, image = text + injection.text_add, image + injection.image_add
        self_mask = (1.0 - text_mask[:, None, None, :].to(text.dtype)) * torch.finfo(text.dtype).min
        for index, layer in enumerate(self.layer):
            text = fusion_layer(layer, text, self_mask, image, self.position, injection, index)
        return text


class ALBEF(nn.Module):
    """ALBEF for retrieval (`task="retrieval"`) or pre-training (`task="pretrain"`, adds MLM/MIM heads)."""

    def __init__(self, config, sizes: dict[str, Any], task: str = "retrieval") -> None:
        super().__init__()
        from transformers import BertModel, ViTModel
        from transformers.models.bert.modeling_bert import BertOnlyMLMHead

        self.config, self.sizes, self.task = config, dict(sizes), task
        d, e = sizes["hidden_size"], sizes["embed_dim"]
        self.visual_encoder = ViTModel(
            vit_config(sizes), add_pooling_layer=False, use_mask_token=task == "pretrain" and config.mim_loss
        )
        self.text_encoder = BertModel(bert_config(sizes, sizes["text_layers"], cross=False), add_pooling_layer=False)
        self.fusion = Fusion(sizes, config)
        self.vision_proj = nn.Linear(d, e)
        self.text_proj = nn.Linear(d, e)
        self.temp = nn.Parameter(torch.tensor(float(sizes["temp"])))
        self.itm_head = nn.Linear(d, 2)
        if task == "pretrain":
            self.mlm_head = BertOnlyMLMHead(bert_config(sizes, 1, cross=False))
            if config.mim_loss:
                self.mim_head = nn.Linear(d, sizes["patch_size"] ** 2 * 3)
        # momentum copies: no gradients, EMA of the online weights
        self.visual_encoder_m = copy.deepcopy(self.visual_encoder)
        self.vision_proj_m = copy.deepcopy(self.vision_proj)
        self.text_encoder_m = copy.deepcopy(self.text_encoder)
        self.fusion_m = copy.deepcopy(self.fusion)
        self.text_proj_m = copy.deepcopy(self.text_proj)
        if task == "pretrain":  # ALBEF's momentum BertForMaskedLM has its own head, tied to its own embeddings
            self.mlm_head_m = copy.deepcopy(self.mlm_head)
        self.tie_weights()
        for p in self.momentum_parameters():
            p.requires_grad_(False)
        q = sizes["queue_size"]
        self.register_buffer("image_queue", F.normalize(torch.randn(e, q), dim=0))
        self.register_buffer("text_queue", F.normalize(torch.randn(e, q), dim=0))
        if task == "retrieval":  # ALBEF's retrieval model: the image index of each queued feature
            self.register_buffer("idx_queue", torch.full((1, q), -100, dtype=torch.long))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    def tie_weights(self) -> None:
        """The MLM decoders read their text encoder's word embeddings (BertForMaskedLM's tie, each model its own)."""
        if self.task != "pretrain":
            return
        for head, encoder in ((self.mlm_head, self.text_encoder), (self.mlm_head_m, self.text_encoder_m)):
            head.predictions.decoder.weight = encoder.embeddings.word_embeddings.weight
            head.predictions.decoder.bias = head.predictions.bias

    def _apply(self, fn, recurse=True):
        """nn.Module's, then the ties again: a move that makes new parameters (to the meta device, as the stateless
        copy of seeds trained together is) would otherwise leave the decoders with copies of their own."""
        out = super()._apply(fn, recurse)
        self.tie_weights()
        return out

    # --- parts ---
    def pairs(self):
        names = ["visual_encoder", "vision_proj", "text_encoder", "fusion", "text_proj"]
        names += ["mlm_head"] if self.task == "pretrain" else []
        return [(getattr(self, n), getattr(self, f"{n}_m")) for n in names]

    def parameter_pairs(self):
        """(online, momentum) parameters, each momentum tensor once (the MLM decoder is tied)."""
        seen = set()
        for online, momentum in self.pairs():
            for (_, p), (_, pm) in zip(
                online.named_parameters(remove_duplicate=False), momentum.named_parameters(remove_duplicate=False)
            ):
                if id(pm) not in seen:
                    seen.add(id(pm))
                    yield p, pm

    def momentum_parameters(self):
        return [pm for _, pm in self.parameter_pairs()]

    @torch.no_grad()
    def copy_params(self) -> None:
        for p, pm in self.parameter_pairs():
            pm.copy_(p)

    @torch.no_grad()
    def momentum_update(self) -> None:
        m = self.sizes["momentum"]
        for p, pm in self.parameter_pairs():
            pm.mul_(m).add_(p.detach(), alpha=1 - m)

    @torch.no_grad()
    def enqueue(self, image_feat, text_feat, idx) -> None:
        """ALBEF's _dequeue_and_enqueue: under torchrun every rank queues the features of all ranks. A shapes-only
        pass (the meta device: the plan's memory estimate) has no queue position to read and saves nothing here."""
        if image_feat.is_meta:
            return
        image_feat, text_feat = gather_ranks(image_feat), gather_ranks(text_feat)
        idx = None if idx is None else gather_ranks(idx)
        n, size = image_feat.shape[0], self.image_queue.shape[1]
        # wraps where ALBEF asserts divisibility; the pointer stays a tensor (no .item()), so that seeds trained
        # together (torch.func.vmap) each move their own
        slots = (torch.arange(n, device=image_feat.device) + self.queue_ptr) % size
        # the queues stay fp32; under bf16 or fp16 autocast the features come in the lower precision
        self.image_queue.index_copy_(1, slots, image_feat.T.to(self.image_queue.dtype))
        self.text_queue.index_copy_(1, slots, text_feat.T.to(self.text_queue.dtype))
        if idx is not None:
            self.idx_queue.index_copy_(1, slots, idx.view(1, -1).to(self.idx_queue.dtype))
        self.queue_ptr.copy_((self.queue_ptr + n) % size)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training loss of a batch (what DistributedDataParallel wraps under torchrun): the sum of the
        pre-training objectives, or ALBEF's retrieval loss."""
        if self.task == "pretrain":
            return sum(self.pretrain_loss(batch).values())
        return self.retrieval_loss(batch)

    # --- encoders ---
    def image_embeds(self, image, masked=None, momentum=False):
        encoder = self.visual_encoder_m if momentum else self.visual_encoder
        return encoder(pixel_values=image, bool_masked_pos=masked).last_hidden_state

    def text_embeds(self, ids, mask, momentum=False):
        encoder = self.text_encoder_m if momentum else self.text_encoder
        return encoder(input_ids=ids, attention_mask=padding_mask(mask)).last_hidden_state

    def image_feat(self, embeds, momentum=False):
        proj = self.vision_proj_m if momentum else self.vision_proj
        return F.normalize(proj(embeds[:, 0]), dim=-1)

    def text_feat(self, embeds, momentum=False):
        proj = self.text_proj_m if momentum else self.text_proj
        return F.normalize(proj(embeds[:, 0]), dim=-1)

    def fuse(self, text, mask, image, momentum=False):
        return (self.fusion_m if momentum else self.fusion)(text, mask, image)

    def itm_logits(self, text, mask, image) -> torch.Tensor:
        return self.itm_head(self.fuse(text, mask, image)[:, 0])

    def similarity(self, image: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """ITC similarity image_feat @ text_feat^T (images x texts) — what retrieval ranks first."""
        image_feat = self.image_feat(self.image_embeds(image))
        text_feat = self.text_feat(self.text_embeds(ids, mask))
        return image_feat @ text_feat.T

    # --- objectives ---
    def contrastive(self, image, ids, mask, idx, alpha):
        image_embeds = self.image_embeds(image)
        text_embeds = self.text_embeds(ids, mask)
        with torch.no_grad():
            self.temp.clamp_(0.001, 0.5)
        image_feat, text_feat = self.image_feat(image_embeds), self.text_feat(text_embeds)
        if idx is None:  # pre-training: the pair itself is the only positive
            b = image.shape[0]
            targets = F.pad(torch.eye(b, device=image.device), (0, self.image_queue.shape[1]))
        else:  # retrieval: every caption of the same image is positive (ALBEF's idx targets)
            idx = idx.view(-1, 1)
            pos = torch.eq(idx, torch.cat([idx.T, self.idx_queue.clone()], dim=1)).float()
            targets = pos / pos.sum(1, keepdim=True)
        with torch.no_grad():
            self.momentum_update()
            image_feat_m = self.image_feat(self.image_embeds(image, momentum=True), momentum=True)
            text_feat_m = self.text_feat(self.text_embeds(ids, mask, momentum=True), momentum=True)
            image_all = torch.cat([image_feat_m.T, self.image_queue.clone()], dim=1)
            text_all = torch.cat([text_feat_m.T, self.text_queue.clone()], dim=1)
            if alpha > 0:
                i2t_targets = alpha * F.softmax(image_feat_m @ text_all / self.temp, dim=1) + (1 - alpha) * targets
                t2i_targets = alpha * F.softmax(text_feat_m @ image_all / self.temp, dim=1) + (1 - alpha) * targets
            else:
                i2t_targets = t2i_targets = targets
        sim_i2t = image_feat @ text_all / self.temp
        sim_t2i = text_feat @ image_all / self.temp
        loss_i2t = -(F.log_softmax(sim_i2t, dim=1) * i2t_targets).sum(1).mean()
        loss_t2i = -(F.log_softmax(sim_t2i, dim=1) * t2i_targets).sum(1).mean()
        state = {
            "image_embeds": image_embeds,
            "text_embeds": text_embeds,
            "image_feat": image_feat,
            "text_feat": text_feat,
            "text_all": text_all,
            "image_all": image_all,
            "image_feat_m": image_feat_m,
            "text_feat_m": text_feat_m,
        }
        return (loss_i2t + loss_t2i) / 2, state

    def itm(self, state, mask, idx):
        """ITM with one hard negative image per text and one hard negative text per image, drawn
        in proportion to the in-batch ITC similarity (same-idx pairs excluded)."""
        image_embeds, text_embeds = state["image_embeds"], state["text_embeds"]
        b = image_embeds.shape[0]
        with torch.no_grad():
            if idx is None:
                same = torch.eye(b, dtype=torch.bool, device=image_embeds.device)
            else:
                same = torch.eq(idx.view(-1, 1), idx.view(1, -1))
            sim = state["image_feat"] @ state["text_feat"].T / self.temp
            # a row whose batch holds only its own image's captions falls back to any other item
            # (ALBEF would fail to sample); a batch of one has nothing else (then the item itself)
            other = ~torch.eye(b, dtype=torch.bool, device=same.device) if b > 1 else torch.ones_like(same)
            allowed = torch.where((~same).any(1, keepdim=True), ~same, other)
            w_i2t = F.softmax(sim.float(), dim=1).masked_fill(~allowed, 0) + 1e-9 * allowed
            w_t2i = F.softmax(sim.T.float(), dim=1).masked_fill(~allowed.T, 0) + 1e-9 * allowed.T
            neg_image = torch.multinomial(w_t2i, 1).squeeze(1)
            neg_text = torch.multinomial(w_i2t, 1).squeeze(1)
        texts = torch.cat([text_embeds, text_embeds, text_embeds[neg_text]])
        masks = torch.cat([mask, mask, mask[neg_text]])
        images = torch.cat([image_embeds, image_embeds[neg_image], image_embeds])
        logits = self.itm_logits(texts, masks, images)
        labels = torch.cat([torch.ones(b), torch.zeros(2 * b)]).long().to(logits.device)
        return F.cross_entropy(logits, labels)

    def retrieval_loss(self, batch: dict[str, torch.Tensor], alpha: float | None = None) -> torch.Tensor:
        """Retrieval fine-tuning (ALBEF Retrieval.py): ITC with distillation + ITM with hard negatives."""
        alpha = self.sizes["alpha"] if alpha is None else alpha
        itc, state = self.contrastive(batch["image"], batch["input_ids"], batch["attention_mask"], batch["idx"], alpha)
        itm = self.itm(state, batch["attention_mask"], batch["idx"])
        self.enqueue(state["image_feat_m"], state["text_feat_m"], batch["idx"])
        return itc + itm

    def pretrain_loss(self, batch: dict[str, torch.Tensor], alpha: float | None = None) -> dict[str, torch.Tensor]:
        """Pre-training: ITC, ITM, MLM, MIM (when `mim_loss`) and L_ace (when `anchor_loss`)."""
        alpha = self.sizes["alpha"] if alpha is None else alpha
        image, ids, mask = batch["image"], batch["input_ids"], batch["attention_mask"]
        losses = {}
        losses["itc"], state = self.contrastive(image, ids, mask, None, alpha)
        losses["itm"] = self.itm(state, mask, None)
        losses["mlm"] = self.mlm(ids, mask, state["image_embeds"], image, alpha)
        if self.config.mim_loss:
            losses["mim"] = self.mim(image)
        if self.config.anchor_loss:
            losses["ace"] = self.anchor_loss(state)
        self.enqueue(state["image_feat_m"], state["text_feat_m"], None)
        return losses

    def mlm(self, ids, mask, image_embeds, image, alpha):
        """MLM: 15 % of the tokens, 80 % [MASK], 10 % random, 10 % kept; soft targets from the momentum model."""
        special = batch_special(ids, self.sizes)
        probs = torch.full(ids.shape, self.sizes["mlm_probability"], device=ids.device)
        chosen = torch.bernoulli(probs).bool() & ~special & mask.bool()
        labels = ids.masked_fill(~chosen, -100)
        # masks by where, not by indexing: the same draws and ids, and a shapes-only pass (the plan's memory
        # estimate on the meta device) needs no data-dependent shape
        replace = torch.bernoulli(torch.full(ids.shape, 0.8, device=ids.device)).bool() & chosen
        masked_ids = ids.masked_fill(replace, self.sizes["mask_token_id"])
        rand = torch.bernoulli(torch.full(ids.shape, 0.5, device=ids.device)).bool() & chosen & ~replace
        masked_ids = torch.where(
            rand, torch.randint(self.sizes["vocab_size"], ids.shape, device=ids.device), masked_ids
        )
        out = self.fuse(self.text_embeds(masked_ids, mask), mask, image_embeds)
        logits = self.mlm_head(out)
        count = chosen.sum().clamp(min=1)  # a batch with no masked token adds nothing
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), reduction="sum") / count
        if alpha > 0:
            with torch.no_grad():
                image_m = self.image_embeds(image, momentum=True)
                out_m = self.fuse(self.text_embeds(masked_ids, mask, momentum=True), mask, image_m, momentum=True)
                soft = F.softmax(self.mlm_head_m(out_m), dim=-1)
            distill = -torch.where(chosen, (F.log_softmax(logits, dim=-1) * soft).sum(-1), 0.0).sum() / count
            loss = (1 - alpha) * loss + alpha * distill
        return loss

    def mim(self, image):
        """MIM (Sec. 3.3, SimMIM): mask patches, predict their raw pixels with one linear layer, L1 loss."""
        b = image.shape[0]
        p = self.sizes["patch_size"]
        grid = image.shape[-1] // p
        masked = torch.rand(b, grid * grid, device=image.device) < self.sizes["mim_probability"]
        out = self.image_embeds(image, masked=masked)[:, 1:]
        pixels = image.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(b, grid * grid, -1)
        error = (self.mim_head(out) - pixels).abs().mean(-1)
        return (error * masked).sum() / masked.sum().clamp(min=1)

    def anchor_loss(self, state) -> torch.Tensor:
        """L_ace (Eq. 1-2): hinge between f(x, y) - margin and the soft maximum over the queue's
        negatives, both directions, minus the soft maximum of the token-patch similarities."""
        lam, margin = self.config.lambda_, self.config.margin
        pos = (state["image_feat"] * state["text_feat"]).sum(-1)  # f(x, y)
        sim_i2t = state["image_feat"] @ state["text_all"]  # f(x, z), z in O_y (column b is y)
        sim_t2i = state["text_feat"] @ state["image_all"]
        b = pos.shape[0]
        eye = F.pad(torch.eye(b, dtype=torch.bool, device=pos.device), (0, sim_i2t.shape[1] - b))
        neg_i2t = torch.logsumexp((lam * sim_i2t).masked_fill(eye, -torch.inf), dim=1) / lam
        neg_t2i = torch.logsumexp((lam * sim_t2i).masked_fill(eye, -torch.inf), dim=1) / lam
        h_i2t = -torch.clamp(pos - margin - neg_i2t, max=0)  # Eq. 2
        h_t2i = -torch.clamp(pos - margin - neg_t2i, max=0)
        patches = F.normalize(state["image_embeds"][:, 1:], dim=-1)
        tokens = F.normalize(state["text_embeds"][:, 1:], dim=-1)
        f_mn = torch.einsum("bmd,bnd->bmn", patches, tokens).flatten(1)
        token_term = torch.logsumexp(lam * f_mn, dim=1) / lam
        return 0.5 * (h_i2t + h_t2i - token_term).mean()  # Eq. 1


@torch.no_grad()
def gather_ranks(tensor: torch.Tensor) -> torch.Tensor:
    """ALBEF's concat_all_gather: the tensor of every rank of a torchrun job, in rank order (itself alone
    without one)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


def padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """A text encoder's attention mask (1 at words, 0 at padding) in the additive 4D form BERT builds from it, given
    ready: from a 2D one `transformers` first asks whether anything is padded, a branch on the data that seeds
    trained together (torch.func.vmap) cannot take. The same attention."""
    from repro.nn.attention import bert_padding_mask

    return bert_padding_mask(mask == 0, torch.get_default_dtype())


def batch_special(ids: torch.Tensor, sizes: dict[str, Any]) -> torch.Tensor:
    """Tokens MLM never masks: padding, [CLS], [SEP]."""
    return (ids == sizes["pad_token_id"]) | (ids == sizes["cls_token_id"]) | (ids == sizes["sep_token_id"])
