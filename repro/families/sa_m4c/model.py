"""M4C (Hu et al., CVPR 2020) and SA-M4C (Kant et al., ECCV 2020, Sec. 3-4).

One network, `M4C`, whose multimodal transformer (MMT) is a stack of layers of four kinds:

- `normal`: BERT-shaped self-attention over [question ‖ objects ‖ OCR ‖ decoding steps] (Eq. 1-4) with
  M4C's prefix mask (encoder positions see every valid encoder position, decoding step t sees the
  encoder and steps <= t);
- `spatial`: the spatially aware self-attention of SA-M4C (Sec. 4.2, Eq. 5-6): between object/OCR
  tokens, head h attends only along its relations T^h of the spatial graph (`relations.head_masks`),
  with bias beta = 0 (or learned, `relation_bias`); object/OCR tokens see the question tokens in every
  head (t_imp); decoding steps see everything before them; question tokens have no key in these layers
  (the released code blocks the question rows, and a row without keys gives a zero attention output);
- `topk`: M4C-Top-k (Table 2 row 5): a normal layer that keeps the k largest logits per query
  (Explicit Sparse Transformer);
- `regat`: M4C-ReGAT (Table 2 row 6): every head attends along every edge of the spatial graph (and
  t_imp), with a learned bias per (head, relation) added to the logits, as ReGAT's spatial graph attention.

Inputs (Sec. 4.3): the question through the first 3 layers of BERT (`transformers.BertModel`);
objects as region features (optionally through a fine-tuned fc7 layer, M4C's released code) plus box
embeddings; OCR tokens as [FastText ‖ PHOC ‖ appearance ‖ order] plus box embeddings. The answer is
decoded over `decode_steps` steps (Sec. 4.2) by the dynamic pointer network: each step scores the fixed
answer vocabulary (a linear classifier) and every OCR token (a bilinear pointer), and the previous
prediction is fed back as the classifier row or the OCR token's input embedding (M4C Sec. 3.3). It is
trained with `decoding_bce`, M4C's binary cross-entropy over the decoding steps.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from repro.families.sa_m4c.relations import NUM_RELATIONS, head_relation_sets
from repro.nn.attention import bert_padding_mask

# Sizes of the released code (mmf M4C / sam-textvqa), Sec. 4.3: BERT-base shaped MMT, 20 question
# word-pieces, 100 objects, 50 OCR tokens, 12 decoding steps.
PAPER_SIZES: dict[str, Any] = {
    "hidden_size": 768,
    "heads": 12,
    "ff_size": 3072,
    "dropout": 0.1,
    "text_bert_layers": 3,
    "bert_vocab": 30522,  # bert-base-uncased word-pieces
    "max_question_tokens": 20,
    "max_objects": 100,
    "max_ocr_tokens": 50,
    "decode_steps": 12,
    "obj_dim": 2048,  # Faster R-CNN fc6/fc7 region features
    "ocr_app_dim": 2048,  # the same detector's features of the OCR boxes
    "fasttext_dim": 300,
    "phoc_dim": 604,
    "max_dec_positions": 100,  # decoder position embedding rows (M4C)
}
SPECIAL = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}  # first four lines of the official answer vocabulary
BOS, EOS = SPECIAL["<s>"], SPECIAL["</s>"]
OCR_MASK_LOGIT = -10000.0  # padded OCR tokens in the pointer scores (M4C)
NO_KEY = -1e9


class TextBert(nn.Module):
    """The question encoder: the embeddings and the first `layers` layers of BERT (Sec. 4.3). Its width, heads,
    feed-forward size and position rows are the MMT's and 512 unless the sizes name `text_bert_hidden`,
    `text_bert_heads`, `text_bert_ff`, `text_bert_positions` (the released code fixes BERT-base's 768 / 12 / 3072
    whatever the MMT's width, then projects by `text_out`)."""

    def __init__(self, s: dict[str, Any]):
        super().__init__()
        from transformers import BertConfig, BertModel

        self.config = BertConfig(
            vocab_size=s["bert_vocab"],
            hidden_size=s.get("text_bert_hidden", s["hidden_size"]),
            num_hidden_layers=s["text_bert_layers"],
            num_attention_heads=s.get("text_bert_heads", s["heads"]),
            intermediate_size=s.get("text_bert_ff", s["ff_size"]),
            hidden_dropout_prob=s["dropout"],
            attention_probs_dropout_prob=s["dropout"],
            max_position_embeddings=s.get("text_bert_positions", 512),
            pad_token_id=0,
        )
        self.bert = BertModel(self.config, add_pooling_layer=False)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        attention = bert_padding_mask(~mask, self.bert.embeddings.word_embeddings.weight.dtype)
        return self.bert(input_ids=ids, attention_mask=attention).last_hidden_state


def load_text_bert(encoder: TextBert, folder) -> bool:
    """Initialise the question encoder from a local bert-base-uncased folder (its first layers); False
    when the folder holds no weights."""
    from transformers import BertModel

    from repro.nn.pretrained import bert_from_folder

    pretrained = bert_from_folder(
        BertModel, folder, num_hidden_layers=encoder.config.num_hidden_layers, add_pooling_layer=False
    )
    if pretrained is None:
        return False
    encoder.bert.load_state_dict(pretrained.state_dict(), strict=True)
    return True


class Fc7(nn.Module):
    """M4C's fine-tuned fc7 layer on detector fc6 features: Lin(d, d) + ReLU (trained at lr x 0.1)."""

    def __init__(self, dim: int):
        super().__init__()
        self.lc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.lc(x))


