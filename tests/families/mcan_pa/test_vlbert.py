"""VL-BERT (its code's network) and VL-BERT+PA (mcan-pa Table IV) on tiny random configurations; the golden tensors
of test_vlbert_golden.py pin the network against the official code."""

from __future__ import annotations

import math

import pytest
import torch

from repro.errors import ReproError
from repro.families.mcan_pa.build import build_model, example_batch
from repro.families.mcan_pa.config import VlBertConfig
from repro.families.mcan_pa.positional import box_feature, fuse
from repro.families.mcan_pa.vlbert import (
    Packed,
    coordinate_embedding,
    init_answer_classifier,
    official_inputs,
)

TINY = {
    "vocab": 0,
    "hidden": 16,
    "layers": 2,
    "heads": 2,
    "ffn": 32,
    "max_positions": 40,
    "max_tokens": 6,
    "max_boxes": 5,
    "feature_dim": 8,
    "visual_geometry_dim": 16,
    "head_hidden": 12,
    "dropout": 0.0,
    "geometry_dim": 16,
}
PA = {"arch": "vl-bert", "positional": ["pwa", "poa", "pma"], "fusion": "eq8"}


def _batch(seed=0, **sizes):
    batch = example_batch(3, {**TINY, **sizes}, seed=seed, num_tokens=20)
    batch["tokens"][0, 4:] = 0  # a shorter question
    batch["box_count"][1] = 3  # an image with fewer regions
    batch["features"][1, 3:] = 0
    return batch


def _randomised(model):
    """Every parameter random (VL-BERT starts its visual LayerNorms' gains at 0, which would hide the regions)."""
    torch.manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return model.eval()


def test_forward_gives_answer_logits_and_pa_sets_eq8_temperature():
    torch.manual_seed(0)
    base = build_model({"arch": "vl-bert"}, 20, 7, sizes=TINY).eval()
    pa = build_model(PA, 20, 7, sizes=TINY).eval()
    two = build_model({"arch": "vl-bert", "classifier": "2fc"}, 20, 7, sizes=TINY).eval()
    batch = _batch()
    assert base(batch).shape == pa(batch).shape == two(batch).shape == (3, 7)
    d_head = TINY["hidden"] // TINY["heads"]
    assert all(layer.attention.self.scaling == pytest.approx(1 / math.sqrt(2 * d_head)) for layer in pa.layers)
    assert all(layer.attention.self.scaling == pytest.approx(1 / math.sqrt(d_head)) for layer in base.layers)
    assert two.head[1].out_features == TINY["head_hidden"] and base.head[0].dense.out_features == TINY["hidden"]


def test_vl_berts_initialisation_starts_the_visual_layernorms_at_zero():
    model = build_model({"arch": "vl-bert"}, 20, 7, sizes=TINY)
    assert torch.equal(model.visual_norm_text.weight, torch.zeros(TINY["hidden"]))
    assert torch.equal(model.visual_norm_object.weight, torch.zeros(TINY["hidden"]))
    assert model.embeddings.token_type_embeddings.weight.shape == (3, TINY["hidden"])  # question, answer, objects


@pytest.mark.parametrize("config", [{"arch": "vl-bert"}, PA])
def test_padding_changes_nothing(config):
    """Padded question columns and padded box rows are not elements of the sequence."""
    model = _randomised(build_model(config, 20, 7, sizes=TINY))
    batch = _batch()
    wider = dict(batch, tokens=torch.cat([batch["tokens"], torch.zeros(3, 0, dtype=torch.long)], 1))
    more = dict(batch)
    more["features"] = torch.cat([batch["features"], torch.zeros(3, 2, TINY["feature_dim"])], 1)
    more["boxes"] = torch.cat([batch["boxes"], torch.rand(3, 2, 4) * 50], 1)
    with torch.no_grad():
        ref = model(batch)
        assert torch.allclose(model(wider), ref, atol=1e-6)
        assert torch.allclose(model(more), ref, atol=1e-6)
        one = model({k: v[1:2] for k, v in batch.items()})
    assert torch.allclose(one, ref[1:2], atol=1e-5)  # an item's answer does not depend on the others' lengths


