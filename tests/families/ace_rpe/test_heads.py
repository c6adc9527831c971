"""ALBEF's VQA, SNLI-VE and NLVR2 models: sizes against ALBEF's code, and each head's forward on a tiny model."""

from __future__ import annotations

import torch

from repro import specs
from repro.families.ace_rpe.build import build_model, describe
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.heads import load_pretrained
from tests.families.ace_rpe.tiny import TINY_SIZES, tiny_batch

# salesforce/ALBEF at 384 x 384, trainable parameters (models/model_vqa.py, model_ve.py, model_nlvr.py):
VIT, TEXT, FUSION = 86_090_496, 66_364_416, 56_710_656
ALBEF_VQA = VIT + TEXT + FUSION + 81_170_490  # decoder: embeddings 23,837,184 + 6 layers + LM transform 622,650
ALBEF_VE = VIT + TEXT + FUSION + 592_899  # MLP 768-768-3
ALBEF_NLVR2 = VIT + TEXT + 2 * FUSION - 6 * 2 * 590_592 + 592_130  # 12 fusion layers sharing k, v per pair


def cfg(**kw):
    return ALBEFConfig(arch="albef", **kw)


def test_table2_lists_albefs_task_models_at_their_official_sizes():
    spec = specs.resolve("ace-rpe-table2-pe")
    models = {m.task: m for m in describe(spec.row("None").config, spec)}
    assert list(models) == ["vqa", "snli-ve", "nlvr2"]
    for task, official in (("vqa", 290_336_058), ("snli-ve", 209_758_467), ("nlvr2", 259_381_250)):
        assert abs(models[task].trainable_params - official) / official < 0.005
    assert models["vqa"].trainable_params == ALBEF_VQA
    assert models["snli-ve"].trainable_params == ALBEF_VE
    assert models["nlvr2"].trainable_params == ALBEF_NLVR2


def tiny(task, **kw):
    torch.manual_seed(0)
    return build_model(cfg(**kw), TINY_SIZES, task=task)


def test_snli_ve_and_nlvr2_heads_train():
    batch = tiny_batch()
    ve = tiny("snli-ve")
    loss = ve.classify_loss({**batch, "label": torch.tensor([0, 1, 2, 2])})
    loss.backward()
    assert ve.logits(batch).shape == (4, 3) and torch.isfinite(loss)
    assert ve.cls_head[0].weight.grad is not None
    nlvr = tiny("nlvr2")
    pair = {**batch, "image_right": batch["image"].flip(0), "label": torch.tensor([0, 1, 1, 0])}
    assert nlvr.logits(pair).shape == (4, 2)
    nlvr.classify_loss(pair).backward()
    # one W (Eq. 8) per pre-trained fusion layer: the duplicated pair shares it
    count = sum(p.numel() for p in nlvr.fusion.position.parameters())
    assert count == sum(p.numel() for p in ve.fusion.position.parameters())
    first, second = nlvr.fusion.layer[0].crossattention.self, nlvr.fusion.layer[1].crossattention.self
    assert first.key.weight is second.key.weight and first.query.weight is not second.query.weight
    ape = tiny("nlvr2", position_embedding="ape", anchor_loss=False)  # APE: added to both images' patches
    with torch.no_grad():
        assert not torch.allclose(ape.logits(pair), ape.logits({**pair, "image_right": batch["image"]}))


def test_nlvr2_starts_from_pretraining_with_each_fusion_layer_twice():
    pre = tiny("pretrain", position_embedding="none", anchor_loss=False)
    nlvr = build_model(cfg(position_embedding="none", anchor_loss=False), TINY_SIZES, task="nlvr2")
    load_pretrained(nlvr, pre.state_dict())
    source = pre.fusion.layer[1].crossattention.self.query.weight
    assert torch.equal(nlvr.fusion.layer[2].crossattention.self.query.weight, source)
    assert torch.equal(nlvr.fusion.layer[3].crossattention.self.query.weight, source)
    assert torch.equal(
        nlvr.fusion.layer[3].crossattention.self.key.weight, pre.fusion.layer[1].crossattention.self.key.weight
    )
    # text assignment: 3-way head, vision_proj only draws distractors
    assign = build_model(cfg(position_embedding="none", anchor_loss=False), TINY_SIZES, task="nlvr2")
    assign = type(assign)(assign.config, assign.sizes, "nlvr2", assign=True)
    load_pretrained(assign, pre.state_dict())
    assert torch.equal(assign.vision_proj.weight, pre.vision_proj.weight)
    loss = assign.assign_loss(tiny_batch())
    loss.backward()
    assert torch.isfinite(loss) and assign.vision_proj.weight.grad is None and assign.ta_head.weight.grad is not None