class InputEncoder(nn.Module):
    """LN(W_1 x) + LN(W_2 b), dropout: features x and normalised boxes b projected to the MMT (Sec. 4.3).
    `eps` of the two LayerNorms: mmf's M4C uses 1e-5 (torch's default), sam-textvqa 1e-12."""

    def __init__(self, in_dim: int, d: int, dropout: float, eps: float = 1e-12):
        super().__init__()
        self.feat_proj = nn.Linear(in_dim, d)
        self.feat_norm = nn.LayerNorm(d, eps=eps)
        self.box_proj = nn.Linear(4, d)
        self.box_norm = nn.LayerNorm(d, eps=eps)
        self.drop = nn.Dropout(dropout)

    def forward(self, features: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        return self.drop(self.feat_norm(self.feat_proj(features)) + self.box_norm(self.box_proj(boxes)))


class MMTAttention(nn.Module):
    """Multi-head attention (Eq. 1-4) over an allowed-pairs mask; Eq. 5-6's bias b^h_ij is 0 on allowed pairs (plus
    beta^h_t when `relation_bias`) and -inf (NO_KEY) elsewhere; `top_k` keeps the k largest logits of a query. A
    query with no allowed key gets a zero output (released SA-M4C code). The mask comes as an `AttentionMask`, made
    once per forward pass for every layer of a kind."""

    def __init__(self, d: int, heads: int, dropout: float, top_k: int | None = None, relation_bias: bool = False):
        super().__init__()
        self.heads, self.d_head, self.top_k = heads, d // heads, top_k
        self.query, self.key, self.value, self.out = (nn.Linear(d, d) for _ in range(4))
        self.drop = nn.Dropout(dropout)
        self.beta = nn.Parameter(torch.zeros(heads, NUM_RELATIONS + 1)) if relation_bias else None

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.d_head).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, mask: AttentionMask, relations: torch.Tensor | None = None, start: int = 0
    ) -> torch.Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        b, h, n, d = q.shape
        # logits and softmax in float32: under fp16 autocast the masked value would overflow
        with torch.autocast(x.device.type, enabled=False):
            bias = mask.bias
            if self.beta is not None and relations is not None:
                bias = bias + _relation_bias(self.beta, relations, n, start)
            # one fused multiply-add: q k^T / sqrt(d) + the mask's bias (0 allowed, NO_KEY not)
            scores = torch.baddbmm(
                bias.reshape(b * h, n, n),
                q.float().reshape(b * h, n, d),
                k.float().reshape(b * h, n, d).transpose(1, 2),
                alpha=1 / math.sqrt(d),
            ).view(b, h, n, n)
        if self.top_k is not None and self.top_k < n:
            kth = scores.topk(self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, NO_KEY)
        probs = torch.softmax(scores, dim=-1)
        out = (self.drop(probs).to(v.dtype) @ v) * mask.has_key
        return self.out(out.transpose(1, 2).reshape(b, n, self.heads * self.d_head))