def test_text_is_cls_question_sep_mask_sep_with_the_answer_segment():
    model = build_model({"arch": "vl-bert"}, 20, 7, sizes=TINY)
    question = torch.tensor([[5, 6, 7], [9, 0, 0]])
    ids, segments, mask, answer_at = model.text(question)
    cls, sep, msk = model.cls_id, model.sep_id, model.mask_id
    assert ids.tolist() == [[cls, 5, 6, 7, sep, msk, sep], [cls, 9, sep, msk, sep, 0, 0]]
    assert segments.tolist() == [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0, 0]]
    assert mask.tolist() == [[True] * 7, [True] * 5 + [False] * 2]
    assert answer_at.tolist() == [5, 3]


def test_official_inputs_put_the_whole_image_first_as_vl_berts_dataset_does():
    batch = _batch()
    boxes, im_info = official_inputs(batch)
    w, h = batch["image_size"][1]
    assert boxes.shape == (3, 1 + TINY["max_boxes"], 4 + TINY["feature_dim"])
    assert boxes[1, 0, :4].tolist() == [0.0, 0.0, float(w - 1), float(h - 1)]
    assert torch.allclose(boxes[1, 0, 4:], batch["features"][1, :3].mean(0))  # the mean of its 3 boxes
    assert (boxes[1, 4:] == -2).all() and (boxes[1, 1:4, 0] > -1.5).all()  # padded rows -2, as the collate pads
    assert (boxes[..., 2] <= im_info[:, None, 0] - 1).all()  # clamped to the image
    assert im_info[1].tolist() == [float(w), float(h), 1.0, 1.0]


def test_coordinate_embedding_is_bbox_py_s():
    box, size = torch.tensor([[10.0, 20.0, 30.0, 60.0]]), torch.tensor([[100.0, 200.0]])
    emb = coordinate_embedding(box, size, 2)  # 4 coordinates x (2 sines, 2 cosines)
    position = [20 / 100 * 100, 40 / 200 * 100, 20 / 100 * 100, 40 / 200 * 100]  # centre, size x 100 / image
    expected = []
    for p in position:
        angles = [p / 1000 ** (i / 2) for i in range(2)]
        expected += [math.sin(a) for a in angles] + [math.cos(a) for a in angles]
    assert torch.allclose(emb[0], torch.tensor(expected), atol=1e-6)


def test_pa_blocks_sit_where_each_item_s_text_and_regions_are():
    """Items of different lengths: the word-word, region-region and cross blocks follow each item's own layout in
    the gap-free sequence; [END] and padding get no positional term."""
    model = _randomised(build_model(PA, 20, 7, sizes=TINY))
    batch = _batch()
    boxes, im_info = official_inputs(batch)
    ids, _, text_mask, _ = model.text(batch["tokens"])
    n = boxes.shape[1]
    packed = Packed(text_mask, boxes[..., 0] > -1.5)
    t = ids.shape[1]
    with torch.no_grad():
        bias = model._positional(packed, t, boxes[..., :4], im_info[:, :2])(1)
        words = model.word_pos[:t][None]
        boxes_pos = model.box_proj(box_feature(boxes[..., :4], im_info[:, :2]))
        ww = fuse(model.pwa[1](words, words), model.d_head, "eq8")[0][0]
        rr = fuse(model.poa(boxes[..., :4])[1], model.d_head, "eq8")[0]
        wr = fuse(model.pma[1](words, boxes_pos), model.d_head, "eq8")[0]
        rw = fuse(model.pma[1](boxes_pos, words), model.d_head, "eq8")[0]
    for b in range(3):
        text, count = int(text_mask[b].sum()), int((boxes[b, :, 0] > -1.5).sum())
        end = text + count
        assert torch.allclose(bias[b, :, :text, :text], ww[:, :text, :text])
        assert torch.allclose(bias[b, :, text:end, text:end], rr[b][:, :count, :count])
        assert torch.allclose(bias[b, :, :text, text:end], wr[b][:, :text, :count])
        assert torch.allclose(bias[b, :, text:end, :text], rw[b][:, :count, :text])
        assert (bias[b, :, end:, :] == 0).all() and (bias[b, :, :, end:] == 0).all()
    assert n == TINY["max_boxes"] + 1


