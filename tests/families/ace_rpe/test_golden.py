"""ALBEF's released layouts load through keymap.py (the shared strict load) and reproduce the official outputs
(golden tensors). Sizes come from the fixture's config.json."""

import copy
import re

import pytest
import torch
import torch.nn.functional as F
from transformers import BertLMHeadModel

from repro.errors import ReproError
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.keymap import load_albef, new_key_allowed, read_checkpoint
from repro.families.ace_rpe.model import bert_config
from tests.golden import Capture, assert_close, config, fixture, tensors


def albef_sizes(cfg: dict) -> dict:
    bert, vit = cfg["bert_config"], cfg["visual_encoder"]
    assert bert["hidden_size"] == vit["embed_dim"] and bert["num_attention_heads"] == vit["num_heads"]
    assert bert["intermediate_size"] == vit["mlp_ratio"] * vit["embed_dim"]
    return {
        "hidden_size": bert["hidden_size"],
        "heads": bert["num_attention_heads"],
        "intermediate_size": bert["intermediate_size"],
        "image_layers": vit["depth"],
        "text_layers": bert["fusion_layer"],
        "fusion_layers": bert["num_hidden_layers"] - bert["fusion_layer"],
        "image_size": cfg["config"]["image_res"],
        "patch_size": vit["patch_size"],
        "vocab_size": bert["vocab_size"],
        "max_positions": bert["max_position_embeddings"],
        "dropout": 0.0,
        "pad_token_id": cfg.get("tokenizer.pad_token_id", 0),
        # a task model has momentum copies (`*_m`) only with distillation (ALBEF's `distill`)
        "alpha": cfg["config"].get("alpha", 0.4) if cfg["config"].get("distill", True) else 0.0,
    } | {key: cfg["config"][key] for key in ("embed_dim", "queue_size") if key in cfg["config"]}


def test_albef_retrieval_reproduces_official_outputs():
    folder = fixture("albef-retrieval")
    cfg = config(folder)
    config_ = ALBEFConfig(arch="albef", position_embedding="none", mim_loss=False)
    model = build_model(config_, albef_sizes(cfg), task="retrieval").eval()
    report = load_albef(model, read_checkpoint(folder / "checkpoint.pth"), new_key_allowed)
    assert all(new_key_allowed(k) for k in report.missing)
    assert all(k.endswith("position_ids") for k in report.dropped)
    inputs, expected = tensors(folder, "inputs.pt"), tensors(folder, "outputs.pt")
    image, ids, mask = inputs["image"], inputs["text.input_ids"], inputs["text.attention_mask"]
    names = {"visual_encoder.blocks.0": "visual_encoder.layers.0"}
    names["text_encoder.encoder.layer.0"] = "text_encoder.encoder.layer.0"
    capture = Capture(model, {k: v for k, v in names.items() if k in expected})
    with torch.no_grad():
        image_embeds = model.image_embeds(image)
        text_embeds = model.text_embeds(ids, mask)
        image_feat, text_feat = model.image_feat(image_embeds), model.text_feat(text_embeds)
        fusion = model.fuse(text_embeds, mask, image_embeds)
        ours = {
            "image_embeds": image_embeds,
            "image_feat": image_feat,
            "text_embeds": text_embeds,
            "text_feat": text_feat,
            "sim_i2t": image_feat @ text_feat.T,
            "itc_logits_i2t": image_feat @ text_feat.T / model.temp,
            "fusion": fusion,
            "itm_logits": model.itm_head(fusion[:, 0]),
        }
    capture.close()
    ours |= capture.out
    for name, value in ours.items():
        assert_close(value, expected[name], name)
    # the first fusion layer runs inside our Fusion module's loop (no module call to hook); `fusion` covers it
    assert set(expected) - set(ours) <= {f"text_encoder.encoder.layer.{cfg['bert_config']['fusion_layer']}"}


def layer_count(state: dict, prefix: str) -> int:
    """How many layers `prefix.N.` the checkpoint holds."""
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)\.")
    return 1 + max(int(m.group(1)) for key in state if (m := pattern.match(key)))


