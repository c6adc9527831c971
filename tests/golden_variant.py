"""Another golden-tensor set made from a shipped one with other weights and sizes, whose outputs are known exactly.

The official code cannot run here, so the second set is derived by symmetries of the official networks under which
their outputs are known without running them: hidden units, attention heads (and the dimensions within a head),
feed-forward units, classifier units and answers permuted; feed-forward and classifier layers widened by units whose
outgoing weights are zero; word, character and position tables given rows no input uses; weights the forward never
reads redrawn. Every tensor of the checkpoint changes (or moves), config.json says the new sizes, and outputs.pt holds
the old outputs permuted as the answers and hidden units were. A test that reads its sizes from the folder and its
weights from the checkpoint passes on it; one fixed to the shipped set does not.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

EXTRA_FFN, EXTRA_CLASSIFIER, EXTRA_ROWS = 16, 8, 6


def _load(folder: Path, name: str):
    return torch.load(folder / name, map_location="cpu", weights_only=True)


def _perm(n: int, g: torch.Generator) -> torch.Tensor:
    return torch.randperm(n, generator=g)


def _head_perm(heads: int, size: int, g: torch.Generator, within: torch.Tensor | None = None) -> torch.Tensor:
    """A permutation of heads x size units that moves whole heads (and the units within each head alike)."""
    order, within = _perm(heads, g), _perm(size, g) if within is None else within
    return (order[:, None] * size + within[None, :]).reshape(-1)


def _apply(t: torch.Tensor, dims: tuple, perms: dict[str, torch.Tensor]) -> torch.Tensor:
    for dim, space in enumerate(dims):
        if space is not None:
            t = t.index_select(dim, perms[space])
    return t


def _widen(t: torch.Tensor, dim: int, extra: int, g: torch.Generator, zero: bool) -> torch.Tensor:
    shape = list(t.shape)
    shape[dim] = extra
    added = torch.zeros(shape) if zero else torch.randn(shape, generator=g) * 0.05
    return torch.cat([t, added.to(t.dtype)], dim=dim)


def _write(dst: Path, src: Path, checkpoint, cfg: dict, outputs: dict) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, dst / "checkpoint.pth")
    torch.save(outputs, dst / "outputs.pt")
    shutil.copy(src / "inputs.pt", dst / "inputs.pt")
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))


def perturb_one_weight(folder: Path, key: str) -> None:
    """Change one number of a set's checkpoint and nothing else: its outputs are then not the network's."""
    checkpoint = _load(folder, "checkpoint.pth")
    state = checkpoint.get("state_dict", checkpoint)
    state[key] = state[key].clone()
    state[key].view(-1)[0] += 0.5
    torch.save(checkpoint, folder / "checkpoint.pth")


# --- VL-BERT (vlbert-vqa, vlbert-vqa-2fc, vlbert-pretrain) ----------------------------------------------------

_LAYER = r"vlbert\.encoder\.layer\.\d+\."
_TRANSFORM = r"(final_mlp\.0|vlbert\.mlm_head\.predictions\.transform|vlbert\.mvrc_head\.transform)"
# key -> the space of each dimension: h hidden, a attention (heads x head size), f feed-forward, c the 2fc
# classifier's hidden layer, ans answers; None: left as it is
VLBERT_SPACES: tuple[tuple[str, tuple], ...] = (
    (r"vlbert\.(word|position|token_type)_embeddings\.weight", (None, "h")),
    (r"vlbert\.end_embedding\.weight", (None, "h")),
    (r"(object_linguistic_embeddings|object_mask_word_embedding|aux_text_visual_embedding)\.weight", (None, "h")),
    (r"object_mask_visual_embedding\.weight", (None, None)),
    (r".*(LayerNorm|visual_ln_text|visual_ln_object)\.(weight|bias)", ("h",)),
    (r"image_feature_extractor\.obj_downsample\.1\.weight", ("h", None)),
    (r"image_feature_extractor\.obj_downsample\.1\.bias", ("h",)),
    (_LAYER + r"attention\.self\.(query|key|value)\.weight", ("a", "h")),
    (_LAYER + r"attention\.self\.(query|key|value)\.bias", ("a",)),
    (_LAYER + r"attention\.output\.dense\.weight", ("h", "a")),
    (_LAYER + r"intermediate\.dense\.weight", ("f", "h")),
    (_LAYER + r"intermediate\.dense\.bias", ("f",)),
    (_LAYER + r"output\.dense\.weight", ("h", "f")),
    (_LAYER + r"(attention\.output|output)\.dense\.bias", ("h",)),
    (_TRANSFORM + r"\.dense\.weight", ("h", "h")),
    (_TRANSFORM + r"\.dense\.bias", ("h",)),
    (r"final_mlp\.2\.weight", ("ans", "h")),
    (r"final_mlp\.2\.bias", ("ans",)),
    (r"final_mlp\.1\.weight", ("c", "h")),
    (r"final_mlp\.1\.bias", ("c",)),
    (r"final_mlp\.4\.weight", ("ans", "c")),
    (r"final_mlp\.4\.bias", ("ans",)),
    (r"vlbert\.mlm_head\.predictions\.decoder\.weight", (None, "h")),
    (r"vlbert\.mlm_head\.predictions\.bias", (None,)),
    (r"vlbert\.mvrc_head\.region_cls_pred\.weight", (None, "h")),
    (r"vlbert\.mvrc_head\.region_cls_pred\.bias", (None,)),
)


def _spaces(key: str, table) -> tuple:
    for pattern, dims in table:
        if re.fullmatch(pattern, key):
            return dims
    raise KeyError(f"no rule for {key}")


def vlbert(src: Path, dst: Path, seed: int) -> None:
    """A VL-BERT set (VQA or pre-training) with other weights and sizes, its outputs known exactly."""
    g = torch.Generator().manual_seed(seed)
    cfg = json.loads((src / "config.json").read_text())
    v, net = cfg["config"]["NETWORK.VLBERT"], cfg["config"]["NETWORK"]
    state = _load(src, "checkpoint.pth")["state_dict"]
    pretraining = any("mlm_head" in k for k in state)
    h, heads, ffn = v["hidden_size"], v["num_attention_heads"], v["intermediate_size"]
    perms = {"h": _perm(h, g), "a": _head_perm(heads, h // heads, g), "f": _perm(ffn, g)}
    if not pretraining:
        answers = cfg["config"]["DATASET"]["ANSWER_VOCAB_SIZE"]
        perms["ans"] = _perm(answers, g)
        if net["CLASSIFIER_TYPE"] == "2fc":
            perms["c"] = _perm(net["CLASSIFIER_HIDDEN_SIZE"], g)
    out = {}
    for key, value in state.items():
        name = key.removeprefix("module.")
        dims = _spaces(name, VLBERT_SPACES)
        t = _apply(value, dims, perms)
        if "f" in dims:  # wider feed-forward: new units whose outgoing weights are zero
            t = _widen(t, dims.index("f"), EXTRA_FFN, g, zero=dims[0] == "h")
        if "c" in dims:
            t = _widen(t, dims.index("c"), EXTRA_CLASSIFIER, g, zero=dims[0] == "ans")
        if name == "vlbert.position_embeddings.weight" or (name == "vlbert.word_embeddings.weight" and not pretraining):
            t = _widen(t, 0, EXTRA_ROWS, g, zero=False)  # rows no input reads
        out[key] = t
    v["intermediate_size"] = ffn + EXTRA_FFN
    v["max_position_embeddings"] += EXTRA_ROWS
    if not pretraining:
        v["vocab_size"] += EXTRA_ROWS
        if net["CLASSIFIER_TYPE"] == "2fc":
            net["CLASSIFIER_HIDDEN_SIZE"] += EXTRA_CLASSIFIER
    outputs = _load(src, "outputs.pt")
    for name, value in outputs.items():
        if name.startswith(("vlbert.encoder.layer.", "image_feature_extractor.obj_reps")):
            outputs[name] = value.index_select(-1, perms["h"])
        elif name in ("label_logits", "final_mlp"):
            outputs[name] = value.index_select(-1, perms["ans"])
    _write(dst, src, {"state_dict": out}, cfg, outputs)


# --- PSAC (psac-action, psac-frameqa) --------------------------------------------------------------------------

_VIDEO = r"vid_encoder\.layer_stack\.\d+\."
PSAC_SPACES: tuple[tuple[str, tuple], ...] = (
    (_VIDEO + r"slf_attn\.w_(qs|ks)", ("heads", None, "qk")),
    (_VIDEO + r"slf_attn\.w_vs", ("heads", None, "v")),
    (_VIDEO + r"slf_attn\.proj\.linear\.weight", (None, "heads_v")),
    (_VIDEO + r"pos_ffn\.w_1\.weight", ("f", None, None)),
    (_VIDEO + r"pos_ffn\.w_1\.bias", ("f",)),
    (_VIDEO + r"pos_ffn\.w_2\.weight", (None, "f", None)),
    (r"classifier\.main\.0\.weight_v", ("c", None)),
    (r"classifier\.main\.0\.bias", ("c",)),
    (r"classifier\.main\.3\.weight_v", ("ans", "c")),
    (r"classifier\.main\.3\.bias", ("ans",)),
    (r".*", ()),
)
PSAC_UNUSED = ("ques_encoder.model_enc_blks.", "ques_encoder.out.")


def psac(src: Path, dst: Path, seed: int) -> None:
    """A PSAC set with other weights and sizes, its outputs known exactly."""
    g = torch.Generator().manual_seed(seed)
    cfg = json.loads((src / "config.json").read_text())
    dev = cfg["deviations_from_released"]
    encoder = dev["build_temporalAtt.Encoder"]
    classifier = [float(x) for x in re.findall(r"[\d.]+", dev["SimpleClassifier"])]
    hidden, answers = int(classifier[1]), int(classifier[2])
    dk = encoder["d_k"]
    qk, vv = _perm(dk, g), _perm(encoder["d_v"], g)
    order = _perm(encoder["n_head"], g)
    perms = {
        "heads": order,
        "qk": qk,
        "v": vv,
        "heads_v": (order[:, None] * encoder["d_v"] + vv[None, :]).reshape(-1),
        "f": _perm(encoder["d_inner_hid"], g),
        "c": _perm(hidden, g),
        "ans": _perm(answers, g),
    }
    out = {}
    for key, value in _load(src, "checkpoint.pth").items():
        if key.startswith(PSAC_UNUSED):  # never read by the forward: any values
            out[key] = torch.randn(value.shape, generator=g)
            continue
        dims = _spaces(key, PSAC_SPACES)
        t = _apply(value, dims, perms)
        if "f" in dims:
            t = _widen(t, dims.index("f"), EXTRA_FFN, g, zero=dims.index("f") == 1)
        if "c" in dims:  # zero rows keep weight_v's norm (weight_norm dim=None); zero columns add nothing
            t = _widen(t, dims.index("c"), EXTRA_CLASSIFIER, g, zero=key.endswith("weight_v"))
        if key in ("ques_encoder.word_emb.weight", "ques_encoder.char_emb.weight"):
            t = _widen(t, 0, EXTRA_ROWS, g, zero=False)
        out[key] = t
    encoder["d_inner_hid"] += EXTRA_FFN
    dev["SimpleClassifier"] = dev["SimpleClassifier"].replace(f", {hidden},", f", {hidden + EXTRA_CLASSIFIER},")
    cfg["dictionary"]["ntoken"] += EXTRA_ROWS
    cfg["dictionary"]["c_ntoken"] += EXTRA_ROWS
    outputs = _load(src, "outputs.pt")
    if answers > 1:  # FrameQA's answers moved: its scores and logits with them
        for name in ("scores", "classifier"):
            outputs[name] = outputs[name].index_select(-1, perms["ans"])
    _write(dst, src, out, cfg, outputs)
