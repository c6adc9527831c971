"""VL-BERT's checkpoints (jackroos/VL-BERT) into this family's VL-BERT (`vlbert.py`, `vlbert_pretraining.py`), by an
explicit key map, loaded strictly with a key report.

Two layouts, both `{"state_dict": ...}` as VL-BERT's `Checkpoint` callback saves them (under (Distributed)DataParallel
every key starts with `module.`, which is taken off, as VL-BERT's `smart_load_model_state_dict` does):
- VQA (`vqa/modules/resnet_vlbert_for_vqa.py` `ResNetVLBERT`), with the "mlm" classifier (both released VQA
  configs) or the "2fc" one (the code's default); "1fc" is refused;
- pre-training (`pretrain/modules/resnet_vlbert_for_pretraining_multitask.py`, the released
  `vl-bert-{base,large}-prec.model`), into the pre-training model, or into the VQA model as VL-BERT's VQA
  fine-tuning starts from it (`NETWORK.PARTIAL_PRETRAIN` with `PARTIAL_PRETRAIN_PREFIX_CHANGES`: the MLM head's
  transform becomes the "mlm" classifier's `final_mlp.0`; the answer layer is not in the file).

The map, VL-BERT -> here (every tensor as it is; the MLM decoder is tied to the word embeddings on both sides):
- `vlbert.{word,position,token_type}_embeddings` -> `embeddings.*`, `vlbert.embedding_LayerNorm` ->
  `embeddings.LayerNorm`, `vlbert.end_embedding` -> `end_embedding`, `vlbert.visual_ln_{text,object}` ->
  `visual_norm_{text,object}`, `vlbert.encoder.layer.i.*` -> `layers.i.*` (BERT's layer names on both sides);
- `image_feature_extractor.obj_downsample.1` -> `regions.project.1`; `object_linguistic_embeddings` ->
  `object_embedding`;
- `final_mlp.{0,2}` ("mlm") or `final_mlp.{1,4}` ("2fc") -> `head.*` at the same indices;
- pre-training: `vlbert.mlm_head.predictions.{transform.*, decoder.weight}` -> `mlm.predictions.*`,
  `vlbert.mlm_head.predictions.bias` -> `mlm.predictions.bias` (= the decoder's bias),
  `vlbert.mvrc_head.transform.dense` -> `mvrc.0`, `.region_cls_pred` -> `mvrc.2`,
  `object_mask_visual_embedding` -> `masked_feature`, `object_mask_word_embedding` -> `masked_object_word`,
  `aux_text_visual_embedding` -> `text_only_visual`.
Refused (one line): learnt visual scales (`visual_ln: false`), a separate visual projection (`visual_size !=
hidden_size`), the end-to-end Fast R-CNN's weights (the `-e2e` files: features are precomputed here).

The head count is not in the shapes: VL-BERT_BASE's 12 and _LARGE's 16 are known by their widths.
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
GEOMETRY_DIM = 2048  # fast_rcnn.py: obj_downsample takes [4 x 2 x 256 box embedding; RoI feature]
HEADS = {768: 12, 1024: 16}  # VL-BERT_BASE, VL-BERT_LARGE (cfgs/*/base_*.yaml, large_*.yaml)

_LAYER = (
    r"(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense"
    r"|attention\.output\.LayerNorm|output\.LayerNorm)\.(weight|bias)"
)
BACKBONE: tuple[tuple[str, str], ...] = (
    (r"vlbert\.(word|position|token_type)_embeddings\.weight", r"embeddings.\1_embeddings.weight"),
    (r"vlbert\.embedding_LayerNorm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (r"vlbert\.end_embedding\.weight", "end_embedding.weight"),
    (r"vlbert\.visual_ln_(text|object)\.(weight|bias)", r"visual_norm_\1.\2"),
    (rf"vlbert\.encoder\.layer\.(\d+)\.{_LAYER}", r"layers.\1.\2.\4"),
    (r"image_feature_extractor\.obj_downsample\.1\.(weight|bias)", r"regions.project.1.\1"),
    (r"object_linguistic_embeddings\.weight", "object_embedding.weight"),
)
CLASSIFIER: tuple[tuple[str, str], ...] = (
    (r"final_mlp\.0\.(dense|LayerNorm)\.(weight|bias)", r"head.0.\1.\2"),  # mlm: the transform
    (r"final_mlp\.(1|2|4)\.(weight|bias)", r"head.\1.\2"),  # mlm: 2; 2fc: 1 and 4
)
_MLM = r"vlbert\.mlm_head\.predictions\."
PRETRAINING: tuple[tuple[str, str], ...] = (
    (_MLM + r"transform\.(dense|LayerNorm)\.(weight|bias)", r"mlm.predictions.transform.\1.\2"),
    (_MLM + r"decoder\.weight", "mlm.predictions.decoder.weight"),
    (r"vlbert\.mvrc_head\.transform\.dense\.(weight|bias)", r"mvrc.0.\1"),
    (r"vlbert\.mvrc_head\.region_cls_pred\.(weight|bias)", r"mvrc.2.\1"),
    (r"object_mask_visual_embedding\.weight", "masked_feature.weight"),
    (r"object_mask_word_embedding\.weight", "masked_object_word.weight"),
    (r"aux_text_visual_embedding\.weight", "text_only_visual.weight"),
)
MLM_BIAS = "vlbert.mlm_head.predictions.bias"
# what VL-BERT's VQA fine-tuning leaves unused of a pre-training file (its partial load ignores them)
NOT_FOR_VQA: tuple[tuple[str, str], ...] = (
    (_MLM + r"(decoder\.weight|bias)", "the MLM decoder (tied to the word embeddings): pre-training only"),
    (r"vlbert\.mvrc_head\..*", "the masked RoI classification head: pre-training only"),
    (r"object_mask_(visual|word)_embedding\.weight", "the masked region's feature and word: pre-training only"),
    (r"aux_text_visual_embedding\.weight", "the text-only rows' visual embedding: pre-training only"),
    (r"vlbert\.relationsip_head\..*", "the caption-image relationship head: pre-training only"),
)
DROPPED: tuple[tuple[str, str], ...] = (
    (r"vlbert\.pooler\.dense\.(weight|bias)", "the pooler: VL-BERT's VQA head reads [MASK], not the pooler"),
)
REFUSED: tuple[tuple[str, str], ...] = (
    (r"vlbert\.visual_scale_(text|object)", "visual_ln false (a learnt scale in place of the visual LayerNorm)"),
    (r"vlbert\.visual_1x1_(text|object)\..*", "visual_size != hidden_size (a separate visual projection)"),
    (
        r"image_feature_extractor\.(?!obj_downsample\.1\.).*",
        "the end-to-end Fast R-CNN (an -e2e file; this VL-BERT reads precomputed features: use the -prec one)",
    ),
)


def without_module_prefix(official: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if official and all(k.startswith("module.") for k in official):
        return {k[len("module.") :]: v for k, v in official.items()}
    return dict(official)


def layout_of(official: Mapping[str, torch.Tensor]) -> str:
    """The file's layout by its keys: "vqa" or "pretraining"; anything else is one line."""
    official = without_module_prefix(official)
    if any(k.startswith("final_mlp.") for k in official):
        return "vqa"
    if any(k.startswith(("vlbert.mlm_head.", "vlbert.mvrc_head.")) for k in official):
        return "pretraining"
    raise ReproError(
        f"{WHAT}: neither VL-BERT's VQA layout (final_mlp.*) nor its pre-training layout (vlbert.mlm_head.*)"
    )


