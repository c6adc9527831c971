"""PSAC's two networks: the official code's (`network: official`) against its parameter count and each difference
from the paper's network; the scale's choice of network; the official checkpoint layout through the key map."""

from __future__ import annotations

import pytest
import torch

from repro.errors import ReproError
from repro.families.psac import build, keymap
from repro.families.psac.config import PSACConfig, for_scale
from repro.families.psac.model import CoAttention, layer_drop, timing_signal

SMALL = {
    "video_dim": 16,
    "frames": 6,
    "heads": 2,
    "vpsa_ffn": 8,
    "video_pos_dim": 5,
    "hidden": 8,
    "word_dim": 6,
    "char_dim": 4,
    "char_kernel": 2,
    "highway_layers": 1,
    "ds_convs": 2,
    "ds_kernel": 3,
    "qpsa_ffn": 8,
    "max_words": 7,
    "max_chars": 4,
    "classifier_hidden": 8,
}
OFFICIAL = {"arch": "psac", "network": "official"}
PAPER = {"arch": "psac", "network": "paper"}


def small(config, task="action", **kw):
    torch.manual_seed(0)
    return build.build_model(config, SMALL, task=task, num_words=30, num_chars=12, num_answers=9, **kw)


def test_official_network_has_the_official_codes_parameters_and_the_papers_does_not_move():
    for task in build.TASKS:
        for config, expected in ((OFFICIAL, build.official_parameters(task)), (PAPER, None)):
            with torch.device("meta"):  # shapes only
                parts = dict(build.parts(build.build_model(config, task=task)))
            used = sum(parts.values()) - parts["char_table"]
            if expected is not None:
                assert used == expected, task
                assert {k: parts[k] for k in build.OFFICIAL_PARTS} == build.OFFICIAL_PARTS
            else:
                assert used == (28_190_931 if task == "frameqa" else 26_402_306), task  # as committed before


def test_network_defaults_frames_dropout_and_the_scale_rule():
    official, paper = PSACConfig(**OFFICIAL), PSACConfig(**PAPER)
    assert (official.num_frames, official.dropout) == (36, 0.1)  # the code's
    assert (paper.num_frames, paper.dropout) == (35, 0.2)  # Sec. 4.3
    assert PSACConfig(**OFFICIAL, num_frames=35).num_frames == 35  # a set value is kept
    unset = PSACConfig(arch="psac")
    assert "network" not in unset.model_dump(mode="json")  # unset: out of the config hash
    assert for_scale(unset, "paper").network == "official" and for_scale(unset, "paper").num_frames == 36
    assert for_scale(unset, "synthetic") == PSACConfig(**PAPER)
    assert for_scale(PSACConfig(**PAPER), "paper").network == "paper"
    assert build.build_model({"arch": "psac"}, SMALL).network == "official"  # describe / repro model: paper scale
    assert build.build_model({"arch": "psac"}).video_encoder.table.shape == (36, 300)


def test_weight_norm_on_the_video_projection_and_the_classifier_only_in_the_official_network():
    from torch.nn.utils.parametrize import is_parametrized

    official, paper = small(OFFICIAL), small(PAPER)
    for layer in (official.video_proj, official.head.fc1, official.head.fc2):
        assert is_parametrized(layer, "weight")
    assert official.head.fc1.parametrizations.weight.original0.shape == ()  # dim=None: one scale per matrix
    assert official.video_proj.parametrizations.weight.original0.shape == (8, 1)  # one per output row
    assert not any(is_parametrized(m) for m in paper.modules())


def _inputs(model, name):
    seen = {}
    getattr(model, name).register_forward_pre_hook(lambda m, args: seen.setdefault("x", args[0].detach()))
    return seen


