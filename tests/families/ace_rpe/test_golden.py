"""ALBEF's released layouts load through keymap.py (the shared strict load) and reproduce the official outputs
(golden tensors). Sizes come from the fixture's config.json."""

import torch

from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.keymap import load_albef, new_key_allowed, read_checkpoint
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
        "embed_dim": cfg["config"]["embed_dim"],
        "queue_size": cfg["config"]["queue_size"],
        "dropout": 0.0,
        "pad_token_id": cfg.get("tokenizer.pad_token_id", 0),
    }


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
