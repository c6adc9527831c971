"""psac's pilot: a held-out curve from train videos the spec's run never trains on, and the reference Count models
(a width-3 convolution over the frames, a bag of frames) trained in place of PSAC on the same split."""

from __future__ import annotations

import json

import pytest
import torch

from repro.errors import ReproError
from repro.families.psac import pilot

TINY = ["generator.train_videos=16", "generator.test_videos=2", "task_recipe.count.epochs=2", "recipe.batch_size=8",
        "generator.count_fixed_frames=true"]  # fmt: skip


def test_the_bag_of_frames_is_blind_to_frame_order_and_the_convolution_is_not():
    torch.manual_seed(0)
    video = torch.randn(3, 20, 32)
    shuffled = video[:, torch.randperm(20)]
    bag, conv = pilot.reference_model("bag", 32, 16), pilot.reference_model("conv3", 32, 16)
    assert torch.allclose(bag({"video": video}), bag({"video": shuffled}), atol=1e-6)
    assert not torch.allclose(conv({"video": video}), conv({"video": shuffled}), atol=1e-4)


def test_a_reference_pilot_scores_held_out_count_videos(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    args = ["psac-table3-vpsa", "--rows", "w/ 1 VPSA", "--tasks", "count", "--heldout", "4", "--reference", "conv3"]
    assert pilot.main([*args, *TINY]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    curve, (summary,) = [x for x in lines if not x.get("summary")], [x for x in lines if x.get("summary")]
    assert [c["epoch"] for c in curve] == [1, 2] and all(c["score"] >= 0 for c in curve)
    assert summary["reference"] == "conv3" and summary["heldout_questions"] == 4 and summary["train_questions"] == 16


@pytest.mark.parametrize("extra", [["--reference", "lstm"], ["--reference", "bag", "--tasks", "action"]])
def test_a_reference_is_one_of_the_named_ones_on_count_alone(tmp_path, monkeypatch, extra):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    assert pilot.main(["psac-table3-vpsa", "--rows", "w/ 1 VPSA", "--tasks", "count", *TINY, *extra]) == 2
    with pytest.raises(ReproError, match="unknown reference"):
        pilot.reference_model("lstm", 8, 8)
