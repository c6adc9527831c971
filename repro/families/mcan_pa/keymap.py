"""MCAN's released checkpoints (MILVLG/mcan-vqa, `core/model/net.py` `Net`; openvqa's `mcan` names its modules
the same way) into this family's MCAN, by an explicit key map. A plain renaming suffices: every tensor keeps its
shape, nothing is split or dropped, nothing of ours is left out (MCAN without PE/PA).

The checkpoint is `{"state_dict": Net.state_dict(), ...}`, as mcan-vqa's `core/exec.py` saves it and its test mode
reads it (a plain state dict is accepted too). The map, mcan-vqa -> here:
- `embedding`, `lstm` kept; `img_feat_linear` -> `img_proj`;
- `backbone.enc_list.i.mhatt.linear_{q,k,v,merge}` -> `encoder.i.att.{q,k,v,out}`;
  `backbone.dec_list.i.mhatt1` -> `decoder.i.self_att`, `.mhatt2` -> `decoder.i.guided_att`;
- `ffn.mlp.fc.linear` -> `ffn.net.0`, `ffn.mlp.linear` -> `ffn.net.3`; `normN.a_2/b_2` -> `normN.weight/bias`;
- `attflat_{lang,img}.mlp.fc.linear` -> `flat_{lang,img}.mlp.0`, `.mlp.linear` -> `.mlp.3`, `.linear_merge` ->
  `.merge`; `proj_norm` -> `norm`; `proj` -> `classifier` (the sigmoid of `Net.forward` is in our loss).

FLAT_GLIMPSES must be 1 (the released models' value: `linear_merge` then takes HIDDEN_SIZE inputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from repro.errors import ReproError
from repro.weights import Conversion, KeyReport, convert_by_rules, read_state_dict, strict_load

LAYOUTS = ("mcan-vqa",)
CHECKPOINT_KEYS = ("state_dict",)

_ATT = r"linear_(q|k|v)\.(weight|bias)"
RULES: tuple[tuple[str, str], ...] = (
    (r"embedding\.weight", r"embedding.weight"),
    (r"lstm\.((weight|bias)_(ih|hh)_l0)", r"lstm.\1"),
    (r"img_feat_linear\.(weight|bias)", r"img_proj.\1"),
    (rf"backbone\.enc_list\.(\d+)\.mhatt\.{_ATT}", r"encoder.\1.att.\2.\3"),
    (r"backbone\.enc_list\.(\d+)\.mhatt\.linear_merge\.(weight|bias)", r"encoder.\1.att.out.\2"),
    (rf"backbone\.dec_list\.(\d+)\.mhatt1\.{_ATT}", r"decoder.\1.self_att.\2.\3"),
    (r"backbone\.dec_list\.(\d+)\.mhatt1\.linear_merge\.(weight|bias)", r"decoder.\1.self_att.out.\2"),
    (rf"backbone\.dec_list\.(\d+)\.mhatt2\.{_ATT}", r"decoder.\1.guided_att.\2.\3"),
    (r"backbone\.dec_list\.(\d+)\.mhatt2\.linear_merge\.(weight|bias)", r"decoder.\1.guided_att.out.\2"),
    (r"backbone\.(enc|dec)_list\.(\d+)\.ffn\.mlp\.fc\.linear\.(weight|bias)", r"\1oder.\2.ffn.net.0.\3"),
    (r"backbone\.(enc|dec)_list\.(\d+)\.ffn\.mlp\.linear\.(weight|bias)", r"\1oder.\2.ffn.net.3.\3"),
    (r"backbone\.(enc|dec)_list\.(\d+)\.(norm\d)\.a_2", r"\1oder.\2.\3.weight"),
    (r"backbone\.(enc|dec)_list\.(\d+)\.(norm\d)\.b_2", r"\1oder.\2.\3.bias"),
    (r"attflat_(lang|img)\.mlp\.fc\.linear\.(weight|bias)", r"flat_\1.mlp.0.\2"),
    (r"attflat_(lang|img)\.mlp\.linear\.(weight|bias)", r"flat_\1.mlp.3.\2"),
    (r"attflat_(lang|img)\.linear_merge\.(weight|bias)", r"flat_\1.merge.\2"),
    (r"proj_norm\.a_2", r"norm.weight"),
    (r"proj_norm\.b_2", r"norm.bias"),
    (r"proj\.(weight|bias)", r"classifier.\1"),
)


def convert(official: Mapping[str, torch.Tensor]) -> Conversion:
    return convert_by_rules(official, RULES, "mcan-vqa checkpoint")


def load_mcan(model: nn.Module, official: Mapping[str, torch.Tensor], source: str = "mcan-vqa checkpoint") -> KeyReport:
    """Load an mcan-vqa state dict into our MCAN (built without PE/PA), everything or nothing."""
    return strict_load(model, convert(official), source)


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    return read_state_dict(path, CHECKPOINT_KEYS)


def sizes_from_official(cfg: Mapping[str, Any], max_boxes: int | None = None) -> dict[str, Any]:
    """Our MCAN sizes from mcan-vqa's config names (`__C`: LAYER, HIDDEN_SIZE, ...)."""
    if cfg.get("FLAT_GLIMPSES", 1) != 1:
        raise ReproError(f"mcan-vqa FLAT_GLIMPSES {cfg['FLAT_GLIMPSES']}: only 1 (the released models) maps here")
    try:
        sizes = {
            "d_model": cfg["HIDDEN_SIZE"],
            "layers": cfg["LAYER"],
            "heads": cfg["MULTI_HEAD"],
            "ffn": cfg["FF_SIZE"],
            "flat_out": cfg["FLAT_OUT_SIZE"],
            "flat_mlp": cfg["FLAT_MLP_SIZE"],
            "embed_dim": cfg["WORD_EMBED_SIZE"],
            "feature_dim": cfg["IMG_FEAT_SIZE"],
            "max_tokens": cfg.get("MAX_TOKEN", 14),
            "max_boxes": cfg.get("IMG_FEAT_PAD_SIZE", max_boxes or 100),
            "dropout": cfg.get("DROPOUT_R", 0.1),
        }
    except KeyError as exc:
        raise ReproError(f"mcan-vqa config: no {exc.args[0]}") from None
    return sizes


