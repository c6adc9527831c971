"""The strict load of released checkpoints: everything or nothing, one line naming the key or the file."""

import json

import pytest
import torch
from torch import nn

from repro.errors import ReproError
from repro.weights import Conversion, convert_by_rules, read_state_dict, render_report, strict_load

RULES = ((r"fc_(\d)\.(weight|bias)", r"layers.\1.\2"), (r"ln\.a_2", "norm.weight"), (r"ln\.b_2", "norm.bias"))


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 3)])
        self.norm = nn.LayerNorm(3)


def _official():
    g = torch.Generator().manual_seed(1)
    return {
        "fc_0.weight": torch.randn(4, 4, generator=g),
        "fc_0.bias": torch.randn(4, generator=g),
        "fc_1.weight": torch.randn(3, 4, generator=g),
        "fc_1.bias": torch.randn(3, generator=g),
        "ln.a_2": torch.randn(3, generator=g),
        "ln.b_2": torch.randn(3, generator=g),
    }


def _snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _unchanged(model, before):
    return all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_everything_placed_and_reported():
    model, official = Toy(), _official()
    report = strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    assert torch.equal(model.layers[1].weight, official["fc_1.weight"])
    assert torch.equal(model.norm.bias, official["ln.b_2"])
    assert report.counts() == {"placed": 6, "reshaped": 0, "missing": 0, "unexpected": 0}
    assert ("placed", "ln.a_2", "norm.weight", "") in report.rows()
    json.dumps(report.as_json())


def test_renamed_key_is_one_line_and_nothing_loads():
    model, official = Toy(), _official()
    before = _snapshot(model)
    official["ln.gamma"] = official.pop("ln.a_2")
    with pytest.raises(ReproError, match=r"^toy: unexpected key ln\.gamma") as err:
        strict_load(model, convert_by_rules(official, RULES + ((r"ln\.gamma", "norm.gain"),), "toy"), "toy")
    assert "\n" not in str(err.value)
    with pytest.raises(ReproError, match=r"unexpected key ln\.gamma"):
        convert_by_rules(official, RULES, "toy")
    assert _unchanged(model, before)


def test_missing_key_is_named_and_nothing_loads():
    model, official = Toy(), _official()
    before = _snapshot(model)
    del official["fc_1.bias"]
    with pytest.raises(ReproError, match=r"missing key for layers\.1\.bias"):
        strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    assert _unchanged(model, before)
    # a key the family allows to keep its initial value is reported as missing, not refused
    report = strict_load(model, convert_by_rules(official, RULES, "toy"), "toy", lambda k: k == "layers.1.bias")
    assert report.missing == ["layers.1.bias"]
    assert torch.equal(model.layers[1].bias, before["layers.1.bias"])
    assert torch.equal(model.layers[0].weight, official["fc_0.weight"])


def test_wrong_shape_is_named_and_nothing_loads():
    model, official = Toy(), _official()
    before = _snapshot(model)
    official["fc_1.weight"] = torch.zeros(3, 5)
    with pytest.raises(ReproError, match=r"fc_1\.weight has shape \(3, 5\), this model's layers\.1\.weight \(3, 4\)"):
        strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    assert _unchanged(model, before)


def test_reshaped_and_dropped_keys_are_reported():
    model, official = Toy(), _official()
    conversion = convert_by_rules({k: v for k, v in official.items() if k != "fc_0.weight"}, RULES, "toy")
    conversion.put("fc_0.weight", "layers.0.weight", official["fc_0.weight"].T.contiguous(), "transposed")
    conversion.drop("step", "the optimiser's step count")
    report = strict_load(model, conversion, "toy")
    assert report.reshaped == [("fc_0.weight", "layers.0.weight", "transposed")]
    assert report.unexpected == [("step", "the optimiser's step count")] and report.dropped == ["step"]
    assert torch.equal(model.layers[0].weight, official["fc_0.weight"].T)


def test_a_target_filled_twice_or_not_ours_is_refused():
    model, official = Toy(), _official()
    conversion = convert_by_rules(official, RULES, "toy")
    conversion.put("extra", "layers.0.bias", torch.zeros(4))
    with pytest.raises(ReproError, match=r"layers\.0\.bias is filled by both"):
        strict_load(model, conversion, "toy")
    conversion = Conversion()
    conversion.put("x", "nowhere", torch.zeros(1))
    with pytest.raises(ReproError, match=r"unexpected key x \(maps to nowhere"):
        strict_load(model, conversion, "toy")


def test_truncated_or_unreadable_file_is_one_line_naming_it(tmp_path):
    good = tmp_path / "good.pth"
    torch.save({"state_dict": _official()}, good)
    assert set(read_state_dict(good, ("state_dict",))) == set(_official())
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ReproError, match=rf"^{truncated}: not a readable PyTorch checkpoint") as err:
        read_state_dict(truncated, ("state_dict",))
    assert "\n" not in str(err.value)
    garbage = tmp_path / "garbage.pth"
    garbage.write_text("not a checkpoint")
    with pytest.raises(ReproError, match=rf"^{garbage}: not a readable"):
        read_state_dict(garbage)
    with pytest.raises(ReproError, match=r"no such checkpoint file"):
        read_state_dict(tmp_path / "absent.pth")
    odd = tmp_path / "odd.pth"
    torch.save({"model": {"a": 1}}, odd)
    with pytest.raises(ReproError, match=r"no state dict of tensors \(expected under 'model'\)"):
        read_state_dict(odd, ("model",))


def test_report_renders_as_a_table():
    from rich.console import Console

    model, official = Toy(), _official()
    report = strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    console = Console(record=True, width=200)
    render_report(report, console)
    text = console.export_text()
    assert "fc_0.weight" in text and "layers.0.weight" in text and "6 placed" in text


def test_tied_tensors_must_receive_equal_values():
    model = Toy()
    model.layers[1].bias = model.norm.bias  # one tensor under two keys (as a decoder tied to its embeddings)
    official = _official()
    before = _snapshot(model)
    with pytest.raises(ReproError, match=r"fc_1\.bias and ln\.b_2 differ.*layers\.1\.bias and norm\.bias.*tied"):
        strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    assert _unchanged(model, before)
    official["fc_1.bias"] = official["ln.b_2"].clone()
    strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    assert torch.equal(model.norm.bias, official["ln.b_2"])
