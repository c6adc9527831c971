"""Tiny M4C / SA-M4C sizes and batches for fast tests (12 heads: one per spatial relation)."""

from __future__ import annotations

TINY_SIZES = {
    "hidden_size": 24,
    "heads": 12,
    "ff_size": 48,
    "text_bert_layers": 1,
    "bert_vocab": 200,
    "max_question_tokens": 6,
    "max_objects": 4,
    "max_ocr_tokens": 5,
    "decode_steps": 3,
    "obj_dim": 8,
    "ocr_app_dim": 8,
    "fasttext_dim": 6,
    "phoc_dim": 10,
    "max_dec_positions": 10,
}
NUM_ANSWERS = 20