def test_bert_weights_load_into_the_text_stack_and_the_mlm_classifier(tmp_path):
    from transformers import BertConfig, BertForPreTraining

    sizes = {**TINY, "vocab": 110}
    torch.manual_seed(1)
    bert = BertForPreTraining(
        BertConfig(
            vocab_size=110,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=40,
        )
    )
    bert.save_pretrained(tmp_path)
    model = build_model({"arch": "vl-bert"}, 20, 7, sizes=sizes, bert_weights=tmp_path)
    for mine, theirs in zip(model.layers, bert.bert.encoder.layer, strict=True):
        for (name, a), (_, b) in zip(mine.state_dict().items(), theirs.state_dict().items(), strict=True):
            assert torch.equal(a, b), name
    embeddings = bert.bert.embeddings
    assert torch.equal(model.embeddings.word_embeddings.weight, embeddings.word_embeddings.weight)
    assert torch.equal(model.embeddings.token_type_embeddings.weight[:2], embeddings.token_type_embeddings.weight)
    assert torch.equal(model.head[0].dense.weight, bert.cls.predictions.transform.dense.weight)
    with pytest.raises(ReproError, match="no BERT weights"):
        build_model({"arch": "vl-bert"}, 20, 7, sizes=sizes, bert_weights=tmp_path / "missing")


def test_the_answer_layer_starts_from_the_answers_word_embeddings(tmp_path):
    words = ["[PAD]", *[f"[unused{i}]" for i in range(99)], "[UNK]", "[CLS]", "[SEP]", "[MASK]", "red", "dog", "##s"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n")
    model = build_model({"arch": "vl-bert"}, 2, 2, sizes={**TINY, "vocab": len(words)})
    init_answer_classifier(model, ["red", "dogs"], vocab)
    table = model.embeddings.word_embeddings.weight
    assert torch.allclose(model.head[-1].weight[0], table[104])
    assert torch.allclose(model.head[-1].weight[1], table[[105, 106]].mean(0))


def test_init_names_a_pre_training_of_the_row_s_size():
    assert VlBertConfig(arch="vl-bert", init="vl-bert-base").init == "vl-bert-base"
    with pytest.raises(ValueError, match="pre-training; the row is size base"):
        VlBertConfig(arch="vl-bert", init="vl-bert-large")
    with pytest.raises(ValueError, match="init: vl-bert-large"):
        VlBertConfig(arch="vl-bert", size="large")
    with torch.device("meta"):
        large = build_model({"arch": "vl-bert", "size": "large", "init": "vl-bert-large"})
    assert (large.sizes["hidden"], large.sizes["layers"], large.sizes["heads"]) == (1024, 24, 16)


def test_rows_that_start_from_vl_bert_s_pre_training_run_at_paper_scale_only():
    from repro.families.mcan_pa.build import not_at_scale
    from repro.families.mcan_pa.vlbert_keymap import load_start

    config = VlBertConfig(arch="vl-bert", init="vl-bert-base")
    assert not_at_scale(config, "paper") is None and not_at_scale({"arch": "vl-bert"}, "synthetic") is None
    assert "paper scale only" in not_at_scale(config, "synthetic")
    model = build_model(config, 20, 7, sizes=TINY)
    with pytest.raises(ReproError, match="hidden=16"):
        load_start(model, config, {**TINY, "vocab": 30522})