def test_vqa_decoder_starts_from_the_fusion_layers_and_ranks_the_answer_list():
    pre = tiny("pretrain")
    vqa = build_model(cfg(), TINY_SIZES, task="vqa")
    load_pretrained(vqa, pre.state_dict())
    decoder = vqa.text_decoder.bert
    assert torch.equal(
        decoder.encoder.layer[1].crossattention.self.query.weight, pre.fusion.layer[1].crossattention.self.query.weight
    )
    assert torch.equal(decoder.embeddings.word_embeddings.weight, pre.text_encoder.embeddings.word_embeddings.weight)
    assert vqa.text_decoder.cls.predictions.decoder.weight is decoder.embeddings.word_embeddings.weight
    batch = tiny_batch()
    # answers "[CLS] a [SEP] [SEP]" with two annotator answers for question 0, one for the others
    answer_ids = torch.tensor([[2, 7, 3, 3], [2, 8, 9, 3], [2, 7, 3, 3], [2, 10, 3, 3], [2, 11, 3, 3]])
    train = {
        **batch,
        "answer_ids": answer_ids,
        "answer_mask": torch.ones_like(answer_ids),
        "answer_owner": torch.tensor([0, 0, 1, 2, 3]),
        "answer_weight": torch.tensor([0.7, 0.3, 1.0, 1.0, 1.0]),
    }
    loss = vqa.vqa_loss(train)
    loss.backward()
    assert (
        torch.isfinite(loss)
        and vqa.text_decoder.bert.encoder.layer[0].crossattention.self.query.weight.grad is not None
    )
    answers = torch.tensor([[2, 7, 3, 0], [2, 8, 9, 3], [2, 10, 3, 0]])
    mask = (answers != 0).long()
    vqa.eval()
    with torch.no_grad():  # ALBEF's score of every answer: log p(first token | [CLS]) + log p(answer)
        states = vqa.encode(batch["image"], batch["input_ids"], batch["attention_mask"])
        start = vqa.text_decoder(
            input_ids=answers[:1, :1].expand(4, 1),
            encoder_hidden_states=states,
            encoder_attention_mask=batch["attention_mask"],
        ).logits[:, 0]
        first = torch.log_softmax(start, dim=1)[:, answers[:, 1]]
        nll = torch.stack(
            [
                vqa.answer_nll(states, batch["attention_mask"], a.expand(4, -1), m.expand(4, -1))
                for a, m in zip(answers, mask)
            ],
            1,
        )
    assert torch.equal(vqa.rank_answers(batch, answers, mask, k=3), (first - nll).argmax(1))
    assert torch.equal(vqa.rank_answers(batch, answers, mask, k=1), first.argmax(1))  # k = 1: the first token decides
    # the decoder's likelihood is causal: an answer's score does not depend on what follows it
    nll = vqa.answer_nll(
        vqa.encode(batch["image"], batch["input_ids"], batch["attention_mask"])[:1],
        batch["attention_mask"][:1],
        answers[:1],
        mask[:1],
    )
    longer = torch.tensor([[2, 7, 3, 5]])
    nll_longer = vqa.answer_nll(
        vqa.encode(batch["image"], batch["input_ids"], batch["attention_mask"])[:1],
        batch["attention_mask"][:1],
        longer,
        torch.tensor([[1, 1, 1, 0]]),
    )
    assert torch.allclose(nll, nll_longer, atol=1e-5)


def test_task_heads_distil_from_momentum_copies_as_albef():
    ve = tiny("snli-ve", position_embedding="none", anchor_loss=False)
    assert not ve.cls_head_m[0].weight.requires_grad and not ve.fusion_m.layer[0].output.dense.weight.requires_grad
    batch = {**tiny_batch(), "label": torch.tensor([0, 1, 2, 2])}
    ve.classify_loss(batch).backward()
    torch.optim.SGD([p for p in ve.parameters() if p.requires_grad], lr=0.5).step()
    before = ve.cls_head_m[0].weight.clone()
    ve.classify_loss(batch)  # EMA: m <- 0.995 m + 0.005 online
    assert torch.allclose(ve.cls_head_m[0].weight, 0.995 * before + 0.005 * ve.cls_head[0].weight.detach())
    assert not torch.equal(ve.cls_head_m[0].weight, ve.cls_head[0].weight)
    plain = build_model(cfg(position_embedding="none", anchor_loss=False), {**TINY_SIZES, "alpha": 0.0}, task="vqa")
    assert not hasattr(plain, "text_decoder_m") and plain.alpha == 0.0