def test_vpsa_position_added_before_the_attention_with_an_outer_residual_in_the_official_network():
    official, paper = small(OFFICIAL).eval(), small(PAPER).eval()
    batch = build.example_batch(2, SMALL, task="action", num_words=30, num_chars=12)
    video = batch["video"]
    encoder = official.video_encoder
    seen = _inputs(encoder.blocks, "0")
    out = encoder(video)
    p = encoder.pos_proj(encoder.table[: video.shape[1]])
    torch.testing.assert_close(seen["x"], video + p)  # V + P enters the attention (code)
    assert encoder.table[0].abs().sum() == 0 and encoder.table.requires_grad  # row 0 zeros, trained
    torch.testing.assert_close(out - video, encoder.blocks[0](video + p))  # outer residual
    seen = _inputs(paper.video_encoder.blocks, "0")
    paper.video_encoder(video)
    torch.testing.assert_close(seen["x"], video)  # Eq. 7: P after the attention, not before


def test_qpsa_is_the_codes_block_timing_signal_first_no_output_projection():
    official, paper = small(OFFICIAL).eval(), small(PAPER).eval()
    block = official.question_encoder.block
    assert not hasattr(block, "w_o") and hasattr(paper.question_encoder.qpsa, "w_o")
    assert block.depthwise[0].bias is None and paper.question_encoder.convs[0].depthwise.bias is not None
    seen = _inputs(block.conv_norms, "0")
    x, mask = torch.randn(2, 7, 8), torch.ones(2, 7, dtype=torch.bool)
    block(x, mask)
    torch.testing.assert_close(seen["x"], x + timing_signal(7, 8))
    signal = timing_signal(3, 8)  # sines of the first half, cosines of the second; timescales 1 .. 10^4
    torch.testing.assert_close(signal[2, :4], torch.sin(2 * torch.logspace(0, -4, 4)))
    torch.testing.assert_close(signal[2, 4:], torch.cos(2 * torch.logspace(0, -4, 4)))
    assert official.question_encoder.char_emb.padding_idx is None  # the code's table trains index 0 too


def test_official_concatenation_puts_the_character_features_first():
    model = small(OFFICIAL).eval()
    with torch.no_grad():
        model.question_encoder.fuse.weight[:, :8] = 0  # the char part of Concat(Conv2D(C), W)
    batch = build.example_batch(2, SMALL, task="frameqa", num_words=30, num_chars=12)
    other = {**batch, "chars": torch.randint(2, 12, batch["chars"].shape)}
    torch.testing.assert_close(model(batch), model(other))


def test_q2v_product_is_sq_sv_t_v_officially_and_sv_sv_t_v_in_the_paper():
    torch.manual_seed(0)
    v, q = torch.randn(2, 5, 4), torch.randn(2, 3, 4)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    for official in (True, False):
        att = CoAttention(4, ("q2v",), official=official).eval()
        with torch.no_grad():
            att.w_f.weight.copy_(torch.cat([torch.zeros(4, 4), torch.eye(4)], dim=1))  # picks V_o * B
        s = (v @ att.w_v).unsqueeze(2) + (q @ att.w_q).unsqueeze(1) + (v * att.w_vq) @ q.transpose(1, 2) + att.bias
        s_q = s.masked_fill(~mask[:, None, :], float("-inf")).softmax(2)
        if official:
            expected = s_q @ s.softmax(1).transpose(1, 2) @ v
        else:
            s_v = s.masked_fill(~mask[:, None, :], -1e4).softmax(1) * mask[:, None, :]
            expected = s_v @ s_v.transpose(1, 2) @ v
        torch.testing.assert_close(att(v, q, mask), v * expected, rtol=1e-5, atol=1e-6)


def test_official_multiple_choice_encodes_the_video_once_per_candidate():
    for config, rows in ((OFFICIAL, 10), (PAPER, 2)):
        model = small(config)
        seen = _inputs(model, "video_encoder")
        model(build.example_batch(2, SMALL, task="action", num_words=30, num_chars=12))
        assert seen["x"].shape[0] == rows


def test_layer_drop_skips_a_whole_branch_in_training_only():
    branch, residual = torch.ones(3, 2), torch.full((3, 2), 5.0)
    assert torch.equal(layer_drop(branch, residual, 0.5, training=False), branch + residual)
    assert torch.equal(layer_drop(branch, residual, 1.0, training=True), residual)


