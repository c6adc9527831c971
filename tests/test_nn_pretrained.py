"""BERT weights from a folder: every tensor the model needs is read from it, or one error line says which is not."""

import logging

import pytest
import torch

from repro.errors import ReproError
from repro.nn.pretrained import bert_from_folder

transformers = pytest.importorskip("transformers")


@pytest.fixture
def bert_folder(tmp_path):
    config = transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
    )
    torch.manual_seed(0)
    transformers.BertForPreTraining(config).save_pretrained(tmp_path / "bert")
    return tmp_path / "bert"


def test_the_first_layers_are_read_and_the_rest_counted_in_one_line(bert_folder, caplog, capfd):
    from safetensors.torch import load_file

    with caplog.at_level(logging.INFO, logger="repro.nn.pretrained"):
        model = bert_from_folder(transformers.BertModel, bert_folder, num_hidden_layers=1, add_pooling_layer=False)
    stored = load_file(bert_folder / "model.safetensors")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, stored[f"bert.{name}"]), name
    (line,) = [r.getMessage() for r in caplog.records if r.name == "repro.nn.pretrained"]
    assert "tensors in the file not used" in line
    assert "LOAD REPORT" not in capfd.readouterr().err  # transformers' table of every tensor name


def test_a_tensor_the_folder_lacks_is_an_error_not_a_random_initialisation(bert_folder):
    from safetensors.torch import load_file, save_file

    weights = load_file(bert_folder / "model.safetensors")
    del weights["bert.encoder.layer.0.attention.self.query.weight"]
    save_file(weights, bert_folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ReproError, match=r"lack 1 tensor\(s\) of BertModel \(e\.g\. encoder\.layer\.0\.attention"):
        bert_from_folder(transformers.BertModel, bert_folder, add_pooling_layer=False)


def test_m4c_question_encoder_refuses_the_incomplete_folder(bert_folder):
    from safetensors.torch import load_file, save_file

    from repro.families.sa_m4c.model import TextBert, load_text_bert

    weights = load_file(bert_folder / "model.safetensors")
    del weights["bert.embeddings.word_embeddings.weight"]
    save_file(weights, bert_folder / "model.safetensors", metadata={"format": "pt"})
    sizes = {"bert_vocab": 40, "hidden_size": 16, "text_bert_layers": 1, "heads": 2, "ff_size": 32, "dropout": 0.0}
    with pytest.raises(ReproError, match="word_embeddings"):
        load_text_bert(TextBert(sizes), bert_folder)
