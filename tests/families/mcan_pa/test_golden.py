"""mcan-vqa's checkpoint layout loads by the key map and reproduces the official outputs (golden tensors)."""

import torch

from repro.families.mcan_pa.build import build_model
from repro.families.mcan_pa.keymap import load_mcan, read_checkpoint, sizes_from_official, sizes_from_state
from tests.golden import Capture, assert_close, config, fixture, tensors


def _model(folder):
    cfg = config(folder)
    sizes = sizes_from_official(cfg["__C"])
    return build_model({"arch": "mcan"}, num_tokens=cfg["token_size"], num_answers=cfg["answer_size"], sizes=sizes)


def test_mcan_reproduces_official_outputs():
    folder = fixture("mcan")
    model = _model(folder).eval()
    report = load_mcan(model, read_checkpoint(folder / "checkpoint.pth"))
    assert report.missing == [] and report.unexpected == [] and report.reshaped == []
    assert len(report.placed) == len(model.state_dict())

    inputs, expected = tensors(folder, "inputs.pt"), tensors(folder, "outputs.pt")
    layers = config(folder)["__C"]["LAYER"]
    names = {f"backbone.enc_list.{i}": f"encoder.{i}" for i in range(layers)}
    names |= {f"backbone.dec_list.{i}": f"decoder.{i}" for i in range(layers)}
    names["proj"] = "classifier"
    capture = Capture(model, {k: v for k, v in names.items() if k in expected})
    with torch.no_grad():
        logits = model({"tokens": inputs["ques_ix"], "features": inputs["img_feat"]})
    capture.close()
    assert_close(torch.sigmoid(logits), expected["output"], "output")
    checked = {"output"}
    for name, value in capture.out.items():
        assert_close(value, expected[name], name)
        checked.add(name)
    assert checked == set(expected), f"outputs not compared: {set(expected) - checked}"


def test_sizes_read_off_the_checkpoint_match_the_config():
    folder = fixture("mcan")
    cfg = config(folder)
    sizes, tokens, answers = sizes_from_state(read_checkpoint(folder / "checkpoint.pth"), cfg["__C"]["MULTI_HEAD"])
    official = sizes_from_official(cfg["__C"])
    assert (tokens, answers) == (cfg["token_size"], cfg["answer_size"])
    assert all(official[k] == v for k, v in sizes.items())