class AttentionMask(NamedTuple):
    """An allowed-pairs mask [B, 1 or H, L, L] as attention reads it: `bias` [B, H, L, L] float32, 0 where allowed
    and NO_KEY elsewhere, added to the logits; `has_key` [B, H, L, 1], False for a query with no allowed key (its
    output is zeroed)."""

    bias: torch.Tensor
    has_key: torch.Tensor

    @classmethod
    def of(cls, allowed: torch.Tensor, heads: int) -> AttentionMask:
        allowed = allowed.expand(-1, heads, -1, -1)
        bias = torch.zeros(allowed.shape, device=allowed.device).masked_fill(~allowed, NO_KEY)
        return cls(bias, allowed.any(-1, keepdim=True))


def _relation_bias(beta: torch.Tensor, relations: torch.Tensor, length: int, start: int) -> torch.Tensor:
    """beta^h_t of Eq. 5 for the object/OCR block, [B, H, L, L] (zero outside it)."""
    b, n, _ = relations.shape
    bias = beta[:, relations.long()].permute(1, 0, 2, 3)  # [B, H, n, n]
    full = bias.new_zeros(b, beta.shape[0], length, length)
    full[:, :, start : start + n, start : start + n] = bias
    return full


def spatial_heads(s: dict[str, Any]) -> int:
    """Heads of a spatial layer: one per relation; the MMT's `heads` unless the sizes name `spatial_heads` (the
    released code builds them with `num_spatial_relations` heads whatever the normal layers have)."""
    return s.get("spatial_heads", s["heads"])


def spatial_head_sets(context: int, mixing: str, heads: int) -> torch.Tensor:
    """[heads, 13] bool, the relations each spatial head attends along. `context`: the paper's
    T^h = {t_h, ..., t_(h+c-1)} (Sec. 4.2). `share3`: the released SA-M4C's mixing, head h its own relation and,
    for the eight direction relations 4-11, also the two neighbouring sectors (wrapping inside 4-11)."""
    if mixing == "context":
        return head_relation_sets(context, heads)
    if mixing != "share3":
        raise ValueError(f"unknown spatial mixing {mixing!r}")
    allowed = torch.zeros(heads, NUM_RELATIONS + 1, dtype=torch.bool)
    first, sectors = 4, 8
    for h in range(heads):
        label = h % NUM_RELATIONS + 1
        allowed[h, label] = True
        if first <= label < first + sectors:
            for step in (-1, 1):
                allowed[h, first + (label - first + step) % sectors] = True
    return allowed


class MMTLayer(nn.Module):
    """One BERT-shaped post-LN transformer layer: attention, add & norm, GELU feed-forward, add & norm."""

    def __init__(self, kind: str, s: dict[str, Any], top_k: int | None = None, relation_bias: bool = False):
        super().__init__()
        d = s["hidden_size"]
        self.kind = kind
        heads = spatial_heads(s) if kind == "spatial" else s["heads"]
        self.attention = MMTAttention(d, heads, s["dropout"], top_k=top_k, relation_bias=relation_bias)
        self.attn_norm = nn.LayerNorm(d, eps=1e-12)
        self.ff_in = nn.Linear(d, s["ff_size"])
        self.ff_out = nn.Linear(s["ff_size"], d)
        self.ff_norm = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(s["dropout"])

    def forward(self, x: torch.Tensor, mask: AttentionMask, relations: torch.Tensor | None, start: int) -> torch.Tensor:
        x = self.attn_norm(x + self.drop(self.attention(x, mask, relations, start)))
        return self.ff_norm(x + self.drop(self.ff_out(F.gelu(self.ff_in(x)))))


