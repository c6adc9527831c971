"""VL-BERT's VQA checkpoints (jackroos/VL-BERT, `vqa/modules/resnet_vlbert_for_vqa.py` `ResNetVLBERT` with
`common/visual_linguistic_bert.py` `VisualLinguisticBert`, precomputed bottom-up features) into this family's
VL-BERT (`vlbert.py`), by an explicit key map.

The checkpoint is `{"state_dict": ResNetVLBERT.state_dict(), "optimizer": ...}`, as VL-BERT's `Checkpoint`
callback saves it and `vqa/test.py` reads it; trained under (Distributed)DataParallel every key starts with
`module.`, which is taken off, as VL-BERT's `smart_load_model_state_dict` does. The map, VL-BERT -> here:
- `vlbert.word_embeddings`, `vlbert.position_embeddings` -> `embeddings.*`; `vlbert.embedding_LayerNorm` ->
  `embeddings.LayerNorm`; `vlbert.encoder.layer.i.*` -> `layers.i.*` (the same BERT layer names);
- `vlbert.token_type_embeddings` (3 segments: question, answer, objects) -> `embeddings.token_type_embeddings`
  (2: text, image): rows 0 and 2 (reshaped);
- `object_linguistic_embeddings` (the one linguistic embedding of every object element) -> the [IMG] row of
  `embeddings.word_embeddings` (the word table is reshaped: that row replaced);
- `image_feature_extractor.obj_downsample.1` (Linear over [RoI feature; box embedding], 2 x 2048 -> hidden) ->
  `visual`; `vlbert.visual_ln_object` -> `visual_norm`;
- `final_mlp.1`, `final_mlp.4` (the "2fc" classifier, VL-BERT's default) -> `head.1`, `head.4`.
Dropped, each with its reason in the key report: `vlbert.end_embedding` (no [END] element after the regions
here), `vlbert.visual_ln_text` (the text elements share `visual_norm` here), `vlbert.pooler.*` (unused by the
VQA head). Refused (one line): the "mlm" and "1fc" classifiers, `visual_ln: false` scales, a separate visual
projection (`visual_size != hidden_size`), the end-to-end Fast R-CNN's weights, any other key.

Every tensor keeps its values, but this project's VL-BERT is not the network VL-BERT's code defines: besides
the dropped parts above, the answer segment (row 1) has no counterpart (the [MASK] and its [SEP] take the text
segment here), the box embedding differs (VL-BERT: sin/cos of 100 x (centre, size) / image size at 256
frequencies of base 1000 per coordinate; here `positional.sinusoid_embedding` of the corners), VL-BERT applies a
ReLU after `obj_downsample`, and its text elements take the whole-image box's RoI feature (here the mean of the
region features). Outputs of a loaded checkpoint therefore differ from VL-BERT's own.
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

LAYOUTS = ("vl-bert",)
CHECKPOINT_KEYS = ("state_dict",)
WHAT = "VL-BERT checkpoint"
SEGMENTS = 3  # VisualLinguisticBert's type_vocab_size: 0 question, 1 answer ([MASK] and its [SEP]), 2 objects
ROI_FEATURE_DIM = 2048  # fast_rcnn.py: obj_downsample takes [2048-d RoI feature; 2048-d box embedding]

_LAYER = r"(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)"
RULES: tuple[tuple[str, str], ...] = (
    (r"vlbert\.position_embeddings\.weight", r"embeddings.position_embeddings.weight"),
    (r"vlbert\.embedding_LayerNorm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (rf"vlbert\.encoder\.layer\.(\d+)\.{_LAYER}\.(weight|bias)", r"layers.\1.\2.\4"),
    (
        r"vlbert\.encoder\.layer\.(\d+)\.(attention\.output|output)\.LayerNorm\.(weight|bias)",
        r"layers.\1.\2.LayerNorm.\3",
    ),
    (r"image_feature_extractor\.obj_downsample\.1\.(weight|bias)", r"visual.\1"),
    (r"vlbert\.visual_ln_object\.(weight|bias)", r"visual_norm.\1"),
    (r"final_mlp\.1\.(weight|bias)", r"head.1.\1"),
    (r"final_mlp\.4\.(weight|bias)", r"head.4.\1"),
)
DROPPED: tuple[tuple[str, str], ...] = (
    (r"vlbert\.end_embedding\.weight", "no [END] element after the regions here"),
    (r"vlbert\.visual_ln_text\.(weight|bias)", "the text elements share visual_norm (the regions' LayerNorm) here"),
    (r"vlbert\.pooler\.dense\.(weight|bias)", "the pooler is not used by the VQA head"),
)
REFUSED: tuple[tuple[str, str], ...] = (
    (r"final_mlp\.0\..*", "the 'mlm' classifier (final_mlp.0 = BertPredictionHeadTransform); only '2fc' maps here"),
    (r"vlbert\.visual_scale_(text|object)", "visual_ln false (a learnt scale instead of the visual LayerNorm)"),
    (r"vlbert\.visual_1x1_(text|object)\..*", "visual_size != hidden_size (a separate visual projection)"),
    (r"image_feature_extractor\.(?!obj_downsample\.).*", "the end-to-end Fast R-CNN (here features are precomputed)"),
)
WORDS = "vlbert.word_embeddings.weight"
SEGMENT_TABLE = "vlbert.token_type_embeddings.weight"
OBJECT_WORD = "object_linguistic_embeddings.weight"


def _without_module_prefix(official: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if official and all(k.startswith("module.") for k in official):
        return {k[len("module.") :]: v for k, v in official.items()}
    return dict(official)


def convert(official: Mapping[str, torch.Tensor], img_id: int) -> Conversion:
    """The conversion of a VL-BERT VQA state dict; `img_id` is the row of our word table the region elements use."""
    official = _without_module_prefix(official)
    for key in official:
        for pattern, why in REFUSED:
            if re.fullmatch(pattern, key):
                raise ReproError(f"{WHAT}: {key}: {why} has no counterpart in this VL-BERT")
    if "final_mlp.1.weight" in official and "final_mlp.4.weight" not in official:
        raise ReproError(f"{WHAT}: final_mlp is the '1fc' classifier; only '2fc' (final_mlp.1, final_mlp.4) maps here")
    for needed in (WORDS, SEGMENT_TABLE, OBJECT_WORD):
        if needed not in official:
            raise ReproError(f"{WHAT}: missing key {needed}")
    conversion = Conversion()
    for key, value in official.items():
        if key == WORDS:
            words, obj = value.clone(), official[OBJECT_WORD]
            if obj.shape != (1, words.shape[1]) or not 0 <= img_id < words.shape[0]:
                raise ReproError(
                    f"{WHAT}: {OBJECT_WORD} has shape {tuple(obj.shape)}, the word table {tuple(words.shape)}"
                )
            words[img_id] = obj[0]
            conversion.put(key, "embeddings.word_embeddings.weight", words, f"row {img_id} ([IMG]) <- {OBJECT_WORD}")
        elif key == OBJECT_WORD:
            conversion.drop(key, f"placed as row {img_id} ([IMG]) of embeddings.word_embeddings.weight")
        elif key == SEGMENT_TABLE:
            if value.shape[0] != SEGMENTS:
                raise ReproError(f"{WHAT}: {key} has {value.shape[0]} segments, VL-BERT's VQA model {SEGMENTS}")
            conversion.put(
                key,
                "embeddings.token_type_embeddings.weight",
                value[[0, 2]],
                "rows 0 (question) and 2 (objects) of 3; row 1 (answer) has no segment here",
            )
        elif (target := rename(key, RULES)) is not None:
            conversion.put(key, target, value)
        elif (why := next((w for p, w in DROPPED if re.fullmatch(p, key)), None)) is not None:
            conversion.drop(key, why)
        else:
            raise ReproError(f"{WHAT}: unexpected key {key} (no rule of the key map places it)")
    return conversion


def load_vlbert(model: nn.Module, official: Mapping[str, torch.Tensor], source: str = WHAT) -> KeyReport:
    """Load a VL-BERT VQA state dict into our VL-BERT (built without PA), everything or nothing."""
    if getattr(model, "positional", ()):
        raise ReproError(f"{source}: VL-BERT's released layout is VL-BERT without PA")
    return strict_load(model, convert(official, model.img_id), source)


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    return read_state_dict(path, CHECKPOINT_KEYS)


def sizes_from_state(official: Mapping[str, torch.Tensor], heads: int = 12) -> tuple[dict[str, Any], int]:
    """Our VL-BERT sizes (and the answer count) read off a checkpoint's shapes; the head count is not in the shapes
    (VL-BERT_BASE: 12), and `obj_downsample`'s input is split evenly between the RoI feature and the box embedding
    (VL-BERT: 2048 + 2048)."""
    official = _without_module_prefix(official)
    try:
        vocab, hidden = official[WORDS].shape
        positions = official["vlbert.position_embeddings.weight"].shape[0]
        ffn = official["vlbert.encoder.layer.0.intermediate.dense.weight"].shape[0]
        visual_in = official["image_feature_extractor.obj_downsample.1.weight"].shape[1]
        head_hidden = official["final_mlp.1.weight"].shape[0]
        answers = official["final_mlp.4.weight"].shape[0]
    except KeyError as exc:
        raise ReproError(f"{WHAT}: missing key {exc.args[0]}") from None
    layers = 1 + max(int(k.split(".")[3]) for k in official if k.startswith("vlbert.encoder.layer."))
    sizes = {
        "vocab": vocab,
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "ffn": ffn,
        "max_positions": positions,
        "feature_dim": visual_in - visual_in // 2,
        "visual_geometry_dim": visual_in // 2,
        "head_hidden": head_hidden,
    }
    return sizes, answers


def build_for(official: Mapping[str, torch.Tensor], heads: int = 12) -> nn.Module:
    """Our VL-BERT (WordPiece ids, no PA) at the checkpoint's sizes."""
    from repro.families.mcan_pa.build import build_model

    sizes, answers = sizes_from_state(official, heads)
    return build_model({"arch": "vl-bert", "pretrained": False}, num_tokens=2, num_answers=answers, sizes=sizes)


def convert_checkpoint(path: Path, layout: str, option: str | None = None) -> tuple[nn.Module, KeyReport]:
    """`repro weights convert`: a VL-BERT VQA checkpoint into the VL-BERT its shapes describe, with the key report."""
    official = read_checkpoint(path)
    model = build_for(official)
    return model, load_vlbert(model, official, str(path))
