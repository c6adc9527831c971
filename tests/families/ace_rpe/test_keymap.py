"""Released ALBEF checkpoints load by the key map: ALBEF's key names, random weights, a tiny config.

The ALBEF-layout state dict is written here from ALBEF's module structure (salesforce/ALBEF
models/vit.py and models/xbert.py names), not from our model, and the reference ITC similarity is
computed from it directly: a ViT forward written out below and transformers' BertModel, whose key
names are xbert's.
"""

import pytest
import torch
import torch.nn.functional as F

from repro.errors import ReproError
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.keymap import load_albef, new_key_allowed
from tests.families.ace_rpe.tiny import TINY_SIZES

S = TINY_SIZES
D, FFN, V, P, E, Q = S["hidden_size"], S["intermediate_size"], S["vocab_size"], S["max_positions"], S["embed_dim"], 8
LAYERS = S["text_layers"] + S["fusion_layers"]


def _r(*shape):
    return torch.randn(*shape) * 0.1


def _vit(prefix, grid):
    p = S["patch_size"]
    out = {
        f"{prefix}.cls_token": _r(1, 1, D),
        f"{prefix}.pos_embed": _r(1, grid * grid + 1, D),
        f"{prefix}.patch_embed.proj.weight": _r(D, 3, p, p),
        f"{prefix}.patch_embed.proj.bias": _r(D),
        f"{prefix}.norm.weight": 1 + _r(D),
        f"{prefix}.norm.bias": _r(D),
    }
    for b in range(S["image_layers"]):
        k = f"{prefix}.blocks.{b}"
        out.update(
            {
                f"{k}.norm1.weight": 1 + _r(D),
                f"{k}.norm1.bias": _r(D),
                f"{k}.attn.qkv.weight": _r(3 * D, D),
                f"{k}.attn.qkv.bias": _r(3 * D),
                f"{k}.attn.proj.weight": _r(D, D),
                f"{k}.attn.proj.bias": _r(D),
                f"{k}.norm2.weight": 1 + _r(D),
                f"{k}.norm2.bias": _r(D),
                f"{k}.mlp.fc1.weight": _r(4 * D, D),
                f"{k}.mlp.fc1.bias": _r(4 * D),
                f"{k}.mlp.fc2.weight": _r(D, 4 * D),
                f"{k}.mlp.fc2.bias": _r(D),
            }
        )
    return out


def _bert(prefix, vocab=V):
    out = {
        f"{prefix}.embeddings.word_embeddings.weight": _r(vocab, D),
        f"{prefix}.embeddings.position_embeddings.weight": _r(P, D),
        f"{prefix}.embeddings.token_type_embeddings.weight": _r(2, D),
        f"{prefix}.embeddings.LayerNorm.weight": 1 + _r(D),
        f"{prefix}.embeddings.LayerNorm.bias": _r(D),
        f"{prefix}.embeddings.position_ids": torch.arange(P).expand(1, -1),
    }
    for i in range(LAYERS):
        blocks = ["attention"] + (["crossattention"] if i >= S["text_layers"] else [])
        for block in blocks:
            k = f"{prefix}.encoder.layer.{i}.{block}"
            for name in ("self.query", "self.key", "self.value", "output.dense"):
                out[f"{k}.{name}.weight"], out[f"{k}.{name}.bias"] = _r(D, D), _r(D)
            out[f"{k}.output.LayerNorm.weight"], out[f"{k}.output.LayerNorm.bias"] = 1 + _r(D), _r(D)
        k = f"{prefix}.encoder.layer.{i}"
        out[f"{k}.intermediate.dense.weight"], out[f"{k}.intermediate.dense.bias"] = _r(FFN, D), _r(FFN)
        out[f"{k}.output.dense.weight"], out[f"{k}.output.dense.bias"] = _r(D, FFN), _r(D)
        out[f"{k}.output.LayerNorm.weight"], out[f"{k}.output.LayerNorm.bias"] = 1 + _r(D), _r(D)
    return out


def _mlm(prefix, words):
    bias = _r(words.shape[0])
    return {
        f"{prefix}.cls.predictions.bias": bias,
        f"{prefix}.cls.predictions.transform.dense.weight": _r(D, D),
        f"{prefix}.cls.predictions.transform.dense.bias": _r(D),
        f"{prefix}.cls.predictions.transform.LayerNorm.weight": 1 + _r(D),
        f"{prefix}.cls.predictions.transform.LayerNorm.bias": _r(D),
        f"{prefix}.cls.predictions.decoder.weight": words,  # tied to the word embeddings
        f"{prefix}.cls.predictions.decoder.bias": bias,
    }