class PrevPredEmbeddings(nn.Module):
    """The embedding of the previous step's prediction (M4C Sec. 3.3): LN(classifier row) for a vocabulary
    word or LN(OCR input embedding) for a copied token, plus LN(position + type (vocab / OCR)), dropout."""

    def __init__(self, s: dict[str, Any]):
        super().__init__()
        d = s["hidden_size"]
        self.position = nn.Embedding(s["max_dec_positions"], d)
        self.token_type = nn.Embedding(5, d)
        self.ans_norm = nn.LayerNorm(d, eps=1e-12)
        self.ocr_norm = nn.LayerNorm(d, eps=1e-12)
        self.emb_norm = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(s["dropout"])

    def forward(self, answer_rows: torch.Tensor, ocr_emb: torch.Tensor, prev_inds: torch.Tensor) -> torch.Tensor:
        b, steps = prev_inds.shape
        vocab = answer_rows.shape[0]
        table = torch.cat([self.ans_norm(answer_rows).unsqueeze(0).expand(b, -1, -1), self.ocr_norm(ocr_emb)], dim=1)
        raw = table.gather(1, prev_inds.unsqueeze(-1).expand(-1, -1, table.shape[-1]))
        positions = torch.arange(steps, device=prev_inds.device).unsqueeze(0).expand(b, -1)
        types = (prev_inds >= vocab).long()
        return raw + self.drop(self.emb_norm(self.position(positions) + self.token_type(types)))


class OcrPtrNet(nn.Module):
    """The dynamic pointer (M4C Eq. 6): (W_q z_dec)·(W_k z_ocr) / sqrt(d) for every OCR token."""

    def __init__(self, d: int):
        super().__init__()
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)

    def forward(self, dec: torch.Tensor, ocr: torch.Tensor, ocr_mask: torch.Tensor) -> torch.Tensor:
        scores = self.query(dec) @ self.key(ocr).transpose(-1, -2) / math.sqrt(dec.shape[-1])
        return scores.masked_fill(~ocr_mask.unsqueeze(1), OCR_MASK_LOGIT)


