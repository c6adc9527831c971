"""ALBEF's released checkpoints (salesforce/ALBEF) into this family's model, by an explicit key map.

ALBEF's layouts:
- pre-training (`ALBEF_4M.pth`, `ALBEF.pth` for 14M; the `model` entry): `text_encoder.bert.*` and
  `text_encoder.cls.predictions.*` (BertForMaskedLM, 12 layers, 6-11 with cross-attention), the
  timm-style ViT `visual_encoder.*`, the projections, `temp`, `itm_head`, momentum copies `*_m`,
  `image_queue`, `text_queue`, `queue_ptr`;
- retrieval (fine-tuned `flickr30k.pth`, `mscoco.pth`): `text_encoder.*` (BertModel) and `idx_queue`;
- VQA / SNLI-VE / NLVR2 / grounding (fine-tuned `vqa.pth`, `ve.pth`, `nlvr.pth`, `refcoco.pth`):
  `text_encoder.*` (NLVR2: 18 layers, 6-17 the paired fusion layers), VQA's `text_decoder[_m].bert.*`
  and `.cls.*` (BertLMHeadModel: the names transformers uses), `cls_head[_m].*`.

The map, ALBEF -> here:
- `text_encoder[_m][.bert].encoder.layer.i` -> `text_encoder[_m].encoder.layer.i` for i < text layers,
  `fusion[_m].layer.(i - text layers)` above (ALBEF's `fusion_layer: 6`);
- `text_encoder[_m][.bert].embeddings.*` -> `text_encoder[_m].embeddings.*`; ALBEF's persistent
  `embeddings.position_ids` buffer is dropped (transformers keeps it non-persistent; it must be 0..L-1);
- `text_encoder[_m].cls.predictions.*` -> `mlm_head[_m].predictions.*` (pre-training model only; a
  retrieval model drops them, as ALBEF's Retrieval.py does);
- ViT: `cls_token`, `pos_embed` -> `embeddings.cls_token`, `embeddings.position_embeddings` (bicubic
  interpolation of the grid when the resolution differs, as ALBEF's `interpolate_pos_embed`);
  `patch_embed.proj` -> `embeddings.patch_embeddings.projection`; `blocks.i.norm1/norm2` ->
  `layers.i.layernorm_before/after`; `blocks.i.attn.qkv` split in three -> `q_proj`, `k_proj`,
  `v_proj`; `attn.proj` -> `o_proj`; `mlp.*` kept; `norm` -> `layernorm`;
- `text_decoder[_m].*` by the same name, its `embeddings.position_ids` buffer dropped;
- everything else (`vision_proj`, `text_proj`, `temp`, `itm_head`, `cls_head`, the queues) by the same name.

Keys of ours that ALBEF has not (the position embeddings, the MIM head and mask token, `idx_queue`
from a pre-training checkpoint) keep their initial values and are reported as missing (`new`). The load is the
shared strict one (`repro.weights`): everything or nothing, with the key report.

`transfer` moves a row's own pre-trained weights into its fine-tuning model, at the other resolution.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from repro.errors import ReproError
from repro.weights import Conversion, KeyReport, read_state_dict, strict_load

_VIT_BLOCK = {
    "norm1": "layernorm_before",
    "norm2": "layernorm_after",
    "attn.proj": "attention.o_proj",
    "mlp.fc1": "mlp.fc1",
    "mlp.fc2": "mlp.fc2",
}
_VIT_TOP = {
    "cls_token": "embeddings.cls_token",
    "pos_embed": "embeddings.position_embeddings",
    "patch_embed.proj.weight": "embeddings.patch_embeddings.projection.weight",
    "patch_embed.proj.bias": "embeddings.patch_embeddings.projection.bias",
    "norm.weight": "layernorm.weight",
    "norm.bias": "layernorm.bias",
}
SAME_NAME = ("vision_proj", "text_proj", "vision_proj_m", "text_proj_m", "itm_head", "temp", "cls_head", "cls_head_m")
QUEUES = ("image_queue", "text_queue", "idx_queue", "queue_ptr")


LoadReport = KeyReport  # `new`: ours, not in the checkpoint, kept as initialised; `dropped`: not loaded


def _vit_key(rest: str, prefix: str) -> list[tuple[str, int | None]]:
    """ALBEF ViT key (after `visual_encoder[_m].`) -> our key(s); qkv gives three (with their slice index)."""
    if rest in _VIT_TOP:
        return [(f"{prefix}.{_VIT_TOP[rest]}", None)]
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)\.(weight|bias)", rest)
    if not match:
        raise ReproError(f"ALBEF checkpoint: unknown ViT key {prefix}.{rest}")
    block, part, kind = match.groups()
    if part == "attn.qkv":
        return [(f"{prefix}.layers.{block}.attention.{p}_proj.{kind}", i) for i, p in enumerate("qkv")]
    if part not in _VIT_BLOCK:
        raise ReproError(f"ALBEF checkpoint: unknown ViT key {prefix}.{rest}")
    return [(f"{prefix}.layers.{block}.{_VIT_BLOCK[part]}.{kind}", None)]


def _text_key(key: str, text_layers: int) -> str | None:
    """ALBEF BERT key -> ours; None for the keys deliberately dropped."""
    match = re.fullmatch(r"(text_encoder(?:_m)?)\.(?:bert\.)?(.+)", key)
    owner, rest = match.groups()
    momentum = "_m" if owner.endswith("_m") else ""
    if rest == "embeddings.position_ids":
        return None
    if rest.startswith("cls.predictions."):
        return f"mlm_head{momentum}.{rest[len('cls.') :]}"
    layer = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", rest)
    if layer:
        index, tail = int(layer.group(1)), layer.group(2)
        if index >= text_layers:
            return f"fusion{momentum}.layer.{index - text_layers}.{tail}"
    return f"{owner}.{rest}"


def interpolate_position(pos: torch.Tensor, tokens: int) -> torch.Tensor:
    """ViT position embeddings (1, 1 + g*g, D) resized to `tokens` = 1 + G*G (bicubic, as ALBEF)."""
    if pos.shape[1] == tokens:
        return pos
    old, new = int((pos.shape[1] - 1) ** 0.5), int((tokens - 1) ** 0.5)
    grid = pos[:, 1:].reshape(1, old, old, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
    return torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, new * new, -1)], dim=1)


def convert(albef: dict[str, torch.Tensor], ours: dict[str, torch.Tensor], text_layers: int) -> Conversion:
    """ALBEF's state dict in our names: what each key fills (the qkv split and a resized position table named),
    and what is dropped and why."""
    out = Conversion()
    for key, value in albef.items():
        head = key.split(".", 1)[0]
        if head in ("visual_encoder", "visual_encoder_m"):
            for target, part in _vit_key(key.split(".", 1)[1], head):
                chunk = value if part is None else value.chunk(3, dim=0)[part]
                change = "" if part is None else f"{'qkv'[part]} third of the rows of qkv"
                if target.endswith("position_embeddings") and target in ours:
                    resized = interpolate_position(chunk, ours[target].shape[1])
                    if resized.shape != chunk.shape:
                        change = f"bicubic {chunk.shape[1] - 1} -> {resized.shape[1] - 1} patches"
                    chunk = resized
                out.put(key, target, chunk, change)
        elif head in ("text_encoder", "text_encoder_m"):
            target = _text_key(key, text_layers)
            if target is None:
                if not torch.equal(value.flatten(), torch.arange(value.numel(), dtype=value.dtype)):
                    raise ReproError(f"ALBEF checkpoint: {key} is not 0..{value.numel() - 1}")
                out.drop(key, "positions 0..L-1 (a non-persistent buffer here)")
            elif target.startswith("mlm_head") and target not in ours:
                out.drop(key, "no MLM head in this model (ALBEF's Retrieval.py ignores it)")
            else:
                out.put(key, target, value)
        elif head in ("text_decoder", "text_decoder_m"):  # VQA's answer decoder: transformers' names already
            if key.endswith("embeddings.position_ids"):
                out.drop(key, "positions 0..L-1 (a non-persistent buffer here)")
            else:
                out.put(key, key, value)
        elif head in SAME_NAME or key in QUEUES:
            out.put(key, key, value)
        else:
            raise ReproError(f"ALBEF checkpoint: unknown key {key}")
    return out


def load_albef(
    model: nn.Module,
    albef: dict[str, torch.Tensor],
    may_stay_initial: Callable[[str], bool] = lambda key: True,
    source: str = "ALBEF checkpoint",
) -> KeyReport:
    """Load an ALBEF state dict (either layout) into `model`, everything or nothing (`repro.weights.strict_load`):
    refuses a key or shape it cannot place. Keys of ours that the state dict lacks keep their initial values when
    `may_stay_initial` allows them (all by default, for the DeiT + BERT starting point; `new_key_allowed` for a
    released checkpoint), reported as missing (`new`)."""
    conversion = convert(albef, model.state_dict(), model.sizes["text_layers"])
    return strict_load(model, conversion, source, may_stay_initial)


def new_key_allowed(key: str) -> bool:
    """Keys of ours that no ALBEF checkpoint has: the cross-modal position embeddings, MIM, idx_queue."""
    return (
        ".position." in key
        or key.startswith("mim_head.")
        or key.endswith("embeddings.mask_token")
        or key == "idx_queue"
    )


def albef_initialisation(deit: dict[str, torch.Tensor], bert: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """ALBEF's starting point for pre-training, in its pre-training layout: DeiT-B/16's ImageNet weights as the
    image encoder (timm's keys; the classifier `head.*` dropped) and `bert-base-uncased` as the text encoder and
    fusion layers with its MLM head (`BertForMaskedLM.from_pretrained`; the pooler and next-sentence head dropped,
    the legacy `LayerNorm.gamma/beta` names read as weight/bias), both copied into the momentum encoders (ALBEF's
    `copy_params`). The cross-attention blocks, projections, ITM head and queues are not in either: they keep
    their initial values (`load_albef` reports them as new)."""
    state: dict[str, torch.Tensor] = {}
    for key, value in deit.items():
        if not key.startswith(("head.", "head_dist.")):
            state[f"visual_encoder.{key}"] = value
    for key, value in bert.items():
        key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))
        if key.startswith(("bert.pooler.", "cls.seq_relationship.")):
            continue
        state[f"text_encoder.{key}"] = value
    for key in list(state):
        owner, rest = key.split(".", 1)
        state[f"{owner}_m.{rest}"] = state[key]
    return state


def read_checkpoint(path) -> dict[str, torch.Tensor]:
    """The state dict of an ALBEF checkpoint file (`{"model": state_dict, ...}`, as ALBEF saves them)."""
    return read_state_dict(path, ("model",))


def transfer(weights: dict[str, torch.Tensor], model: nn.Module) -> None:
    """Load pre-trained weights into a fine-tuning model, resizing what depends on the resolution
    (pre-training at 256 px, fine-tuning at 384 px): the ViT position embeddings and APE's patch table
    bicubically, as ALBEF's interpolate_pos_embed, and RPE's (2g-1) x (2g-1) offset table likewise."""
    target = model.state_dict()
    kept = {}
    for key, value in weights.items():
        if key not in target:
            continue
        want = target[key].shape
        if value.shape != want:
            if key.endswith("image_relative.weight"):  # ((2g-1)^2, D) offsets on a square
                old, new = math.isqrt(value.shape[0]), math.isqrt(want[0])
                grid = value.T.reshape(1, -1, old, old)
                value = F.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
                value = value.reshape(-1, new * new).T
            elif value.dim() == 3:  # ViT: (1, 1 + g^2, D)
                value = interpolate_position(value, want[1])
            else:  # APE: (1 + g^2, D)
                value = interpolate_position(value[None], want[0])[0]
        kept[key] = value
    model.load_state_dict({**target, **kept}, strict=True)  # the keys `weights` lacks keep their values


def convert_checkpoint(path: Path, layout: str, option: str | None = None):
    """`repro weights convert`: refused after reading the file: an ALBEF checkpoint loads into a row's model
    (`init: albef`, `load_albef`); its head count and task are not in its shapes, so no model is built from it."""
    read_checkpoint(path)  # an unreadable file is named first
    raise ReproError(
        f"{path}: an ALBEF checkpoint loads into a row's model (`init: albef`); its head count and task are not "
        "in the shapes, so convert does not build one"
    )


def sizes_from_state(state: dict[str, torch.Tensor], heads: int, task: str | None = None) -> dict[str, int]:
    """The sizes of the network an ALBEF checkpoint's shapes define (every layout: pre-training, retrieval, VQA,
    SNLI-VE, NLVR2, grounding): hidden size, vocabulary, positions, text and fusion layers (the fusion layers are
    those with cross-attention; NLVR2's come in (left image, right image) pairs, each pair one of our
    `fusion_layers`), the ViT's blocks, patch and resolution (its position table: 577 = 1 + 24 x 24 patches of 16,
    384 px), the projection and queue sizes where it has them. NLVR2's layout is `task` "nlvr2" or, unnamed, a file
    with a text-assignment head (`ta_head`) or a two-way `cls_head`. The head count is not in the shapes: `heads`
    (ALBEF's 12)."""
    bert = "text_encoder.bert." if "text_encoder.bert.embeddings.word_embeddings.weight" in state else "text_encoder."

    def tensor(key: str) -> torch.Tensor:
        if key not in state:
            raise ReproError(f"not an ALBEF checkpoint: no {key}")
        return state[key]

    def count(prefix: str) -> int:
        pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
        found = {int(m.group(1)) for key in state if (m := pattern.match(key))}
        if not found:
            raise ReproError(f"not an ALBEF checkpoint: no {prefix}0.*")
        return 1 + max(found)

    vocab, hidden = tensor(bert + "embeddings.word_embeddings.weight").shape
    layers = count(bert + "encoder.layer.")
    cross = [i for i in range(layers) if f"{bert}encoder.layer.{i}.crossattention.self.query.weight" in state]
    if not cross:
        raise ReproError(f"not an ALBEF checkpoint: no cross-attention in {bert}encoder.layer.*")
    fusion = layers - cross[0]
    if task == "nlvr2" or (task is None and _paired(state)):
        if fusion % 2:
            raise ReproError(f"an NLVR2 checkpoint with {fusion} fusion layers: its layers come in pairs")
        fusion //= 2
    patch = tensor("visual_encoder.patch_embed.proj.weight").shape[-1]
    grid = math.isqrt(tensor("visual_encoder.pos_embed").shape[1] - 1)
    sizes = {
        "hidden_size": hidden,
        "heads": heads,
        "intermediate_size": tensor(bert + "encoder.layer.0.intermediate.dense.weight").shape[0],
        "image_layers": count("visual_encoder.blocks."),
        "text_layers": cross[0],
        "fusion_layers": fusion,
        "image_size": grid * patch,
        "patch_size": patch,
        "vocab_size": vocab,
        "max_positions": tensor(bert + "embeddings.position_embeddings.weight").shape[0],
    }
    if "vision_proj.weight" in state:  # ITC's projections (pre-training, retrieval; not VQA's model)
        sizes["embed_dim"] = state["vision_proj.weight"].shape[0]
    if "image_queue" in state:
        sizes["queue_size"] = state["image_queue"].shape[1]
    return sizes


def _paired(state: dict[str, torch.Tensor]) -> bool:
    """NLVR2's layouts (model_nlvr.py, model_pretrain_nlvr.py): a text-assignment head, or a two-way classifier."""
    head = state.get("cls_head.2.weight")
    return "ta_head.weight" in state or (head is not None and head.shape[0] == 2)
