"""VL-BERT and VL-BERT+PA (mcan-pa Table IV) on tiny random configurations."""

from __future__ import annotations

import math

import pytest
import torch

from repro.errors import ReproError
from repro.families.mcan_pa.build import build_model, example_batch
from repro.families.mcan_pa.positional import fuse
from repro.nn.attention import MASK_VALUE

TINY = {
    "vocab": 0,
    "hidden": 16,
    "layers": 2,
    "heads": 2,
    "ffn": 32,
    "max_positions": 32,
    "max_tokens": 6,
    "max_boxes": 5,
    "feature_dim": 8,
    "visual_geometry_dim": 8,
    "head_hidden": 12,
    "dropout": 0.0,
    "geometry_dim": 16,
}
PA = {"arch": "vl-bert", "positional": ["pwa", "poa", "pma"], "fusion": "eq8"}


def _batch(seed=0, **sizes):
    batch = example_batch(3, {**TINY, **sizes}, seed=seed, num_tokens=20)
    batch["tokens"][0, 4:] = 0  # a shorter question
    batch["features"][1, 3:] = 0  # an image with fewer regions
    return batch


def test_forward_gives_answer_logits_and_pa_sets_eq8_temperature():
    torch.manual_seed(0)
    base = build_model({"arch": "vl-bert"}, 20, 7, sizes=TINY).eval()
    pa = build_model(PA, 20, 7, sizes=TINY).eval()
    batch = _batch()
    assert base(batch).shape == pa(batch).shape == (3, 7)
    pa(batch)
    d_head = TINY["hidden"] // TINY["heads"]
    assert all(layer.attention.self.scaling == pytest.approx(1 / math.sqrt(2 * d_head)) for layer in pa.layers)
    assert all(layer.attention.self.scaling == pytest.approx(1 / math.sqrt(d_head)) for layer in base.layers)
    # the answer is read at [MASK], right after the question: padding after it changes nothing
    longer = {**batch, "tokens": torch.cat([batch["tokens"], torch.zeros(3, 0, dtype=torch.long)], 1)}
    assert torch.allclose(pa(longer), pa(batch))


def test_pa_blocks_of_the_single_stream_map():
    torch.manual_seed(0)
    model = build_model(PA, 20, 7, sizes=TINY).eval()
    batch = _batch()
    ids, _ = model._text(batch)
    t, n = ids.shape[1], batch["features"].shape[1]
    text_mask, img_mask = ids == 0, batch["features"].abs().sum(-1) == 0
    from repro.families.mcan_pa.positional import box_feature

    words = model.word_pos[:t][None]
    boxes = model.box_proj(box_feature(batch["boxes"], batch["image_size"]))
    geometry = model.poa(batch["boxes"])
    bias = model._bias(1, text_mask, img_mask, words, boxes, geometry)
    assert bias.shape == (3, TINY["heads"], t + n, t + n)
    d_head = TINY["hidden"] // TINY["heads"]
    keep = ~torch.cat([text_mask, img_mask], 1)[:, None, None, :]  # padded keys are masked
    expect_ww = fuse(model.pwa[1](words, words), d_head, "eq8")[0].expand(3, -1, -1, -1)
    assert torch.allclose(
        bias[:, :, :t, :t][keep[..., :t].expand(-1, 2, t, -1)], expect_ww[keep[..., :t].expand(-1, 2, t, -1)]
    )
    assert torch.allclose(
        bias[:, :, t:, t:].masked_fill(~keep[..., t:], 0), (geometry[1] / math.sqrt(2)).masked_fill(~keep[..., t:], 0)
    )
    rw = fuse(model.pma[1](boxes, words), d_head, "eq8")[0]
    assert torch.allclose(bias[:, :, t:, :t].masked_fill(~keep[..., :t], 0), rw.masked_fill(~keep[..., :t], 0))
    assert (bias.masked_select(~keep.expand_as(bias)) == MASK_VALUE).all()


def test_bert_weights_load_into_the_text_stack(tmp_path):
    from transformers import BertConfig, BertModel

    sizes = {**TINY, "vocab": 40}
    torch.manual_seed(1)
    bert = BertModel(
        BertConfig(
            vocab_size=40,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        ),
        add_pooling_layer=False,
    )
    bert.save_pretrained(tmp_path)
    model = build_model({"arch": "vl-bert"}, 20, 7, sizes=sizes, bert_weights=tmp_path)
    for mine, theirs in zip(model.layers, bert.encoder.layer):
        for (name, a), (_, b) in zip(mine.state_dict().items(), theirs.state_dict().items()):
            assert torch.equal(a, b), name
    assert torch.equal(model.embeddings.word_embeddings.weight, bert.embeddings.word_embeddings.weight)
    with pytest.raises(ReproError, match="no BERT weights"):
        build_model({"arch": "vl-bert"}, 20, 7, sizes=sizes, bert_weights=tmp_path / "missing")
    with pytest.raises(ReproError, match="pre-training is not reproduced"):
        build_model({"arch": "vl-bert", "pretrained": True}, 20, 7, sizes=sizes)