class M4C(nn.Module):
    """M4C / SA-M4C: forward(batch) scores every decoding step given `batch["prev_inds"]` (teacher forcing);
    `decode(batch, beam)` decodes answers greedily (beam 1) or by beam search.

    Output scores are [B, steps, V + N_ocr]: the fixed vocabulary first, then the OCR tokens."""

    def __init__(
        self,
        sizes: dict[str, Any],
        num_answers: int,
        layers: list[str],
        *,
        fc7: bool,
        context: int = NUM_RELATIONS + 1,
        top_k: int | None = None,
        relation_bias: bool = False,
        spatial_mixing: str = "context",
        input_norm_eps: float = 1e-12,
    ):
        super().__init__()
        s = sizes
        d = s["hidden_size"]
        self.sizes, self.num_answers, self.layer_kinds, self.context = dict(s), num_answers, list(layers), context
        self.spatial_mixing = spatial_mixing
        self.text_bert = TextBert(s)
        text_width = s.get("text_bert_hidden", d)
        self.text_out = nn.Linear(text_width, d) if text_width != d else None
        self.obj_fc7 = Fc7(s["obj_dim"]) if fc7 else nn.Identity()
        self.ocr_fc7 = Fc7(s["ocr_app_dim"]) if fc7 else nn.Identity()
        self.obj_encoder = InputEncoder(s["obj_dim"], d, s["dropout"], input_norm_eps)
        # FastText ‖ PHOC ‖ appearance ‖ order vector (one slot per OCR token, zeros as in the released code)
        ocr_dim = s["fasttext_dim"] + s["phoc_dim"] + s["ocr_app_dim"] + s["max_ocr_tokens"]
        self.ocr_encoder = InputEncoder(ocr_dim, d, s["dropout"], input_norm_eps)
        self.mmt = nn.ModuleList(
            MMTLayer(
                kind,
                s,
                top_k=top_k if kind == "topk" else None,
                relation_bias=kind == "regat" or (kind == "spatial" and relation_bias),
            )
            for kind in layers
        )
        self.prev_pred = PrevPredEmbeddings(s)
        self.ocr_ptr = OcrPtrNet(d)
        self.classifier = nn.Linear(d, num_answers)

    def lr_groups(self) -> list[dict[str, Any]]:
        """Parameter groups with their learning-rate factor: text BERT and fc7 x 0.1 (released code)."""
        slow = [p for m in (self.text_bert, self.obj_fc7, self.ocr_fc7) for p in m.parameters()]
        ids = {id(p) for p in slow}
        fast = [p for p in self.parameters() if id(p) not in ids]
        return [{"params": fast, "lr_scale": 1.0}, {"params": slow, "lr_scale": 0.1}]

    # --- encoder inputs ---------------------------------------------------------------------------

    def _ocr_input(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        app = F.normalize(self.ocr_fc7(batch["ocr_features"]), dim=-1)
        parts = [F.normalize(batch["ocr_fasttext"], dim=-1), F.normalize(batch["ocr_phoc"], dim=-1), app]
        order = app.new_zeros(*app.shape[:2], self.sizes["max_ocr_tokens"])
        return self.ocr_encoder(torch.cat([*parts, order], dim=-1), batch["ocr_boxes"])

    def encode(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        question_mask = batch["question_mask"].bool()
        txt = self.text_bert(batch["question_ids"], question_mask)
        return {
            "txt": txt if self.text_out is None else self.text_out(txt),
            "obj": self.obj_encoder(F.normalize(self.obj_fc7(batch["obj_features"]), dim=-1), batch["obj_boxes"]),
            "ocr": self._ocr_input(batch),
            "txt_mask": question_mask,
            "obj_mask": batch["obj_mask"].bool(),
            "ocr_mask": batch["ocr_mask"].bool(),
        }

    # --- attention masks ------------------------------------------------------------------------

    def _masks(self, enc: dict[str, torch.Tensor], relations: torch.Tensor | None, steps: int) -> dict[str, Any]:
        """Allowed (query, key) pairs per layer kind, [B, 1 or H, L, L] bool."""
        txt_m, obj_m, ocr_m = enc["txt_mask"], enc["obj_mask"], enc["ocr_mask"]
        b, tq = txt_m.shape
        n_ent = obj_m.shape[1] + ocr_m.shape[1]
        e0, e1 = tq, tq + n_ent  # the object/OCR block
        enc_len = e1
        length = enc_len + steps
        dev = txt_m.device
        key_valid = torch.cat([txt_m, obj_m, ocr_m, torch.ones(b, steps, dtype=torch.bool, device=dev)], dim=1)
        pos = torch.arange(length, device=dev)
        # prefix mask: encoder queries see encoder keys; decoding step t sees the encoder and steps <= t
        structure = (pos[None, :] < enc_len) | ((pos[:, None] >= enc_len) & (pos[None, :] <= pos[:, None]))
        normal = (structure[None] & key_valid[:, None, :]).unsqueeze(1)
        masks: dict[str, Any] = {"normal": normal, "topk": normal}
        if relations is None:
            return masks
        for kind, heads, context, mixing in (
            ("spatial", spatial_heads(self.sizes), self.context, self.spatial_mixing),
            ("regat", self.sizes["heads"], NUM_RELATIONS + 1, "context"),
        ):
            if kind in self.layer_kinds:
                m = normal.expand(-1, heads, -1, -1).clone()
                m[:, :, :tq, :] = False  # question rows: no key in graph layers (released code)
                sets = spatial_head_sets(context, mixing, heads).to(relations.device)
                m[:, :, e0:e1, e0:e1] = sets[:, relations.long()].permute(1, 0, 2, 3) & normal[:, :, e0:e1, e0:e1]
                masks[kind] = m
        return masks

    # --- one pass over the MMT -------------------------------------------------------------------

    def forward(self, batch: dict[str, torch.Tensor], prev_inds: torch.Tensor | None = None) -> torch.Tensor:
        enc = self.encode(batch)
        return self._scores(batch, enc, batch["prev_inds"] if prev_inds is None else prev_inds)

    def _scores(self, batch: dict[str, torch.Tensor], enc: dict[str, torch.Tensor], prev_inds: torch.Tensor):
        steps = prev_inds.shape[1]
        dec = self.prev_pred(self.classifier.weight, enc["ocr"], prev_inds)
        x = torch.cat([enc["txt"], enc["obj"], enc["ocr"], dec], dim=1)
        needs_graph = any(k in ("spatial", "regat") for k in self.layer_kinds)
        relations = batch["relations"] if needs_graph else None
        masks = self._masks(enc, relations, steps)
        start = enc["txt"].shape[1]  # the object/OCR block follows the question tokens
        ready: dict[tuple[str, int], AttentionMask] = {}  # each kind's mask made once for all of its layers
        for layer in self.mmt:
            key = (layer.kind, layer.attention.heads)
            if key not in ready:
                ready[key] = AttentionMask.of(masks[layer.kind], key[1])
            x = layer(x, ready[key], relations, start)
        n_ocr = enc["ocr"].shape[1]
        dec_out = x[:, -steps:]
        ocr_out = x[:, -steps - n_ocr : -steps]
        return torch.cat([self.classifier(dec_out), self.ocr_ptr(dec_out, ocr_out, enc["ocr_mask"])], dim=-1)

    # --- decoding ---------------------------------------------------------------------------------

    @torch.no_grad()
    def decode(self, batch: dict[str, torch.Tensor], beam: int = 1) -> torch.Tensor:
        """Predicted indices [B, steps] into vocabulary ‖ OCR tokens (greedy for beam 1)."""
        if beam > 1:
            return self._beam_search(batch, beam)
        enc = self.encode(batch)
        steps = self.sizes["decode_steps"]
        b = enc["txt"].shape[0]
        prev = torch.zeros(b, steps, dtype=torch.long, device=enc["txt"].device)
        prev[:, 0] = BOS
        for t in range(steps):
            best = self._scores(batch, enc, prev).argmax(-1)
            if t + 1 < steps:
                prev[:, t + 1] = best[:, t]
        return best

    def _beam_search(self, batch: dict[str, torch.Tensor], beam: int) -> torch.Tensor:
        """Beam search over the steps: a hypothesis' score is the sum of its steps' log-softmax over
        vocabulary ‖ OCR; a hypothesis that emitted </s> keeps its score; the best one is returned."""
        steps = self.sizes["decode_steps"]
        b = batch["question_ids"].shape[0]
        expanded = {k: v.repeat_interleave(beam, dim=0) for k, v in batch.items() if isinstance(v, torch.Tensor)}
        enc = self.encode(expanded)
        dev = enc["txt"].device
        prev = torch.zeros(b * beam, steps, dtype=torch.long, device=dev)
        prev[:, 0] = BOS
        out = torch.zeros(b * beam, steps, dtype=torch.long, device=dev)
        score = torch.full((b, beam), float("-inf"), device=dev)
        score[:, 0] = 0.0
        done = torch.zeros(b * beam, dtype=torch.bool, device=dev)
        for t in range(steps):
            logp = torch.log_softmax(self._scores(expanded, enc, prev)[:, t].float(), dim=-1)
            width = logp.shape[-1]
            stay = torch.full_like(logp, float("-inf"))
            stay[:, EOS] = 0.0
            logp = torch.where(done[:, None], stay, logp)
            total = (score.view(-1, 1) + logp).view(b, beam * width)
            score, flat = total.topk(beam, dim=-1)
            origin = (flat // width) + torch.arange(b, device=dev)[:, None] * beam
            token = (flat % width).view(-1)
            origin = origin.view(-1)
            out = out[origin]
            out[:, t] = token
            prev = prev[origin]
            done = done[origin] | (token == EOS)
            if t + 1 < steps:
                prev[:, t + 1] = token
        best = score.argmax(-1) + torch.arange(b, device=dev) * beam
        return out[best]


def layer_stack(config) -> list[str]:
    """The MMT layer kinds a config names, bottom first ('2N->4S' = normal x 2 then spatial x 4)."""
    if config.arch == "sa-m4c":
        return ["normal"] * config.normal_layers + ["spatial"] * config.spatial_layers
    return ["normal"] * config.normal_layers + ["topk"] * config.topk_layers + ["regat"] * config.regat_layers


def decoding_bce(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """M4C's decoding loss (the recipe's `decoding-bce`): BCE-with-logits over vocabulary ‖ OCR at every step,
    masked after the answer's </s>, summed and divided by the number of valid steps (mmf's
    M4CDecodingBCEWithMaskLoss)."""
    scores = model(batch).float()
    losses = F.binary_cross_entropy_with_logits(scores, batch["targets"], reduction="none")
    mask = batch["step_mask"]
    return (losses * mask.unsqueeze(-1)).sum() / mask.sum().clamp(min=1)