def albef_state(layout: str, grid: int, vocab: int = V) -> dict[str, torch.Tensor]:
    """ALBEF's pre-training (`ALBEF_4M.pth`) or retrieval (`flickr30k.pth`) key layout, random weights."""
    torch.manual_seed(1)
    state = {}
    for m in ("", "_m"):
        state.update(_vit(f"visual_encoder{m}", grid))
        if layout == "pretrain":
            bert = _bert(f"text_encoder{m}.bert", vocab)
            state.update(bert)
            state.update(_mlm(f"text_encoder{m}", bert[f"text_encoder{m}.bert.embeddings.word_embeddings.weight"]))
        else:
            state.update(_bert(f"text_encoder{m}", vocab))
        for proj in ("vision_proj", "text_proj"):
            state[f"{proj}{m}.weight"], state[f"{proj}{m}.bias"] = _r(E, D), _r(E)
    state.update({"temp": torch.tensor(0.07), "itm_head.weight": _r(2, D), "itm_head.bias": _r(2)})
    state["image_queue"] = F.normalize(torch.randn(E, Q), dim=0)
    state["text_queue"] = F.normalize(torch.randn(E, Q), dim=0)
    state["queue_ptr"] = torch.zeros(1, dtype=torch.long)
    if layout == "retrieval":
        state["idx_queue"] = torch.full((1, Q), -100)
    return state


def deit_and_bert(vocab: int = V, grid: int = 2) -> tuple[dict, dict]:
    """DeiT-B/16's and bert-base-uncased's files as released (timm keys with a classifier; BERT's legacy
    LayerNorm gamma/beta, pooler and next-sentence head, no cross-attention), at the tiny sizes."""
    state = albef_state("pretrain", grid, vocab)
    deit = {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith("visual_encoder.")}
    deit.update({"head.weight": _r(1000, D), "head.bias": _r(1000)})
    bert = {}
    for key, value in state.items():
        if key.startswith("text_encoder.") and ".crossattention." not in key:
            key = (
                key.split(".", 1)[1]
                .replace("LayerNorm.weight", "LayerNorm.gamma")
                .replace("LayerNorm.bias", "LayerNorm.beta")
            )
            bert[key] = value
    bert.update({"bert.pooler.dense.weight": _r(D, D), "bert.pooler.dense.bias": _r(D)})
    bert.update({"cls.seq_relationship.weight": _r(2, D), "cls.seq_relationship.bias": _r(2)})
    return deit, bert


def test_pre_training_starts_from_deit_and_bert_as_albef():
    from repro.families.ace_rpe.keymap import albef_initialisation

    deit, bert = deit_and_bert()
    model = build_model({"arch": "albef", "position_embedding": "ace-rpe"}, TINY_SIZES, task="pretrain")
    report = load_albef(model, albef_initialisation(deit, bert))
    ours = model.state_dict()
    for prefix in ("visual_encoder", "visual_encoder_m"):  # qkv split into the three projections
        assert torch.equal(
            ours[f"{prefix}.layers.1.attention.k_proj.weight"], deit["blocks.1.attn.qkv.weight"].chunk(3)[1]
        )
    for prefix in ("text_encoder", "text_encoder_m"):
        got = ours[f"{prefix}.embeddings.LayerNorm.weight"]
        assert torch.equal(got, bert["bert.embeddings.LayerNorm.gamma"])
    top = S["text_layers"]  # BERT's upper layers are the fusion layers
    assert torch.equal(
        ours["fusion.layer.0.attention.self.query.weight"],
        bert[f"bert.encoder.layer.{top}.attention.self.query.weight"],
    )
    assert torch.equal(
        ours["mlm_head.predictions.transform.dense.weight"], bert["cls.predictions.transform.dense.weight"]
    )
    new = set(report.new)
    assert "fusion.layer.0.crossattention.self.key.weight" in new and "itm_head.weight" in new
    assert all(k.endswith("mask_token") for k in new if k.startswith(("visual_encoder", "text_encoder")))  # MIM's