def sizes_from_state(official: Mapping[str, torch.Tensor], heads: int = 8) -> tuple[dict[str, Any], int, int]:
    """Our MCAN sizes (and the token and answer counts) read off a checkpoint's shapes; the head count is not in
    the shapes (MCAN-small and -large: 8)."""
    try:
        tokens, embed = official["embedding.weight"].shape
        d, feature = official["img_feat_linear.weight"].shape
        answers, flat_out = official["proj.weight"].shape
        ffn = official["backbone.enc_list.0.ffn.mlp.fc.linear.weight"].shape[0]
        flat_mlp = official["attflat_lang.mlp.fc.linear.weight"].shape[0]
    except KeyError as exc:
        raise ReproError(f"mcan-vqa checkpoint: missing key {exc.args[0]}") from None
    layers = 1 + max(int(k.split(".")[2]) for k in official if k.startswith("backbone.enc_list."))
    sizes = {
        "d_model": d,
        "layers": layers,
        "heads": heads,
        "ffn": ffn,
        "flat_out": flat_out,
        "flat_mlp": flat_mlp,
        "embed_dim": embed,
        "feature_dim": feature,
    }
    return sizes, tokens, answers


def build_for(official: Mapping[str, torch.Tensor], heads: int = 8) -> nn.Module:
    """Our MCAN at the checkpoint's sizes."""
    from repro.families.mcan_pa.build import build_model

    sizes, tokens, answers = sizes_from_state(official, heads)
    return build_model({"arch": "mcan"}, num_tokens=tokens, num_answers=answers, sizes=sizes)


def convert_checkpoint(path: Path, layout: str, option: str | None = None) -> tuple[nn.Module, KeyReport]:
    """`repro weights convert`: an mcan-vqa checkpoint into the MCAN its shapes describe, with the key report."""
    official = read_checkpoint(path)
    model = build_for(official)
    return model, load_mcan(model, official, str(path))
