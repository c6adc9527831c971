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
    # each box named after its generated object (`#k colour class`), as the figure labels it
    assert all(re.fullmatch(r"#\d+ [a-z]+ [a-z]+", str(label)) for label in saved["box_labels"])

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


def test_each_box_is_labelled_with_the_generated_object_it_holds(tmp_path):
    from repro.data.store import FeatureStore
    from repro.families.mcan_pa.attention import box_labels
    from repro.families.mcan_pa.synthetic import COLOURS, GeneratorConfig, generate

    settings = {"generator": {"train_images": 4, "val_images": 3}}
    paths = generate(tmp_path, GeneratorConfig.from_mapping(settings["generator"]))
    stored = FeatureStore.open(paths["val_features"]).get(6)  # a val image: the replay runs through train first
    boxes = stored["boxes"][: stored["count"]]
    labels = box_labels(settings, 6, boxes)
    assert len(labels) == len(boxes)
    assert all(re.fullmatch(rf"#{k + 1} ({'|'.join(COLOURS)}) \w+", label) for k, label in enumerate(labels))
    questions = [q["question"] for q in __import__("json").loads(paths["val_questions"].read_text())["questions"]]
    assert questions  # the names the labels give are the generator's: some question of the split names one of them
    named = {label.split(" ", 1)[1] for label in labels}
    assert any(name in q for q in questions for name in named)
    # boxes that are not the replayed scene's (another generator's data): the index alone, never a wrong name
    assert box_labels(settings, 6, boxes + 40.0) == [f"#{k + 1}" for k in range(len(boxes))]
    assert box_labels(settings, None, boxes) == [f"#{k + 1}" for k in range(len(boxes))]


def test_the_attention_figure_names_each_box_marks_the_question_s_objects_and_the_uniform_level():
    from repro.families.base import AttentionMaps
    from repro.report.plot import attention_figure, named_in

    maps = AttentionMaps(
        question="Is the purple cone left of the yellow cone?",
        answer="no",
        gold="no",
        image_size=(400.0, 300.0),
        boxes=np.array([[10, 10, 60, 60], [100, 100, 180, 160], [200, 20, 260, 90]], dtype=np.float32),
        box_labels=["#1 purple cone", "#2 red cube", "#3 yellow cone"],
        over_boxes={"decoder self-attention": np.array([[[0.5, 0.2, 0.3], [0.4, 0.4, 0.2]]])},
    )
    assert named_in(maps.question, "#1 purple cone") and not named_in(maps.question, "#2 red cube")
    assert not named_in("Is there a blue cone?", "#1 red cone") and not named_in(maps.question, "#1")
    fig, what = attention_figure(maps)
    scene = fig.axes[0]
    texts = {t.get_text(): t for t in scene.texts}
    assert set(texts) == {"#1 purple cone  0.45", "#2 red cube  0.30", "#3 yellow cone  0.25"}
    assert (
        texts["#1 purple cone  0.45"].get_fontweight() == "bold"
        and texts["#2 red cube  0.30"].get_fontweight() == "normal"
    )
    heat = fig.axes[1]
    assert [t.get_text() for t in heat.get_xticklabels()] == maps.box_labels
    colorbar = fig.axes[2]
    assert "uniform, 1/3 = 0.33" in colorbar.get_ylabel()
    assert any(np.allclose(line.get_ydata(), 1 / 3) for line in colorbar.lines)
    assert "mean of heads" in what