@pytest.mark.parametrize("config", [{}, {"video_encoder": "none"}, {"char_embedding": False}, {"co_attention": []}])
@pytest.mark.parametrize("task", ["transition", "count"])
def test_official_network_trains_every_task_and_ablation(config, task):
    model = small({**OFFICIAL, **config}, task=task)
    batch = build.example_batch(3, SMALL, task=task, num_words=30, num_chars=12)
    batch["target"] = torch.tensor([1, 4, 0]) if task == "transition" else torch.tensor([1.0, 3.0, 9.0])
    loss = build.loss_step(task)(model, batch)
    loss.backward()
    assert torch.isfinite(loss) and model.question_encoder.word_emb.weight.grad is None
    model.eval()
    assert torch.equal(model(batch), model(batch))  # no layer drop or dropout in evaluation


# --- the official checkpoint layout (train.py saves model.state_dict()) ----------------------------------------


def official_state(s=SMALL, words=30, chars=12, answers=1, seed=0) -> dict[str, torch.Tensor]:
    """A state dict under the official code's names and shapes (lixiangpengcs/PSAC models/*), random values."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    dv, h, d, f = s["video_dim"], s["heads"], s["hidden"], s["vpsa_ffn"]
    out = {"vid_encoder.position_enc.weight": r(s["frames"], s["video_pos_dim"])}
    out |= {"vid_encoder.pos_linear.weight": r(dv, s["video_pos_dim"]), "vid_encoder.pos_linear.bias": r(dv)}
    layer = "vid_encoder.layer_stack.0."
    out |= {f"{layer}slf_attn.w_{n}s": r(h, dv, dv // h) for n in "qkv"}
    out |= {f"{layer}slf_attn.proj.linear.weight": r(dv, dv), f"{layer}slf_attn.proj.linear.bias": r(dv)}
    out |= {f"{layer}{m}.layer_norm.{p}": r(dv) for m in ("slf_attn", "pos_ffn") for p in ("a_2", "b_2")}
    out |= {f"{layer}pos_ffn.w_1.weight": r(f, dv, 1), f"{layer}pos_ffn.w_1.bias": r(f)}
    out |= {f"{layer}pos_ffn.w_2.weight": r(dv, f, 1), f"{layer}pos_ffn.w_2.bias": r(dv)}
    q = "ques_encoder."
    out |= {f"{q}word_emb.weight": r(words, s["word_dim"]), f"{q}char_emb.weight": r(chars, s["char_dim"])}
    out |= {f"{q}emb.conv2d.weight": r(d, s["char_dim"], 1, s["char_kernel"]), f"{q}emb.conv2d.bias": r(d)}
    out[f"{q}emb.conv1d.out.weight"] = r(d, d + s["word_dim"], 1)
    for i in range(s["highway_layers"]):
        for kind in ("linear", "gate"):
            out |= {f"{q}emb.high.{kind}.{i}.out.weight": r(d, d, 1), f"{q}emb.high.{kind}.{i}.out.bias": r(d)}
    e = f"{q}emb_enc."
    for i in range(s["ds_convs"]):
        out[f"{e}convs.{i}.depthwise_conv.weight"] = r(d, 1, s["ds_kernel"])
        out |= {f"{e}convs.{i}.pointwise_conv.weight": r(d, d, 1), f"{e}convs.{i}.pointwise_conv.bias": r(d)}
        out |= {f"{e}norm_C.{i}.weight": r(d), f"{e}norm_C.{i}.bias": r(d)}
    out |= {f"{e}self_att.mem_conv.out.weight": r(2 * d, d, 1), f"{e}self_att.query_conv.out.weight": r(d, d, 1)}
    out[f"{e}self_att.bias"] = r(1)
    out |= {f"{e}FFN_1.out.weight": r(s["qpsa_ffn"], d, 1), f"{e}FFN_1.out.bias": r(s["qpsa_ffn"])}
    out |= {f"{e}FFN_2.out.weight": r(d, s["qpsa_ffn"], 1), f"{e}FFN_2.out.bias": r(d)}
    out |= {f"{e}norm_{n}.{p}": r(d) for n in (1, 2) for p in ("weight", "bias")}
    out |= {f"{q}vqatt.w4V": r(d, 1), f"{q}vqatt.w4Q": r(d, 1), f"{q}vqatt.w4mlu": r(1, 1, d), f"{q}vqatt.bias": r(1)}
    out |= {f"{q}vqatt.trans.weight_g": r(d, 1), f"{q}vqatt.trans.weight_v": r(d, dv), f"{q}vqatt.trans.bias": r(d)}
    out[f"{q}vq_resizer.out.weight"] = r(d, 4 * d, 1)
    out[f"{q}model_enc_blks.0.convs.0.depthwise_conv.weight"] = r(d, 1, 5)  # constructed, never used (code)
    out[f"{q}out.w1.out.weight"] = r(1, 3 * d, 1)
    c = s["classifier_hidden"]
    out |= {"classifier.main.0.weight_g": r(()), "classifier.main.0.weight_v": r(c, d), "classifier.main.0.bias": r(c)}
    out |= {"classifier.main.3.weight_g": r(()), "classifier.main.3.weight_v": r(answers, c)}
    out["classifier.main.3.bias"] = r(answers)
    return out


def test_an_official_state_dict_loads_whole_and_its_heads_keep_their_meaning():
    state = official_state()
    model = keymap.build_for(state)
    report = keymap.load_psac(model, state)
    assert report.missing == [] and sorted(k for k, _ in report.unexpected) == [
        "ques_encoder.model_enc_blks.0.convs.0.depthwise_conv.weight",
        "ques_encoder.out.w1.out.weight",
    ]
    assert len(report.placed) + len(report.reshaped) == len(state) - 1  # mem_conv fills two of ours
    x = torch.randn(3, 16)
    w_qs = state["vid_encoder.layer_stack.0.slf_attn.w_qs"]
    ours = model.video_encoder.blocks[0].w_q(x).view(3, 2, 8)
    for i in range(2):  # head i's queries are x W_i^Q, as the code's bmm with w_qs[i]
        torch.testing.assert_close(ours[:, i], x @ w_qs[i])
    mem = state["ques_encoder.emb_enc.self_att.mem_conv.out.weight"][:, :, 0]
    assert torch.equal(model.question_encoder.block.w_v.weight, mem[8:])  # values: the second half (code)
    g, v = state["classifier.main.0.weight_g"], state["classifier.main.0.weight_v"]
    torch.testing.assert_close(model.head.fc1.weight, g * v / v.norm())  # weight_norm dim=None
    assert model.network == "official" and model.task == "action"


def test_a_bad_official_state_dict_is_one_line_naming_the_key_and_loads_nothing():
    state = official_state()
    model = keymap.build_for(state)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    renamed = {("ques_encoder.vqatt.W4V" if k == "ques_encoder.vqatt.w4V" else k): v for k, v in state.items()}
    missing = {k: v for k, v in state.items() if k != "vid_encoder.pos_linear.bias"}
    reshaped = {**state, "ques_encoder.vqatt.bias": torch.zeros(2)}
    for bad, key in ((renamed, "W4V"), (missing, "pos_proj.bias"), (reshaped, "vqatt.bias")):
        with pytest.raises(ReproError, match=key):
            keymap.load_psac(model, bad)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with pytest.raises(ReproError, match="official network"):
        keymap.load_psac(small(PAPER), state)


def test_the_official_layout_at_the_papers_sizes_is_the_official_count(tmp_path):
    full = {**build.paper_sizes(PSACConfig(**OFFICIAL)), "highway_layers": 2, "ds_convs": 4}
    state = official_state(full, words=50, chars=40, answers=1746)
    tables = {"ques_encoder.word_emb.weight", "ques_encoder.char_emb.weight"}
    unused = ("ques_encoder.model_enc_blks.", "ques_encoder.out.")
    used = sum(v.numel() for k, v in state.items() if k not in tables and not k.startswith(unused))
    assert used == build.official_parameters("frameqa")  # the fixture's shapes are the code's
    path = tmp_path / "model.pth"
    torch.save(state, path)
    model, report = keymap.convert_checkpoint(path, "psac")
    assert model.task == "frameqa" and model.sizes["frames"] == 36 and report.missing == []
