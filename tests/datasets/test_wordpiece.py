"""Prepared questions re-tokenised into BERT's WordPiece (repro.datasets.wordpiece)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repro.datasets.wordpiece import WordPieceQuestions, bert_vocab_file
from repro.errors import ReproError


class Prepared:
    token_vocab = {"PAD": 0, "UNK": 1, "what": 2, "color": 3, "is": 4, "the": 5, "cube": 6}
    tokens = torch.tensor([[2, 3, 4, 5, 6, 0], [2, 1, 0, 0, 0, 0]])
    num_answers = 3

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return {"tokens": self.tokens[i]}


@pytest.fixture
def vocab(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "what", "color", "is", "the", "cub", "##e"])
    )
    return vocab


def test_wordpiece_questions_from_the_prepared_words(vocab):
    questions = WordPieceQuestions(Prepared(), vocab, 6)
    assert questions[0]["wordpiece"].tolist() == [5, 6, 7, 8, 9, 10]
    assert questions[1]["wordpiece"].tolist() == [5, 1, 0, 0, 0, 0]
    assert questions.num_answers == 3 and np.array_equal(questions[1]["tokens"], Prepared.tokens[1])


def test_a_bert_encoder_of_its_own_gets_cls_and_sep_under_its_key(vocab):
    questions = WordPieceQuestions(Prepared(), vocab, 8, key="bert_ids", special_tokens=True)
    assert questions[0]["bert_ids"].tolist() == [2, 5, 6, 7, 8, 9, 10, 3]
    assert questions[1]["bert_ids"].tolist() == [2, 5, 1, 3, 0, 0, 0, 0]
    assert "wordpiece" not in questions[0]
    cut = WordPieceQuestions(Prepared(), vocab, 4, key="bert_ids", special_tokens=True)
    assert cut[0]["bert_ids"].tolist() == [2, 5, 6, 3]  # cut to max_tokens, [SEP] kept last


def test_a_missing_vocabulary_names_the_download(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    with pytest.raises(ReproError, match="repro download bert-base-uncased"):
        bert_vocab_file()