def classifier_of(official: Mapping[str, torch.Tensor]) -> str:
    """The VQA file's CLASSIFIER_TYPE: "mlm" or "2fc" ("1fc" is refused)."""
    official = without_module_prefix(official)
    if "final_mlp.0.dense.weight" in official:
        return "mlm"
    if "final_mlp.4.weight" in official:
        return "2fc"
    raise ReproError(f"{WHAT}: final_mlp is the '1fc' classifier; 'mlm' and '2fc' map here")


def convert(official: Mapping[str, torch.Tensor], target: str = "same") -> Conversion:
    """The conversion of a VL-BERT state dict. target "same": into the model of the file's own layout (VQA or
    pre-training); "vqa-from-pretraining": a pre-training file into a VQA model, as the VQA fine-tuning starts."""
    official = without_module_prefix(official)
    layout = layout_of(official)
    for key in official:
        for pattern, why in REFUSED:
            if re.fullmatch(pattern, key):
                raise ReproError(f"{WHAT}: {key}: {why} has no counterpart in this VL-BERT")
    if layout == "vqa":
        classifier_of(official)
    into_vqa = target == "vqa-from-pretraining"
    if into_vqa and layout != "pretraining":
        raise ReproError(f"{WHAT}: a VQA checkpoint, not VL-BERT's pre-training (init: vl-bert-* reads that)")
    rules = BACKBONE + (CLASSIFIER if layout == "vqa" else () if into_vqa else PRETRAINING)
    conversion = Conversion()
    for key, value in official.items():
        if into_vqa and re.fullmatch(_MLM + r"transform\..*", key):
            conversion.put(key, "head.0." + key[len("vlbert.mlm_head.predictions.transform.") :], value)
        elif into_vqa and (why := _reason(key, NOT_FOR_VQA)) is not None:
            conversion.drop(key, why)
        elif key == MLM_BIAS and layout == "pretraining":
            conversion.put(key, "mlm.predictions.bias", value)
            conversion.put(key, "mlm.predictions.decoder.bias", value)
        elif (name := rename(key, rules)) is not None:
            conversion.put(key, name, value)
        elif (why := _reason(key, DROPPED)) is not None:
            conversion.drop(key, why)
        else:
            raise ReproError(f"{WHAT}: unexpected key {key} (no rule of the key map places it)")
    return conversion


