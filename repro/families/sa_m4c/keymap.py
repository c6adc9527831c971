"""Released M4C and SA-M4C checkpoints into this family's model, by an explicit key map.

Layouts:
- `mmf` (facebookresearch/mmf `mmf/models/m4c.py`, class M4C): `{"model": state_dict}` (mmf also loads a plain
  state dict); MMT layers `mmt.encoder.layer.i`, fine-tuned fc7 layers `{obj,ocr}_faster_rcnn_fc7.lc`, the
  classifier wrapped as `classifier.module`;
- `sam-textvqa` (yashkant/sam-textvqa `sam/sa_m4c.py`, class SAM4C): `{"model_state_dict": state_dict,
  "epoch_id": ...}`; MMT layers `mmt.encoder.normal_layers.i` then `mmt.encoder.spatial_layers.j` (the released
  `layer_type_list` puts every normal layer first), no fc7 layer, the classifier as `classifier`.

The map, official -> here (a plain renaming: no tensor is reshaped):
- `text_bert.embeddings.*`, `text_bert.encoder.layer.i.*` -> `text_bert.bert.*` (transformers' names already);
  the persistent `text_bert.embeddings.position_ids` buffer of older transformers is dropped (it must be 0..L-1);
  `text_bert_out_linear` (the 768 -> MMT projection the code adds when the MMT is narrower) -> `text_out`;
- `{obj,ocr}_faster_rcnn_fc7.lc` -> `{obj,ocr}_fc7.lc`; `linear_{obj,ocr}_feat_to_mmt_in` ->
  `{obj,ocr}_encoder.feat_proj`, `linear_{obj,ocr}_bbox_to_mmt_in` -> `.box_proj`, `{obj,ocr}_feat_layer_norm` ->
  `.feat_norm`, `{obj,ocr}_bbox_layer_norm` -> `.box_norm`;
- `mmt.prev_pred_embeddings.{position_embeddings,token_type_embeddings,ans_layer_norm,ocr_layer_norm,
  emb_layer_norm}` -> `prev_pred.{position,token_type,ans_norm,ocr_norm,emb_norm}`;
- MMT layer i: `attention.self.{query,key,value}` -> `mmt.i.attention.{query,key,value}`,
  `attention.output.dense` -> `.attention.out`, `attention.output.LayerNorm` -> `.attn_norm`,
  `intermediate.dense` -> `.ff_in`, `output.dense` -> `.ff_out`, `output.LayerNorm` -> `.ff_norm`
  (sam-textvqa's spatial layer j is our layer normal_layers + j);
- `ocr_ptr_net.{query,key}` -> `ocr_ptr.{query,key}`; `classifier[.module]` -> `classifier`.

The network is built with the values the checkpoint's own code uses: mmf's input LayerNorm eps 1e-5, and
sam-textvqa's spatial mixing (`share3` for the released checkpoints, `none` = context 1 for mix_list none), the
spatial layers with one head per relation whatever the normal layers have, and the text BERT at BERT-base's width.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.weights import Conversion, KeyReport, read_state_dict, rename, strict_load

LAYOUTS = ("mmf", "sam-textvqa")
CHECKPOINT_KEYS = {"mmf": ("model",), "sam-textvqa": ("model_state_dict",)}
MMF_INPUT_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default in mmf's M4C
SAM_INPUT_NORM_EPS = 1e-12  # BertLayerNorm in sam-textvqa
MIXING = {"share3": "share3", "none": "context"}  # sam-textvqa mix_list -> our spatial_mixing (none: context 1)
TEXT_BERT = {"hidden": 768, "heads": 12, "ff": 3072}  # fixed in both model files

_LAYER = (
    (r"attention\.self\.(query|key|value)\.(weight|bias)", r"attention.\1.\2"),
    (r"attention\.output\.dense\.(weight|bias)", r"attention.out.\1"),
    (r"attention\.output\.LayerNorm\.(weight|bias)", r"attn_norm.\1"),
    (r"intermediate\.dense\.(weight|bias)", r"ff_in.\1"),
    (r"output\.dense\.(weight|bias)", r"ff_out.\1"),
    (r"output\.LayerNorm\.(weight|bias)", r"ff_norm.\1"),
)
RULES: tuple[tuple[str, str], ...] = (
    (r"text_bert\.(embeddings\..+|encoder\.layer\.\d+\..+)", r"text_bert.bert.\1"),
    (r"text_bert_out_linear\.(weight|bias)", r"text_out.\1"),
    (r"(obj|ocr)_faster_rcnn_fc7\.lc\.(weight|bias)", r"\1_fc7.lc.\2"),
    (r"linear_(obj|ocr)_feat_to_mmt_in\.(weight|bias)", r"\1_encoder.feat_proj.\2"),
    (r"linear_(obj|ocr)_bbox_to_mmt_in\.(weight|bias)", r"\1_encoder.box_proj.\2"),
    (r"(obj|ocr)_feat_layer_norm\.(weight|bias)", r"\1_encoder.feat_norm.\2"),
    (r"(obj|ocr)_bbox_layer_norm\.(weight|bias)", r"\1_encoder.box_norm.\2"),
    (r"mmt\.prev_pred_embeddings\.position_embeddings\.weight", r"prev_pred.position.weight"),
    (r"mmt\.prev_pred_embeddings\.token_type_embeddings\.weight", r"prev_pred.token_type.weight"),
    (r"mmt\.prev_pred_embeddings\.(ans|ocr|emb)_layer_norm\.(weight|bias)", r"prev_pred.\1_norm.\2"),
    (r"ocr_ptr_net\.(query|key)\.(weight|bias)", r"ocr_ptr.\1.\2"),
    (r"classifier(?:\.module)?\.(weight|bias)", r"classifier.\1"),
)
_MMT = re.compile(r"mmt\.encoder\.(layer|normal_layers|spatial_layers)\.(\d+)\.(.+)")


def normal_layer_count(official: Mapping[str, torch.Tensor]) -> int:
    found = [int(m.group(2)) for k in official if (m := _MMT.fullmatch(k)) and m.group(1) != "spatial_layers"]
    return 1 + max(found) if found else 0


def spatial_layer_count(official: Mapping[str, torch.Tensor]) -> int:
    found = [int(m.group(2)) for k in official if (m := _MMT.fullmatch(k)) and m.group(1) == "spatial_layers"]
    return 1 + max(found) if found else 0


def convert(official: Mapping[str, torch.Tensor], layout: str) -> Conversion:
    """The official state dict in our names; a key the map does not know is refused (one line naming it)."""
    if layout not in LAYOUTS:
        raise ReproError(f"unknown M4C layout {layout!r}; known: {', '.join(LAYOUTS)}")
    what = f"{layout} checkpoint"
    normal = normal_layer_count(official)
    conversion = Conversion()
    for key, value in official.items():
        if key == "text_bert.embeddings.position_ids":
            if not torch.equal(value.flatten(), torch.arange(value.numel(), dtype=value.dtype)):
                raise ReproError(f"{what}: {key} is not 0..{value.numel() - 1}")
            conversion.drop(key, "positions 0..L-1 (a non-persistent buffer here)")
            continue
        layer = _MMT.fullmatch(key)
        if layer:
            kind, index, rest = layer.group(1), int(layer.group(2)), layer.group(3)
            if (kind == "layer") != (layout == "mmf"):
                raise ReproError(f"{what}: unexpected key {key} (not a {layout} MMT layer)")
            target = rename(rest, _LAYER)
            if target is None:
                raise ReproError(f"{what}: unexpected key {key} (no rule of the key map places it)")
            position = index + (normal if kind == "spatial_layers" else 0)
            conversion.put(key, f"mmt.{position}.{target}", value)
            continue
        target = rename(key, RULES)
        if target is None:
            raise ReproError(f"{what}: unexpected key {key} (no rule of the key map places it)")
        conversion.put(key, target, value)
    return conversion


def load_m4c(
    model: nn.Module, official: Mapping[str, torch.Tensor], layout: str, source: str | None = None
) -> KeyReport:
    """Load an official M4C / SA-M4C state dict into our model, everything or nothing."""
    return strict_load(model, convert(official, layout), source or f"{layout} checkpoint")


def read_checkpoint(path: str | Path, layout: str) -> dict[str, torch.Tensor]:
    if layout not in LAYOUTS:
        raise ReproError(f"unknown M4C layout {layout!r}; known: {', '.join(LAYOUTS)}")
    return read_state_dict(path, CHECKPOINT_KEYS[layout])


def sizes_from_state(
    official: Mapping[str, torch.Tensor], layout: str, base: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], int, list[str]]:
    """Our sizes, the answer count and the layer kinds read off the checkpoint's shapes. Not in the shapes: the
    heads of the normal layers (set to BERT-base's 12 where the width allows, else the largest divisor below), the
    spatial heads (one per relation: 12), the decoding steps (12) and the question length (20), none of which
    changes a tensor. `base`: the sizes the data decides (a run's: OCR tokens, FastText and PHOC widths, decoding
    steps, ...) in place of the paper's; the text BERT's feed-forward width is then read off the checkpoint too."""
    from repro.families.sa_m4c.model import PAPER_SIZES
    from repro.families.sa_m4c.relations import NUM_RELATIONS

    what = f"{layout} checkpoint"
    try:
        word = official["text_bert.embeddings.word_embeddings.weight"]
        positions = official["text_bert.embeddings.position_embeddings.weight"]
        d, obj_dim = official["linear_obj_feat_to_mmt_in.weight"].shape
        ocr_in = official["linear_ocr_feat_to_mmt_in.weight"].shape[1]
        classifier = official["classifier.module.weight" if layout == "mmf" else "classifier.weight"]
        layer0 = "mmt.encoder.layer.0" if layout == "mmf" else "mmt.encoder.normal_layers.0"
        ff = official[f"{layer0}.intermediate.dense.weight"].shape[0]
        dec_positions = official["mmt.prev_pred_embeddings.position_embeddings.weight"].shape[0]
    except KeyError as exc:
        raise ReproError(f"{what}: missing key {exc.args[0]}") from None
    text_layers = 1 + max(
        [int(k.split(".")[3]) for k in official if k.startswith("text_bert.encoder.layer.")], default=-1
    )
    s = dict(PAPER_SIZES if base is None else base)
    max_ocr = s["max_ocr_tokens"]
    ocr_app = ocr_in - s["fasttext_dim"] - s["phoc_dim"] - max_ocr
    if ocr_app < 1:
        raise ReproError(f"{what}: OCR input width {ocr_in} is below FastText + PHOC + order ({ocr_in - ocr_app})")
    heads = next(h for h in range(min(12, d), 0, -1) if d % h == 0)
    s.update(
        hidden_size=d,
        heads=heads,
        spatial_heads=NUM_RELATIONS,
        ff_size=ff,
        text_bert_layers=text_layers,
        bert_vocab=word.shape[0],
        text_bert_hidden=word.shape[1],
        text_bert_heads=TEXT_BERT["heads"],
        text_bert_ff=TEXT_BERT["ff"] if base is None else _text_bert_ff(official, what),
        text_bert_positions=positions.shape[0],
        obj_dim=obj_dim,
        ocr_app_dim=ocr_app,
        max_dec_positions=dec_positions,
    )
    kinds = ["normal"] * normal_layer_count(official) + ["spatial"] * spatial_layer_count(official)
    return s, classifier.shape[0], kinds


def _text_bert_ff(official: Mapping[str, torch.Tensor], what: str) -> int:
    try:
        return official["text_bert.encoder.layer.0.intermediate.dense.weight"].shape[0]
    except KeyError as exc:
        raise ReproError(f"{what}: missing key {exc.args[0]}") from None


def build_official(
    sizes: dict[str, Any], num_answers: int, kinds: list[str], layout: str, mix: str = "share3"
) -> nn.Module:
    """Our model with the values of the checkpoint's own code: fc7 layers for mmf (none in sam-textvqa), mmf's
    input LayerNorm eps, sam-textvqa's spatial mixing `mix` (its mix_list name: share3 or none)."""
    from repro.families.sa_m4c.model import M4C

    if layout not in LAYOUTS:
        raise ReproError(f"unknown M4C layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if mix not in MIXING:
        raise ReproError(f"unknown sam-textvqa mix_list value {mix!r}; known: {', '.join(MIXING)}")
    return M4C(
        sizes,
        num_answers,
        kinds,
        fc7=layout == "mmf",
        context=1,
        spatial_mixing=MIXING[mix],
        input_norm_eps=MMF_INPUT_NORM_EPS if layout == "mmf" else SAM_INPUT_NORM_EPS,
    )


def build_for(official: Mapping[str, torch.Tensor], layout: str, mix: str = "share3") -> nn.Module:
    """Our model at the checkpoint's sizes (see `sizes_from_state`)."""
    sizes, answers, kinds = sizes_from_state(official, layout)
    return build_official(sizes, answers, kinds, layout, mix)


def _get(cfg: Mapping[str, Any], path: str, default: Any = None) -> Any:
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            if default is None:
                raise ReproError(f"official config: no {path}")
            return default
        node = node[part]
    return node


def sizes_from_mmf_config(model_config: Mapping[str, Any], answers: int, decode_steps: int = 12):
    """Our sizes, answer count and layer kinds from mmf's `model_config.m4c` (its default values where a key is
    absent); `answers` is the fixed vocabulary (mmf's answer processor), the scores add `ocr_max_num` columns."""
    from repro.families.sa_m4c.model import PAPER_SIZES

    s = dict(PAPER_SIZES)
    d = _get(model_config, "mmt.hidden_size", 768)
    max_ocr = _get(model_config, "classifier.ocr_max_num", 50)
    ocr_app = _get(model_config, "ocr.mmt_in_dim", 3002) - s["fasttext_dim"] - s["phoc_dim"] - max_ocr
    s.update(
        hidden_size=d,
        heads=_get(model_config, "mmt.num_attention_heads", 12),
        ff_size=_get(model_config, "mmt.intermediate_size", 3072),
        text_bert_layers=_get(model_config, "text_bert.num_hidden_layers", 3),
        bert_vocab=_get(model_config, "text_bert.vocab_size", 30522),
        text_bert_hidden=TEXT_BERT["hidden"],
        text_bert_heads=TEXT_BERT["heads"],
        text_bert_ff=TEXT_BERT["ff"],
        text_bert_positions=_get(model_config, "text_bert.max_position_embeddings", 512),
        obj_dim=_get(model_config, "obj.mmt_in_dim", 2048),
        ocr_app_dim=ocr_app,
        max_ocr_tokens=max_ocr,
        decode_steps=decode_steps,
    )
    return s, answers, ["normal"] * _get(model_config, "mmt.num_hidden_layers", 4)


def sizes_from_sam_config(sa_m4c: Mapping[str, Any], text_bert: Mapping[str, Any], answers: int):
    """Our sizes, answer count and layer kinds from sam-textvqa's `SA-M4C` and `TextBERT` config sections."""
    from repro.families.sa_m4c.model import PAPER_SIZES

    kinds = [{"n": "normal", "s": "spatial"}.get(k) for k in _get(sa_m4c, "layer_type_list")]
    if None in kinds or kinds != sorted(kinds):  # "normal" < "spatial": every normal layer first
        raise ReproError(f"sam-textvqa layer_type_list {sa_m4c['layer_type_list']}: only normal layers then spatial")
    s = dict(PAPER_SIZES)
    max_ocr = _get(sa_m4c, "max_ocr_num", 50)
    s.update(
        hidden_size=_get(sa_m4c, "hidden_size", 768),
        heads=_get(sa_m4c, "num_attention_heads", 12),
        spatial_heads=_get(sa_m4c, "num_spatial_relations", 12),
        ff_size=_get(sa_m4c, "intermediate_size", 3072),
        text_bert_layers=_get(text_bert, "num_hidden_layers", 3),
        bert_vocab=_get(text_bert, "vocab_size", 30522),
        text_bert_hidden=TEXT_BERT["hidden"],
        text_bert_heads=TEXT_BERT["heads"],
        text_bert_ff=TEXT_BERT["ff"],
        text_bert_positions=_get(text_bert, "max_position_embeddings", 512),
        obj_dim=_get(sa_m4c, "obj_feature_size", 2048),
        ocr_app_dim=_get(sa_m4c, "ocr_feature_size", 3002) - s["fasttext_dim"] - s["phoc_dim"] - max_ocr,
        max_objects=_get(sa_m4c, "max_obj_num", 100),
        max_ocr_tokens=max_ocr,
        max_question_tokens=_get(sa_m4c, "max_seq_length", 20),
        decode_steps=_get(sa_m4c, "num_decoding_steps", 12),
    )
    return s, answers, kinds


def convert_checkpoint(path: Path, layout: str, option: str | None = None) -> tuple[nn.Module, KeyReport]:
    """`repro weights convert`: an mmf M4C or sam-textvqa SA-M4C checkpoint into the model its shapes describe
    (`option`: sam-textvqa's mix_list, share3 by default), with the key report."""
    official = read_checkpoint(path, layout)
    model = build_for(official, layout, option or "share3")
    return model, load_m4c(model, official, layout, str(path))
