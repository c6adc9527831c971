"""Prepared questions re-tokenised into BERT's WordPiece (bert-base-uncased's `vocab.txt`, `transformers`' tokenizer).

Models with a BERT question encoder (mcan-pa's VL-BERT, DSGANet) read the prepared VQA-style splits, which keep
MCAN's word ids; this wrapper adds the same questions as WordPiece ids under a key of the model's choosing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from repro.errors import ReproError
from repro.paths import data_dir

BERT_FOLDER = "bert-base-uncased"  # catalog entry: data_dir()/bert-base-uncased


def bert_vocab_file() -> Path:
    """The catalog's bert-base-uncased `vocab.txt`; a clear error naming the download when it is missing."""
    vocab = data_dir() / BERT_FOLDER / "vocab.txt"
    if not vocab.is_file():
        raise ReproError(f"{vocab}: missing; BERT reads questions in WordPiece: `repro download {BERT_FOLDER}`")
    return vocab


class WordPieceQuestions(torch.utils.data.Dataset):
    """A prepared split whose items also hold `key`: the question in WordPiece ids.

    The prepared questions' words (lower case, punctuation stripped) are joined and split by BERT's tokenizer,
    padded with [PAD] = 0 or cut to `max_tokens` ids. Words outside the prepared vocabulary become [UNK].
    `special_tokens` puts [CLS] first and [SEP] last, as a BERT encoder of its own expects; VL-BERT places
    them itself. Attributes of the prepared split (num_tokens, answer_vocab, ...) pass through.
    """

    def __init__(self, base, vocab_file, max_tokens: int, key: str = "wordpiece", special_tokens: bool = False):
        from transformers import BertTokenizerFast

        self.base, self.key = base, key
        tokenizer = BertTokenizerFast(vocab=str(vocab_file), do_lower_case=True)
        words = {i: w for w, i in base.token_vocab.items()}
        texts = [" ".join(words[t] if t > 1 else "[UNK]" for t in row.tolist() if t != 0) for row in base.tokens]
        encoded = tokenizer(
            texts, add_special_tokens=special_tokens, padding="max_length", truncation=True, max_length=max_tokens
        )
        self.ids = torch.tensor(encoded["input_ids"], dtype=torch.long)

    def __getattr__(self, name: str):
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {**self.base[index], self.key: self.ids[index]}