def _reason(key: str, table: tuple[tuple[str, str], ...]) -> str | None:
    return next((why for pattern, why in table if re.fullmatch(pattern, key)), None)


def load_vlbert(model: nn.Module, official: Mapping[str, torch.Tensor], source: str = WHAT) -> KeyReport:
    """A VL-BERT file into the model of its own layout (our VL-BERT without PA, or the pre-training model),
    everything or nothing."""
    from repro.families.mcan_pa.vlbert_pretraining import VLBertPretraining

    official = without_module_prefix(official)
    layout = layout_of(official)
    if getattr(model, "positional", ()):
        raise ReproError(f"{source}: VL-BERT's released layouts are VL-BERT without PA")
    if layout == "pretraining" and not isinstance(model, VLBertPretraining):
        raise ReproError(f"{source}: VL-BERT's pre-training layout; a VQA model starts from it (init: vl-bert-base)")
    if layout == "vqa":
        if isinstance(model, VLBertPretraining):
            raise ReproError(f"{source}: a VQA checkpoint, not VL-BERT's pre-training")
        if classifier_of(official) != model.classifier:
            raise ReproError(
                f"{source}: the '{classifier_of(official)}' classifier; the model has '{model.classifier}'"
            )
    return strict_load(model, convert(official), source)


def load_pretraining_into_vqa(model: nn.Module, official: Mapping[str, torch.Tensor], source: str = WHAT) -> KeyReport:
    """VL-BERT's pre-training into a VQA VL-BERT, as its VQA fine-tuning starts (PARTIAL_PRETRAIN): everything of
    the network, the MLM transform as the "mlm" classifier's first layer; the rest of the classifier (the answer
    layer; all of "2fc") keeps its initial value, and so do PA's modules, which VL-BERT has not."""
    official = without_module_prefix(official)
    conversion = convert(official, "vqa-from-pretraining")
    if model.classifier != "mlm":
        for key in [k for k in conversion.placed if k.startswith("vlbert.mlm_head.predictions.transform.")]:
            del conversion.placed[key]
            conversion.drop(key, "the MLM transform: the '2fc' classifier has no place for it")
    fresh = ("head.", "word_pos", "box_proj.", "pwa.", "poa.", "pma.")
    return strict_load(model, conversion, source, may_stay_initial=lambda key: key.startswith(fresh))


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    return read_state_dict(path, CHECKPOINT_KEYS)


