"""`repro attention`: a trained row's attention over a generated scene's boxes, drawn and saved raw."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from repro.cli import app
from repro.nn.attention import MultiHeadAttention
from repro.nn.inspect import record_attention

pytest.importorskip("matplotlib")


def test_recorded_maps_are_the_ones_the_module_used():
    torch.manual_seed(0)
    att = MultiHeadAttention(16, 4, dropout=0.0).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    bias = torch.randn(1, 4, 5, 5)
    with record_attention(att) as maps:
        out = att(x, x, x, bias=bias, key_padding_mask=pad)
    weights = maps[""]
    assert weights.shape == (2, 4, 5, 5) and torch.allclose(weights.sum(-1), torch.ones(2, 4, 5))
    assert float(weights[1, :, :, 3:].max()) < 1e-6  # padded keys get nothing
    v = att.split(att.v(x))
    again = att.out((weights @ v).transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(again, out, atol=1e-5)


def test_attention_of_a_trained_smoke_row_is_drawn_and_saved(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    args = ["table5-ablation", "--row", "MCAN+POA", "--scale", "smoke"]
    untrained = runner.invoke(app, ["attention", *args, "--question", "1", "-o", str(tmp_path / "a.png")])
    assert untrained.exit_code == 2 and "val questions are e.g." in untrained.output
    qid = int(re.search(r"e\.g\. (\d+)", untrained.output).group(1))
    missing = runner.invoke(app, ["attention", *args, "--question", str(qid), "-o", str(tmp_path / "a.png")])
    assert missing.exit_code == 2 and "train it first" in missing.output

    assert runner.invoke(app, ["train", *args, "--seed", "0"]).exit_code == 0
    out = tmp_path / "a.png"
    drawn = runner.invoke(app, ["attention", *args, "--question", str(qid), "--head", "1", "-o", str(out)])
    assert drawn.exit_code == 0, drawn.output
    assert "decoder self-attention, layer" in drawn.output and "head 1" in drawn.output
    assert out.read_bytes()[:4] == b"\x89PNG"
    saved = np.load(out.with_suffix(".npz"))
    boxes = saved["boxes"]
    received = saved["over_boxes_decoder_self-attention"]
    assert received.shape[2] == len(boxes) and np.allclose(saved["over_boxes_image_pooling"].sum(), 1.0, atol=1e-5)
    assert "raw_decoder_0_self_att" in saved.files and str(saved["question"]).endswith("?")

    bad = runner.invoke(app, ["attention", *args, "--question", str(qid), "--head", "99", "-o", str(out)])
    assert bad.exit_code == 2 and "--head 99" in bad.output

    # the maps follow the unit's device: the model and the batch go where `--device` says (here the CPU, asked for)
    from repro.train import distributed

    asked = []
    real = distributed.device_for

    def recorded(env, device=None):
        asked.append(device)
        return real(env, device)

    monkeypatch.setattr(distributed, "device_for", recorded)
    cpu = runner.invoke(app, ["attention", *args, "--question", str(qid), "--device", "cpu", "-o", str(out)])
    assert cpu.exit_code == 0, cpu.output
    assert asked == ["cpu"]