def test_albef_vqa_reproduces_official_outputs():
    folder = fixture("albef-vqa")
    cfg = config(folder)
    state = read_checkpoint(folder / "checkpoint.pth")
    model = build_model(
        ALBEFConfig(arch="albef", position_embedding="none", mim_loss=False), albef_sizes(cfg), task="vqa"
    ).eval()
    # ALBEF's model_vqa.py fixes the answer decoder at 6 layers (ALBEF's fusion layers at full size, as
    # TaskALBEF builds it); the fixture's 2 fusion layers differ, so the decoder takes the checkpoint's depth
    layers = layer_count(state, "text_decoder.bert.encoder.layer")
    assert layers == 6  # model_vqa.py's num_hidden_layers for the decoder, whatever the set's sizes
    for name in ("text_decoder", "text_decoder_m"):
        setattr(model, name, BertLMHeadModel(bert_config(model.sizes, layers, cross=True)).eval())
    report = load_albef(model, state, new_key_allowed)
    assert report.missing == [] and all(k.endswith("position_ids") for k in report.dropped)
    assert any(src.endswith("attn.qkv.weight") for src, _, _ in report.reshaped)
    inputs, expected = tensors(folder, "inputs.pt"), tensors(folder, "outputs.pt")
    batch = {"image": inputs["image"], "input_ids": inputs["text.input_ids"]}
    batch["attention_mask"] = mask = inputs["text.attention_mask"]
    answers, answer_mask = inputs["answer.input_ids"], inputs["answer.attention_mask"]
    n, k = mask.shape[0], answers.shape[0]
    names = {
        "visual_encoder.blocks.0": "visual_encoder.layers.0",
        "text_decoder.bert.encoder.layer.0": "text_decoder.bert.encoder.layer.0",
    }
    capture = Capture(model, names)
    with torch.no_grad():
        states = model.encode(batch["image"], batch["input_ids"], mask)
        pairs = model.answer_logits(  # every (question, answer) pair, question-major, teacher-forced
            states.repeat_interleave(k, 0), mask.repeat_interleave(k, 0), answers.repeat(n, 1), answer_mask.repeat(n, 1)
        )
    capture.close()
    ours = {"question_states": states, "answer_logits": pairs} | capture.out
    with torch.no_grad():  # ALBEF's rank_answer: first-token probability, then the whole answer, softmax over k
        first = model.text_decoder(
            input_ids=answers[:1, :1].expand(n, 1), encoder_hidden_states=states, encoder_attention_mask=mask
        ).logits[:, 0]
        top_probs, top_ids = F.softmax(first, dim=1).index_select(1, answers[:, 1]).topk(k, dim=1)
        nll = model.answer_nll(
            states.repeat_interleave(k, 0),
            mask.repeat_interleave(k, 0),
            answers[top_ids.reshape(-1)],
            answer_mask[top_ids.reshape(-1)],
        ).view(n, k)
        probs, rerank = F.softmax(top_probs.log() - nll, dim=-1).topk(k, dim=1)
        chosen = model.rank_answers(batch, answers, answer_mask, k=k)
    ours |= {"topk_ids": top_ids.gather(1, rerank), "topk_probs": probs}
    for name, value in ours.items():
        assert_close(value, expected[name], name)
    assert torch.equal(chosen, expected["topk_ids"][:, 0])  # what the VQA evaluation answers
    # the first fusion layer runs inside our Fusion module's loop (no module call to hook); question_states covers it
    assert set(expected) - set(ours) == {f"text_encoder.encoder.layer.{cfg['bert_config']['fusion_layer']}"}


def test_albef_nlvr2_reproduces_official_outputs():
    folder = fixture("albef-nlvr2")
    cfg = config(folder)
    state = read_checkpoint(folder / "checkpoint.pth")
    text_layers = cfg["bert_config"]["fusion_layer"]
    # model_nlvr.py fixes the text encoder at 18 layers: the fusion layers above fusion_layer come in (left, right)
    # pairs, each a copy of one pre-trained fusion layer (PairFusion's 2 x fusion_layers)
    sizes = albef_sizes(cfg) | {"fusion_layers": (layer_count(state, "text_encoder.encoder.layer") - text_layers) // 2}
    config_ = ALBEFConfig(arch="albef", position_embedding="none", mim_loss=False)
    model = build_model(config_, sizes, task="nlvr2").eval()
    # its share_cross_attention ties the key and value of layers 6 + 2i and 7 + 2i, i < 6 (a range written for
    # fusion_layer 6, where that is every pair, as PairFusion ties them); at the fixture's fusion_layer 2 the
    # pairs below layer 6 stay apart, and the strict load refuses to put their two keys into one tensor
    untied = [k for k in range(sizes["fusion_layers"]) if text_layers + 2 * k < 6]
    if untied:  # a set made at fusion_layer 6 has none
        with pytest.raises(ReproError, match=r"crossattention\.self\.(key|value)\.(weight|bias) differ.*\(tied\)"):
            load_albef(model, state, new_key_allowed)
    for k in untied:
        first, second = model.fusion.layer[2 * k].crossattention.self, model.fusion.layer[2 * k + 1].crossattention.self
        first.key, first.value = copy.deepcopy(second.key), copy.deepcopy(second.value)
    report = load_albef(model, state, new_key_allowed)
    assert report.missing == [] and all(k.endswith("position_ids") for k in report.dropped)
    inputs, expected = tensors(folder, "inputs.pt"), tensors(folder, "outputs.pt")
    left, right = inputs["image"].chunk(2)  # the official loop's [left images; right images]
    batch = {"image": left, "image_right": right, "input_ids": inputs["text.input_ids"]}
    batch["attention_mask"] = inputs["text.attention_mask"]
    with torch.no_grad():
        capture = Capture(model, {"visual_encoder.blocks.0": "visual_encoder.layers.0"})
        model.image_embeds(inputs["image"])  # both images in one batch, as the official forward
        capture.close()
        ours = dict(capture.out)
        capture = Capture(model, {"text_encoder.encoder.layer.0": "text_encoder.encoder.layer.0"})
        ours["prediction"] = model.logits(batch)
        capture.close()
    ours |= capture.out
    for name, value in ours.items():
        assert_close(value, expected[name], name)
    # the first fusion layer runs inside PairFusion's loop (no module call to hook); `prediction` covers it
    assert set(expected) - set(ours) == {f"text_encoder.encoder.layer.{text_layers}"}