def reference_similarity(state, image, ids, mask):
    """ITC similarity straight from ALBEF's keys: the ViT forward, and BertModel for the text layers."""
    from transformers import BertConfig, BertModel

    p, h = S["patch_size"], S["heads"]
    v = {k[len("visual_encoder.") :]: t for k, t in state.items() if k.startswith("visual_encoder.")}
    x = F.conv2d(image, v["patch_embed.proj.weight"], v["patch_embed.proj.bias"], stride=p).flatten(2).transpose(1, 2)
    x = torch.cat([v["cls_token"].expand(len(x), -1, -1), x], 1) + v["pos_embed"]
    for b in range(S["image_layers"]):
        k = f"blocks.{b}."
        y = F.layer_norm(x, (D,), v[k + "norm1.weight"], v[k + "norm1.bias"], 1e-6)
        qkv = F.linear(y, v[k + "attn.qkv.weight"], v[k + "attn.qkv.bias"])
        q, kk, vv = qkv.reshape(len(x), -1, 3, h, D // h).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ kk.transpose(-1, -2) * (D // h) ** -0.5, -1) @ vv
        x = x + F.linear(a.transpose(1, 2).reshape(len(x), -1, D), v[k + "attn.proj.weight"], v[k + "attn.proj.bias"])
        y = F.layer_norm(x, (D,), v[k + "norm2.weight"], v[k + "norm2.bias"], 1e-6)
        y = F.linear(F.gelu(F.linear(y, v[k + "mlp.fc1.weight"], v[k + "mlp.fc1.bias"])), v[k + "mlp.fc2.weight"])
        x = x + y + v[k + "mlp.fc2.bias"]
    x = F.layer_norm(x, (D,), v["norm.weight"], v["norm.bias"], 1e-6)
    image_feat = F.normalize(F.linear(x[:, 0], state["vision_proj.weight"], state["vision_proj.bias"]), dim=-1)

    cfg = BertConfig(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=S["text_layers"],
        num_attention_heads=h,
        intermediate_size=FFN,
        max_position_embeddings=P,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    bert = BertModel(cfg, add_pooling_layer=False).eval()
    prefix = "text_encoder.bert." if "text_encoder.bert.embeddings.word_embeddings.weight" in state else "text_encoder."
    text = {k[len(prefix) :]: t for k, t in state.items() if k.startswith(prefix)}
    text = {k: t for k, t in text.items() if k in bert.state_dict()}
    bert.load_state_dict(text)
    t = bert(input_ids=ids, attention_mask=mask).last_hidden_state
    text_feat = F.normalize(F.linear(t[:, 0], state["text_proj.weight"], state["text_proj.bias"]), dim=-1)
    return image_feat @ text_feat.T


def _inputs():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, V, (3, 6), generator=g)
    mask = torch.ones(3, 6, dtype=torch.long)
    mask[2, 4:] = 0
    return torch.randn(2, 3, 32, 32, generator=g), ids, mask


@pytest.mark.parametrize("layout, task", [("retrieval", "retrieval"), ("pretrain", "pretrain")])
def test_albef_keys_load_completely_and_give_the_same_itc_similarity(layout, task):
    grid = S["image_size"] // S["patch_size"]
    state = albef_state(layout, grid)
    model = build_model(
        ALBEFConfig(arch="albef", position_embedding="none", mim_loss=False), {**S, "queue_size": Q}, task=task
    ).eval()
    report = load_albef(model, state)
    assert report.new == []  # nothing of ours left out
    assert sorted(report.dropped) == sorted(k for k in state if k.endswith("embeddings.position_ids"))
    image, ids, mask = _inputs()
    with torch.no_grad():
        ours = model.similarity(image, ids, mask)
        want = reference_similarity(state, image, ids, mask)
    assert torch.allclose(ours, want, atol=1e-5)
    # the momentum copies and fusion layers came from the file too
    bert = "text_encoder.bert" if layout == "pretrain" else "text_encoder"
    key = f"{bert}.encoder.layer.{S['text_layers']}.crossattention.self.query.weight"
    assert torch.equal(model.fusion.layer[0].crossattention.self.query.weight, state[key])
    assert torch.equal(model.visual_encoder_m.embeddings.cls_token, state["visual_encoder_m.cls_token"])


def test_a_pretraining_checkpoint_starts_an_ace_rpe_retrieval_row():
    grid = S["image_size"] // S["patch_size"]
    state = albef_state("pretrain", grid // 2)  # pre-trained at half the resolution: pos_embed interpolated
    model = build_model(ALBEFConfig(arch="albef"), {**S, "queue_size": Q}, task="retrieval")
    report = load_albef(model, state)
    assert report.new and all(new_key_allowed(k) for k in report.new)
    assert "idx_queue" in report.new and any(".position." in k for k in report.new)
    assert any(k.startswith("text_encoder.cls.") for k in report.dropped)  # retrieval has no MLM head
    assert model.visual_encoder.embeddings.position_embeddings.shape[1] == grid * grid + 1


def test_unknown_or_misshapen_keys_are_refused():
    grid = S["image_size"] // S["patch_size"]
    model = build_model(ALBEFConfig(arch="albef", position_embedding="none"), {**S, "queue_size": Q})
    state = albef_state("retrieval", grid)
    with pytest.raises(ReproError, match="unknown key"):
        load_albef(model, {**state, "decoder.weight": torch.zeros(1)})
    state["itm_head.weight"] = torch.zeros(3, D)
    with pytest.raises(ReproError, match="itm_head.weight has shape"):
        load_albef(model, state)


def test_checkpoint_files_as_albef_saves_them(tmp_path):
    from repro.families.ace_rpe.keymap import read_checkpoint

    grid = S["image_size"] // S["patch_size"]
    state = albef_state("retrieval", grid)
    torch.save({"model": state, "config": {"queue_size": Q}, "epoch": 4}, tmp_path / "flickr30k.pth")
    model = build_model(ALBEFConfig(arch="albef", position_embedding="none"), {**S, "queue_size": Q})
    assert load_albef(model, read_checkpoint(tmp_path / "flickr30k.pth")).new == []
    (tmp_path / "bad.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ReproError, match="not a readable PyTorch checkpoint"):
        read_checkpoint(tmp_path / "bad.pth")


def _albef_task_state(task: str, grid: int) -> dict[str, torch.Tensor]:
    """ALBEF's fine-tuned VQA (`model_vqa.py`), SNLI-VE (`model_ve.py`) or NLVR2 (`model_nlvr.py`) layout:
    ViT, BertModel and the head (VQA: a BertLMHeadModel, every layer cross-attending; else `cls_head`)."""
    torch.manual_seed(2)
    state = {}
    for m in ("", "_m"):
        state.update(_vit(f"visual_encoder{m}", grid))
        state.update(_bert(f"text_encoder{m}"))
        if task == "vqa":  # xbert's decoder layers 0..F-1 are cross-attending: the fusion part of _bert renumbered
            tx = S["text_layers"]
            for key, value in _bert(f"text_decoder{m}.bert").items():
                layer = key.split("encoder.layer.")[1].split(".")[0] if "encoder.layer." in key else None
                if layer is None:
                    state[key] = value
                elif int(layer) >= tx:
                    state[key.replace(f"encoder.layer.{layer}.", f"encoder.layer.{int(layer) - tx}.")] = value
            words = state[f"text_decoder{m}.bert.embeddings.word_embeddings.weight"]
            state.update(_mlm(f"text_decoder{m}", words))
        else:
            classes = 2 if task == "nlvr2" else 3
            state[f"cls_head{m}.0.weight"], state[f"cls_head{m}.0.bias"] = _r(D, D), _r(D)
            state[f"cls_head{m}.2.weight"], state[f"cls_head{m}.2.bias"] = _r(classes, D), _r(classes)
        if task == "nlvr2":  # model_nlvr.py: fusion layer k twice (6 + 2k, 6 + 2k + 1), key and value shared
            tx, bert = S["text_layers"], f"text_encoder{m}.encoder.layer."
            fusion = {k: v for k, v in state.items() if k.startswith(bert) and int(k[len(bert) :].split(".")[0]) >= tx}
            for key in fusion:
                del state[key]
            for key, value in fusion.items():
                k, rest = int(key[len(bert) :].split(".")[0]) - tx, key[len(bert) :].split(".", 1)[1]
                shared = ".crossattention.self.key." in key or ".crossattention.self.value." in key
                state[f"{bert}{tx + 2 * k}.{rest}"] = value
                state[f"{bert}{tx + 2 * k + 1}.{rest}"] = value if shared else _r(*value.shape)
    return state


@pytest.mark.parametrize("task", ["vqa", "snli-ve", "nlvr2"])
def test_fine_tuned_task_checkpoints_load_completely(task):
    grid = S["image_size"] // S["patch_size"]
    state = _albef_task_state(task, grid)
    model = build_model(ALBEFConfig(arch="albef", position_embedding="none", anchor_loss=False), S, task=task)
    report = load_albef(model, state)
    assert report.new == [] and all(k.endswith("position_ids") for k in report.dropped)
    key = f"text_encoder.encoder.layer.{S['text_layers']}.crossattention.self.key.weight"
    assert torch.equal(model.fusion.layer[0].crossattention.self.key.weight, state[key])
    if task == "nlvr2":  # layer 6 + 2k + 1 of ALBEF's 18 is the right-image copy of fusion layer k
        key = f"text_encoder.encoder.layer.{S['text_layers'] + 3}.crossattention.self.query.weight"
        assert torch.equal(model.fusion.layer[3].crossattention.self.query.weight, state[key])
    elif task == "vqa":
        decoder = model.text_decoder.bert.encoder.layer[1].crossattention.self.query.weight
        assert torch.equal(decoder, state["text_decoder.bert.encoder.layer.1.crossattention.self.query.weight"])
    else:
        assert torch.equal(model.cls_head_m[2].weight, state["cls_head_m.2.weight"])