def sizes_from_state(official: Mapping[str, torch.Tensor], heads: int | None = None) -> tuple[dict[str, Any], dict]:
    """Our VL-BERT sizes read off a file's own keys and shapes, and what else they say: {"layout", "classifier"
    (VQA), "answers" (VQA), "region_classes" (pre-training)}. `obj_downsample`'s input is the 2048-d box embedding
    (fixed in VL-BERT's code) and the RoI feature; the head count is VL-BERT_BASE's or _LARGE's by the width unless
    given (a conversion does not depend on it)."""
    official = without_module_prefix(official)
    layout = layout_of(official)
    try:
        vocab, hidden = official["vlbert.word_embeddings.weight"].shape
        positions = official["vlbert.position_embeddings.weight"].shape[0]
        ffn = official["vlbert.encoder.layer.0.intermediate.dense.weight"].shape[0]
        visual_in = official["image_feature_extractor.obj_downsample.1.weight"].shape[1]
        info: dict[str, Any] = {"layout": layout}
        head_hidden = None
        if layout == "vqa":
            info["classifier"] = classifier_of(official)
            if info["classifier"] == "mlm":
                info["answers"] = official["final_mlp.2.weight"].shape[0]
            else:
                head_hidden = official["final_mlp.1.weight"].shape[0]
                info["answers"] = official["final_mlp.4.weight"].shape[0]
        else:
            info["region_classes"] = official["vlbert.mvrc_head.region_cls_pred.weight"].shape[0]
    except KeyError as exc:
        raise ReproError(f"{WHAT}: missing key {exc.args[0]}") from None
    if visual_in <= GEOMETRY_DIM:
        raise ReproError(f"{WHAT}: obj_downsample takes {visual_in} inputs, not the 2048-d box embedding and a feature")
    layers = 1 + max(int(k.split(".")[3]) for k in official if k.startswith("vlbert.encoder.layer."))
    sizes = {
        "vocab": vocab,
        "hidden": hidden,
        "layers": layers,
        "heads": heads or HEADS.get(hidden, 1),
        "ffn": ffn,
        "max_positions": positions,
        "feature_dim": visual_in - GEOMETRY_DIM,
        "visual_geometry_dim": GEOMETRY_DIM,
    }
    if head_hidden is not None:
        sizes["head_hidden"] = head_hidden
    return sizes, info


def build_for(official: Mapping[str, torch.Tensor], heads: int | None = None) -> nn.Module:
    """The model a file's layout and shapes describe: our VQA VL-BERT (WordPiece ids, no PA) with its classifier,
    or the pre-training model."""
    from repro.families.mcan_pa.build import model_sizes
    from repro.families.mcan_pa.config import VlBertConfig
    from repro.families.mcan_pa.vlbert import VLBert
    from repro.families.mcan_pa.vlbert_pretraining import VLBertPretraining

    sizes, info = sizes_from_state(official, heads)
    if info["layout"] == "pretraining":
        config = VlBertConfig(arch="vl-bert")
        return VLBertPretraining(model_sizes(config, sizes), info["region_classes"])
    config = VlBertConfig(arch="vl-bert", classifier=info["classifier"])
    return VLBert(2, info["answers"], model_sizes(config, sizes), classifier=info["classifier"])


def convert_checkpoint(path: Path, layout: str, option: str | None = None) -> tuple[nn.Module, KeyReport]:
    """`repro weights convert`: a VL-BERT file (VQA or pre-training) into the model its keys describe, with the key
    report."""
    official = read_checkpoint(path)
    model = build_for(official)
    return model, load_vlbert(model, official, str(path))


def load_start(model: nn.Module, config, sizes: dict[str, Any]):
    """`init: vl-bert-*`: VL-BERT's released pre-training into the row's model, as VL-BERT's VQA fine-tuning starts
    (`load_pretraining_into_vqa`), at the released sizes only; the key report."""
    from repro.families.mcan_pa.build import released_start
    from repro.families.mcan_pa.vlbert import VLBERT_SIZES
    from repro.weights import Checkpoint, released_path

    released = VLBERT_SIZES[config.size]
    differ = [k for k in ("vocab", "hidden", "layers", "heads", "ffn", "feature_dim") if sizes[k] != released[k]]
    if differ:
        raise ReproError(
            f"init {config.init}: VL-BERT's released pre-training is at VL-BERT_{config.size.upper()}'s sizes; this "
            f"run's {', '.join(f'{k}={sizes[k]}' for k in differ)} differ (paper scale only)"
        )
    entry = released_start(config)
    checkpoint = Checkpoint(released_path(entry), entry).with_digest()
    official = read_checkpoint(checkpoint.path)
    return load_pretraining_into_vqa(model, official, str(checkpoint.path)), checkpoint
