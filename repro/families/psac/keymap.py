"""PSAC checkpoints of the official code (lixiangpengcs/PSAC) into this family's official network, by an explicit key
map. The authors released no trained weights; their `train.py` saves the best epoch's `model.state_dict()` as a plain
state dict (`model.pth`), and that layout is what this map reads.

The map, official -> here (`network: official`):
- `vid_encoder.position_enc` -> `video_encoder.table`, `.pos_linear` -> `.pos_proj`;
  `vid_encoder.layer_stack.i.slf_attn.w_{qs,ks,vs}` (one (d_v, d_v/l) matrix per head) -> `video_encoder.blocks.i.
  w_{q,k,v}` (the heads side by side), `.proj.linear` -> `.w_o`, `.layer_norm.{a_2,b_2}` -> `.norm.{weight,bias}`,
  `.pos_ffn.w_{1,2}` -> `.w_{1,2}`, `.pos_ffn.layer_norm` -> `.ffn_norm`;
- `ques_encoder.{word,char}_emb` -> `question_encoder.{word,char}_emb`, `.emb.conv2d` -> `.char_conv`, `.emb.conv1d`
  -> `.fuse`, `.emb.high.{linear,gate}.i` -> `.highway.{transforms,gates}.i` (1x1 convolutions -> linear layers);
- `ques_encoder.emb_enc` -> `question_encoder.block`: `convs.i.{depthwise,pointwise}_conv` -> `{depthwise,
  pointwise}.i`, `norm_C.i` -> `conv_norms.i`, `self_att.query_conv` -> `w_q`, `self_att.mem_conv` split into `w_k`
  (first half of its outputs) and `w_v`, `self_att.bias` -> `unused_bias`, `FFN_{1,2}` -> `w_{1,2}`;
- `ques_encoder.vqatt.{w4V,w4Q,w4mlu,bias}` -> `co_attention.{w_v,w_q,w_vq,bias}`, `.vqatt.trans.{weight_g,weight_v}`
  -> `video_proj.parametrizations.weight.original{0,1}` (torch's maintained weight_norm), `.vq_resizer` ->
  `co_attention.w_f`; `classifier.main.{0,3}` -> `head.fc{1,2}` likewise;
- dropped: `ques_encoder.model_enc_blks.*` and `ques_encoder.out.*`, constructed by the code and never used in its
  forward.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from torch import nn

from repro.errors import ReproError
from repro.weights import Conversion, KeyReport, read_state_dict, strict_load

LAYOUTS = ("psac",)
WHAT = "PSAC checkpoint (lixiangpengcs/PSAC)"

Transform = Callable[[torch.Tensor], torch.Tensor]


def _heads(t: torch.Tensor) -> torch.Tensor:  # (l, d, d/l) -> (d, d): head i's W^T in rows i*d/l..
    return t.permute(0, 2, 1).reshape(-1, t.shape[1])


def _conv1x1(t: torch.Tensor) -> torch.Tensor:  # (out, in, 1) -> (out, in)
    return t.squeeze(-1)


def _flat(t: torch.Tensor) -> torch.Tensor:  # (d, 1) or (1, 1, d) -> (d,)
    return t.reshape(-1)


_V = r"vid_encoder\.layer_stack\.(\d+)\."
_QUESTION_BLOCK = "ques_encoder.emb_enc."
_Q = re.escape(_QUESTION_BLOCK)
_WN = {"weight_g": "parametrizations.weight.original0", "weight_v": "parametrizations.weight.original1"}
# (official pattern, our key, transform, what the transform does); the first that matches a key whole wins
RULES: tuple[tuple[str, str, Transform | None, str], ...] = (
    (r"vid_encoder\.position_enc\.weight", "video_encoder.table", None, ""),
    (r"vid_encoder\.pos_linear\.(weight|bias)", r"video_encoder.pos_proj.\1", None, ""),
    (_V + r"slf_attn\.w_(q|k|v)s", r"video_encoder.blocks.\1.w_\2.weight", _heads, "per-head (l, d, d/l) -> (d, d)"),
    (_V + r"slf_attn\.proj\.linear\.(weight|bias)", r"video_encoder.blocks.\1.w_o.\2", None, ""),
    (_V + r"slf_attn\.layer_norm\.a_2", r"video_encoder.blocks.\1.norm.weight", None, ""),
    (_V + r"slf_attn\.layer_norm\.b_2", r"video_encoder.blocks.\1.norm.bias", None, ""),
    (_V + r"pos_ffn\.w_(1|2)\.(weight|bias)", r"video_encoder.blocks.\1.w_\2.\3", None, ""),
    (_V + r"pos_ffn\.layer_norm\.a_2", r"video_encoder.blocks.\1.ffn_norm.weight", None, ""),
    (_V + r"pos_ffn\.layer_norm\.b_2", r"video_encoder.blocks.\1.ffn_norm.bias", None, ""),
    (r"ques_encoder\.(word|char)_emb\.weight", r"question_encoder.\1_emb.weight", None, ""),
    (r"ques_encoder\.emb\.conv2d\.(weight|bias)", r"question_encoder.char_conv.\1", None, ""),
    (r"ques_encoder\.emb\.conv1d\.out\.weight", "question_encoder.fuse.weight", None, ""),
    (
        r"ques_encoder\.emb\.high\.linear\.(\d+)\.out\.weight",
        r"question_encoder.highway.transforms.\1.weight",
        _conv1x1,
        "1x1 convolution -> linear",
    ),  # fmt: skip
    (r"ques_encoder\.emb\.high\.linear\.(\d+)\.out\.bias", r"question_encoder.highway.transforms.\1.bias", None, ""),
    (
        r"ques_encoder\.emb\.high\.gate\.(\d+)\.out\.weight",
        r"question_encoder.highway.gates.\1.weight",
        _conv1x1,
        "1x1 convolution -> linear",
    ),  # fmt: skip
    (r"ques_encoder\.emb\.high\.gate\.(\d+)\.out\.bias", r"question_encoder.highway.gates.\1.bias", None, ""),
    (_Q + r"convs\.(\d+)\.(depthwise|pointwise)_conv\.(weight|bias)", r"question_encoder.block.\2.\1.\3", None, ""),
    (_Q + r"norm_C\.(\d+)\.(weight|bias)", r"question_encoder.block.conv_norms.\1.\2", None, ""),
    (_Q + r"norm_(1|2)\.(weight|bias)", r"question_encoder.block.norm_\1.\2", None, ""),
    (
        _Q + r"self_att\.query_conv\.out\.weight",
        "question_encoder.block.w_q.weight",
        _conv1x1,
        "1x1 convolution -> linear",
    ),  # fmt: skip
    (_Q + r"self_att\.bias", "question_encoder.block.unused_bias", None, ""),
    (_Q + r"FFN_(1|2)\.out\.weight", r"question_encoder.block.w_\1.weight", _conv1x1, "1x1 convolution -> linear"),
    (_Q + r"FFN_(1|2)\.out\.bias", r"question_encoder.block.w_\1.bias", None, ""),
    (r"ques_encoder\.vqatt\.w4V", "co_attention.w_v", _flat, "(d, 1) -> (d,)"),
    (r"ques_encoder\.vqatt\.w4Q", "co_attention.w_q", _flat, "(d, 1) -> (d,)"),
    (r"ques_encoder\.vqatt\.w4mlu", "co_attention.w_vq", _flat, "(1, 1, d) -> (d,)"),
    (r"ques_encoder\.vqatt\.bias", "co_attention.bias", None, ""),
    (r"ques_encoder\.vqatt\.trans\.(weight_g|weight_v)", "video_proj.{wn}", None, ""),
    (r"ques_encoder\.vqatt\.trans\.bias", "video_proj.bias", None, ""),
    (r"ques_encoder\.vq_resizer\.out\.weight", "co_attention.w_f.weight", _conv1x1, "1x1 convolution -> linear"),
    (r"classifier\.main\.0\.(weight_g|weight_v)", "head.fc1.{wn}", None, ""),
    (r"classifier\.main\.3\.(weight_g|weight_v)", "head.fc2.{wn}", None, ""),
    (r"classifier\.main\.0\.bias", "head.fc1.bias", None, ""),
    (r"classifier\.main\.3\.bias", "head.fc2.bias", None, ""),
)
MEM_CONV = _Q + r"self_att\.mem_conv\.out\.weight"  # (2d, d, 1): W^K in the first d outputs, W^V in the rest
UNUSED = (r"ques_encoder\.model_enc_blks\..+", r"ques_encoder\.out\..+")


def convert(official: Mapping[str, torch.Tensor]) -> Conversion:
    """The official state dict in our names; a key no rule places and the code does not leave unused is refused."""
    conversion = Conversion()
    for key, value in official.items():
        if any(re.fullmatch(p, key) for p in UNUSED):
            conversion.drop(key, "constructed by the official code, never used in its forward")
            continue
        if re.fullmatch(MEM_CONV, key):
            d = value.shape[0] // 2
            conversion.put(key, "question_encoder.block.w_k.weight", value[:d, :, 0], "first half of (2d, d, 1)")
            conversion.put(key, "question_encoder.block.w_v.weight", value[d:, :, 0], "second half of (2d, d, 1)")
            continue
        for pattern, target, transform, change in RULES:
            match = re.fullmatch(pattern, key)
            if match is None:
                continue
            name = match.expand(target)
            if "{wn}" in name:
                name = name.format(wn=_WN[match.group(1)])
            conversion.put(key, name, transform(value) if transform else value, change)
            break
        else:
            raise ReproError(f"{WHAT}: unexpected key {key} (no rule of the key map places it)")
    return conversion


def load_psac(model: nn.Module, official: Mapping[str, torch.Tensor], source: str = WHAT) -> KeyReport:
    """Load an official PSAC state dict into our official-network PSAC, everything or nothing."""
    if getattr(model, "network", None) != "official":
        raise ReproError(f"{source}: the official code's weights load into the official network (network: official)")
    return strict_load(model, convert(official), source)


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    return read_state_dict(path)


def _count(official: Mapping[str, torch.Tensor], prefix: str) -> int:
    found = {int(m.group(1)) for k in official if (m := re.match(re.escape(prefix) + r"(\d+)\.", k))}
    return 1 + max(found) if found else 0


def sizes_from_state(official: Mapping[str, torch.Tensor]) -> tuple[dict, dict]:
    """(config, build arguments) of the official network a checkpoint's shapes describe. The question block's head
    count is not in the shapes: the code's Nh, 8, which is also its video encoder's."""
    try:
        frames, pos_dim = official["vid_encoder.position_enc.weight"].shape
        video_dim = official["vid_encoder.pos_linear.weight"].shape[0]
        heads = official["vid_encoder.layer_stack.0.slf_attn.w_qs"].shape[0]
        vpsa_ffn = official["vid_encoder.layer_stack.0.pos_ffn.w_1.weight"].shape[0]
        num_words, word_dim = official["ques_encoder.word_emb.weight"].shape
        num_chars, char_dim = official["ques_encoder.char_emb.weight"].shape
        hidden, _, _, char_kernel = official["ques_encoder.emb.conv2d.weight"].shape
        ds_kernel = official[_QUESTION_BLOCK + "convs.0.depthwise_conv.weight"].shape[-1]
        qpsa_ffn = official[_QUESTION_BLOCK + "FFN_1.out.weight"].shape[0]
        classifier_hidden = official["classifier.main.0.weight_v"].shape[0]
        answers = official["classifier.main.3.weight_v"].shape[0]
    except KeyError as exc:
        raise ReproError(f"{WHAT}: missing key {exc.args[0]}") from None
    sizes = {
        "video_dim": video_dim,
        "frames": frames,
        "heads": heads,
        "vpsa_ffn": vpsa_ffn,
        "video_pos_dim": pos_dim,
        "hidden": hidden,
        "word_dim": word_dim,
        "char_dim": char_dim,
        "char_kernel": char_kernel,
        "highway_layers": _count(official, "ques_encoder.emb.high.linear."),
        "ds_convs": _count(official, "ques_encoder.emb_enc.convs."),
        "ds_kernel": ds_kernel,
        "qpsa_ffn": qpsa_ffn,
        "classifier_hidden": classifier_hidden,
    }
    config = {
        "arch": "psac",
        "network": "official",
        "video_features": "c3d" if video_dim == 4096 else "resnet",
        "vpsa_layers": _count(official, "vid_encoder.layer_stack."),
        "num_frames": frames,
    }
    # FrameQA has an answer vocabulary; Action, Transition and Count one output and the same network
    build = {"task": "frameqa" if answers > 1 else "action", "num_words": num_words, "num_chars": num_chars}
    return {"config": config, "sizes": sizes}, {**build, "num_answers": answers}


def build_for(official: Mapping[str, torch.Tensor]) -> nn.Module:
    """Our official-network PSAC at the checkpoint's sizes."""
    from repro.families.psac.build import build_model

    shapes, args = sizes_from_state(official)
    return build_model(shapes["config"], shapes["sizes"], **args)


def convert_checkpoint(path: Path, layout: str, option: str | None = None) -> tuple[nn.Module, KeyReport]:
    """`repro weights convert`: an official PSAC state dict into the network its shapes describe, with the key
    report."""
    official = read_checkpoint(path)
    model = build_for(official)
    return model, load_psac(model, official, str(path))
