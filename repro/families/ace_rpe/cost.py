"""Paper-scale cost of ALBEF pre-training and retrieval fine-tuning, estimated from FLOPs.

The paper gives no training time (only "8 NVIDIA A100 GPUs", Sec. 4.1), so `repro run --dry-run`
shows an estimate: the matrix-multiply FLOPs of each pass at ALBEF's sizes, counted here
analytically (2 FLOPs per multiply-add; embeddings, norms and softmax left out), times the passes
each objective makes, over the data of each stage, at an A100's sustained rate in the precision the
stage's recipe trains in (`repro.train.cost`: fp32, TF32 off, as ALBEF's code and these recipes train). It
is an order of magnitude, not a measurement.
"""

from __future__ import annotations

from typing import Any

TRAIN = 3.0  # a trained pass: forward + backward ~ 3 forward
# Image-text pairs per epoch: pre-training (Sec. 4.1: 5.1M pairs for 4M images; ALBEF's 14M setting,
# counted as one pair per image), Karpathy train captions (29,000 x 5 Flickr30K, 113,287 x 5 COCO).
PAIRS = {"4m": 5.1e6, "14m": 14.1e6, "flickr30k": 145_000, "coco-retrieval": 566_435}
TEXT_TOKENS = 30  # ALBEF's max text length at fine-tuning (25 in pre-training)


def encoder_flops(layers: int, tokens: int, d: int) -> float:
    """A BERT/ViT encoder: q, k, v, output (4 d^2) and MLP (8 d^2) per token, attention 2 t^2 d."""
    return layers * (2 * tokens * 12 * d * d + 4 * tokens * tokens * d)


def fusion_flops(layers: int, text: int, image: int, d: int) -> float:
    """Fusion layers: self-attention and MLP on the text, cross-attention q/o on text, k/v on the image."""
    per = 2 * text * 12 * d * d + 4 * text * text * d  # as an encoder layer
    per += 2 * text * 2 * d * d + 2 * image * 2 * d * d + 4 * text * image * d  # cross-attention
    return layers * per


def pass_flops(sizes: dict[str, Any], image_size: int) -> dict[str, float]:
    d = sizes["hidden_size"]
    image = (image_size // sizes["patch_size"]) ** 2 + 1
    return {
        "image": encoder_flops(sizes["image_layers"], image, d),
        "text": encoder_flops(sizes["text_layers"], TEXT_TOKENS, d),
        "fusion": fusion_flops(sizes["fusion_layers"], TEXT_TOKENS, image, d),
        "mlm_head": 2 * TEXT_TOKENS * d * sizes["vocab_size"],
    }


def pretrain_flops_per_pair(sizes: dict[str, Any], mim: bool) -> float:
    """ITC (online trained, momentum forward), ITM (3 fusion passes), MLM (masked text + fusion + head,
    online and momentum), MIM (one more trained image pass); 256 x 256 images."""
    f = pass_flops(sizes, 256)
    itc = TRAIN * (f["image"] + f["text"]) + f["image"] + f["text"]
    itm = 3 * TRAIN * f["fusion"]
    mlm = TRAIN * (f["text"] + f["fusion"] + f["mlm_head"]) + f["text"] + f["fusion"] + f["mlm_head"]
    return itc + itm + mlm + (TRAIN * f["image"] if mim else 0.0)


def finetune_flops_per_pair(sizes: dict[str, Any]) -> float:
    """Retrieval fine-tuning: ITC with the momentum model, ITM on 3 pairs; 384 x 384 images."""
    f = pass_flops(sizes, 384)
    return TRAIN * (f["image"] + f["text"]) + f["image"] + f["text"] + 3 * TRAIN * f["fusion"]


def gpu_hours(flops: float, precision: str | None = None) -> float:
    """GPU-hours of `flops` at `precision` (None: fp32, what every ace-rpe recipe states)."""
    from repro.train import cost

    return cost.gpu_hours(flops, precision)


# The downstream heads (`tasks.py`): items per epoch and evaluated, as the data sets' papers count them
# (VQA v2 train 443,757 + val 214,354 questions, test2015 447,793; SNLI-VE 529,527 / 17,858 / 17,901;
# NLVR2 86,373 / 6,982 / 6,967 (test-P); RefCOCO+ (unc) 120,624 expressions / 10,758 + 5,726 + 4,889).
# ALBEF's vg_qa.json adds Visual Genome questions to VQA's training; their count is not published, so they
# are left out (an underestimate). NLVR2's text assignment is one epoch of the 4M pre-training pairs.
HEAD_ITEMS = {
    "vqa": (443_757 + 214_354, 447_793),
    "snli-ve": (529_527, 17_858 + 17_901),
    "nlvr2": (86_373, 6_982 + 6_967),
    "nlvr2-assign": (PAIRS["4m"], 0),
    "grounding": (120_624, 10_758 + 5_726 + 4_889),
}
ANSWER_TOKENS = 5  # an answer of ALBEF's list with [CLS] and [SEP]
ANSWERS_PER_QUESTION = 3  # distinct annotator answers a training question carries, about


def head_flops(task: str, sizes: dict[str, Any], epochs: int, k_test: int = 128) -> float:
    """Training (`epochs` over the items, the momentum model's forward for distillation) and evaluation of a
    head at 384 px (the text assignment at 256): VQA's decoder over each answer (training) and the k answers it
    ranks (test); NLVR2's two images and doubled fusion layers; grounding as retrieval plus a Grad-CAM backward."""
    train_items, test_items = HEAD_ITEMS[task]
    f = pass_flops(sizes, 256 if task == "nlvr2-assign" else 384)
    d = sizes["hidden_size"]
    one = f["image"] + f["text"] + f["fusion"]
    if task == "vqa":
        decoder = fusion_flops(sizes["fusion_layers"], ANSWER_TOKENS, TEXT_TOKENS, d)
        train = (TRAIN + 1) * (one + ANSWERS_PER_QUESTION * decoder)
        test = one + k_test * decoder
    elif task in ("nlvr2", "nlvr2-assign"):
        pair = 2 * f["image"] + f["text"] + 2 * f["fusion"]
        train, test = (TRAIN if task == "nlvr2-assign" else TRAIN + 1) * pair, pair
    elif task == "grounding":
        train, test = finetune_flops_per_pair(sizes), TRAIN * one
    else:
        train, test = (TRAIN + 1) * one, one
    return epochs * train_items * train + test_items * test
