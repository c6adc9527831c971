"""PSAC's official network against the official code: the golden tensors `psac-action` and `psac-frameqa` load by
the key map and reproduce the scores and every named intermediate within 1e-5. Every size comes from the fixture's
config.json: its deviations from the released sizes over the code's released ones; a set made the same way with
other weights and sizes passes the same checks."""

from __future__ import annotations

import re

import pytest
import torch

from repro.families.psac import build, keymap
from repro.families.psac.config import PSACConfig
from tests import golden_variant
from tests.golden import Capture, assert_close, config, fixture, tensors

FIXTURES = ("psac-action", "psac-frameqa")


def official_build(folder) -> tuple[dict, dict, dict]:
    """(config, sizes, build arguments) of the official network the fixture's config.json describes: the released
    sizes (the code's, `build.paper_sizes` of the official network) with its deviations applied."""
    cfg = config(folder)
    args, dev = cfg["args"], cfg["deviations_from_released"]
    encoder = dev.get("build_temporalAtt.Encoder", {})
    words = dev.get("WordEmbedding")
    classifier = dev.get("SimpleClassifier")
    task = args["task"].lower()
    model = {
        "arch": "psac",
        "network": "official",
        "video_features": args["feat_category"],
        "vpsa_layers": args["vid_enc_layers"],
        "num_frames": args["num_frame"],
    }
    sizes = build.paper_sizes(PSACConfig(**model))
    d = dev.get("model_utils.D", sizes["hidden"])
    assert d == args["num_hid"] == dev.get("language_model.ctx_dim_m", d)  # the code needs them equal
    sizes.update(
        video_dim=args["feat_dim"],
        frames=args["num_frame"],
        heads=encoder.get("n_head", sizes["heads"]),
        question_heads=dev.get("model_utils.Nh", sizes["heads"]),
        vpsa_ffn=encoder.get("d_inner_hid", sizes["vpsa_ffn"]),
        video_pos_dim=encoder.get("v_emb_dim", sizes["video_pos_dim"]),
        hidden=d,
        qpsa_ffn=d,  # the code's FFN_1 is D -> D
        word_dim=dev.get("model_utils.Dword", sizes["word_dim"]),
        char_dim=dev.get("model_utils.Dchar", sizes["char_dim"]),
        max_words=args["max_len"],
        max_chars=args["char_max_len"],
    )
    assert (
        encoder.get("d_model", args["feat_dim"])
        == args["feat_dim"]
        == dev.get("language_model.ctx_dim", args["feat_dim"])
    )
    assert encoder.get("v_len", args["num_frame"]) == args["num_frame"]
    for key in ("d_k", "d_v"):
        assert encoder.get(key, sizes["video_dim"] // sizes["heads"]) * sizes["heads"] == sizes["video_dim"]
    if words is not None:
        assert [int(x) for x in re.findall(r"\d+", words)][-2:] == [sizes["word_dim"], sizes["char_dim"]]
    if classifier is not None:
        numbers = re.findall(r"[\d.]+", classifier)
        assert int(numbers[0]) == d
        sizes["classifier_hidden"] = int(numbers[1])
    answers = cfg.get("num_ans_candidates", 1) if task == "frameqa" else 1
    dictionary = cfg["dictionary"]
    return (
        model,
        sizes,
        {"task": task, "num_words": dictionary["ntoken"], "num_chars": dictionary["c_ntoken"], "num_answers": answers},
    )


def check(folder) -> None:
    model_config, sizes, args = official_build(folder)
    model = build.build_model(model_config, sizes, **args).eval()
    official = keymap.read_checkpoint(folder / "checkpoint.pth")
    report = keymap.load_psac(model, official)
    assert report.missing == []
    assert all(k.startswith(("ques_encoder.model_enc_blks.", "ques_encoder.out.")) for k, _ in report.unexpected)
    inputs, expected = tensors(folder, "inputs.pt"), tensors(folder, "outputs.pt")
    choices = config(folder).get("num_choice", 1) if args["task"] in ("action", "transition") else 1
    rows = inputs["v"].shape[0] // choices  # the code tiles each video once per candidate
    assert torch.equal(inputs["v"], inputs["v"][::choices].repeat_interleave(choices, 0))
    batch = {
        "video": inputs["v"][::choices],
        "words": inputs["q_w"].view(rows, choices, -1),
        "chars": inputs["q_c"].view(rows, choices, *inputs["q_c"].shape[1:]),
    }
    layers = model_config["vpsa_layers"]
    capture = Capture(
        model,
        {
            "vid_encoder": f"video_encoder.blocks.{layers - 1}",  # before the code's outer residual
            "ques_encoder.emb_enc": "question_encoder.block",
            "ques_encoder.vq_resizer": "co_attention.w_f",
            "classifier": "head",
        },
    )
    fed = {}
    hooks = [
        model.co_attention.w_f.register_forward_pre_hook(lambda m, a: fed.__setitem__("ques_encoder.vqatt", a[0])),
        model.head.register_forward_pre_hook(lambda m, a: fed.__setitem__("ques_encoder", a[0])),
    ]
    with torch.no_grad():
        scores = model(batch)
    capture.close()
    for h in hooks:
        h.remove()
    ours = {**capture.out, **fed}
    for name in ("ques_encoder.emb_enc", "ques_encoder.vqatt", "ques_encoder.vq_resizer"):
        ours[name] = ours[name].transpose(1, 2)  # the code's convolutions are channels-first
    # the forward's return value: Action's scores per candidate, FrameQA's log-softmax of the logits
    ours["scores"] = scores.log_softmax(-1) if args["task"] == "frameqa" else scores
    for name, value in ours.items():
        assert_close(value, expected[name], name)
    assert set(ours) == set(expected), f"outputs not compared: {set(expected) - set(ours)}"


@pytest.mark.parametrize("name", FIXTURES)
def test_official_checkpoint_reproduces_the_official_outputs(name):
    check(fixture(name))


@pytest.mark.parametrize("name", FIXTURES)
def test_sizes_read_off_the_file_are_the_configs(name):
    folder = fixture(name)
    model_config, sizes, args = official_build(folder)
    shapes, read = keymap.sizes_from_state(keymap.read_checkpoint(folder / "checkpoint.pth"))
    assert read == args
    assert {k: sizes[k] for k in shapes["sizes"]} == shapes["sizes"]
    assert {k: model_config[k] for k in shapes["config"]} == shapes["config"]


def test_another_set_with_other_weights_passes(tmp_path, monkeypatch):
    """A second set made the same way with other weights (video heads, feed-forward units, classifier units and
    answers permuted, the feed-forward and classifier widened, the word and character tables longer, the unused
    blocks redrawn; config.json saying so) passes the same checks; a weight changed without its outputs fails."""
    root = tmp_path / "golden"
    shipped = {name: fixture(name) for name in FIXTURES}
    for i, (name, folder) in enumerate(shipped.items()):
        golden_variant.psac(folder, root / name, seed=i + 1)
    monkeypatch.setenv("REPRO_GOLDEN_TENSORS", str(root))
    for name in FIXTURES:
        check(fixture(name))
        assert official_build(fixture(name))[1]["vpsa_ffn"] != official_build(shipped[name])[1]["vpsa_ffn"]
    golden_variant.perturb_one_weight(root / "psac-action", "vid_encoder.layer_stack.0.slf_attn.w_qs")
    with pytest.raises(AssertionError, match="max abs difference"):
        check(fixture("psac-action"))
