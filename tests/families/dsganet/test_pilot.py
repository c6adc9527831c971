"""The synthetic pilot: a held-out curve from train scenes the spec's run never trains on; the val split unread."""

from __future__ import annotations

import json
import math

import pytest

from repro import pilot as shared
from repro.errors import ReproError
from repro.families.dsganet import pilot


def test_the_last_quarter_is_its_net_change_and_its_range():
    values = [10.0, 20.0, 30.0, 40.0, 40.2, 40.4, 40.1, 40.3]
    assert shared.last_quarter(list(range(1, 9)), values) == pytest.approx((-0.1, 0.3))  # epochs 6-8
    assert shared.last_quarter([2, 4, 6, 8, 10, 12, 14, 16], values) == pytest.approx((-0.1, 0.3))  # epochs 12-16
    assert shared.last_quarter([4, 8], [50.0, 51.0]) == pytest.approx((1.0, 1.0))  # from the evaluation before 6
    assert shared.last_quarter([1], [42.0]) == (0.0, 0.0)


def test_the_last_quarter_gain_is_its_best_less_the_best_before_it():
    epochs = [10, 20, 30, 40, 50, 60, 70, 80]  # the last quarter: epochs 70 and 80
    assert shared.last_quarter_gain(epochs, [52.6, 74.1, 71.8, 71.6, 71.2, 71.2, 71.7, 71.8]) == pytest.approx(-2.3)
    assert shared.last_quarter_gain(epochs, [81.0, 85.4, 88.8, 92.0, 93.6, 94.2, 94.4, 94.5]) == pytest.approx(0.3)
    assert shared.last_quarter_gain([4, 8], [50.0, 51.0]) == pytest.approx(1.0)
    assert math.isnan(shared.last_quarter_gain([8], [42.0]))  # nothing before the last quarter to compare with


def test_overrides_reach_their_section_and_leave_the_spec_alone():
    settings = {"generator": {"seed": 0}, "recipe": {"schedule": {"base_lr": 1.0}}}
    out, _ = shared.apply_overrides(settings, ["generator.seed=3", "recipe.schedule.base_lr=2.0e-3", "sizes.layers=1"])
    assert out == {"generator": {"seed": 3}, "recipe": {"schedule": {"base_lr": 0.002}}, "sizes": {"layers": 1}}
    assert settings["generator"]["seed"] == 0
    with pytest.raises(ReproError, match="SECTION.KEY=VALUE"):
        shared.apply_overrides(settings, ["seeds=3"])


def test_a_pilot_scores_held_out_train_scenes_and_never_the_val_split(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    tiny = ["generator.train_images=16", "generator.val_images=2", "recipe.epochs=2", "recipe.batch_size=16"]
    assert pilot.main(["dsganet-table6-relations", "--rows", "3", "--seeds", "0", "--heldout-images", "4", *tiny]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    curve, (summary,) = [x for x in lines if not x.get("summary")], [x for x in lines if x.get("summary")]
    assert [c["epoch"] for c in curve] == [1, 2] and all(0 <= c[k] <= 100 for c in curve for k in ("Overall", "Acc."))
    assert summary["heldout_questions"] > 0 and summary["train_questions"] > summary["heldout_questions"]
    assert summary["last_quarter_net"] == pytest.approx(curve[1]["Overall"] - curve[0]["Overall"])
    assert summary["last_quarter_change"] == pytest.approx(abs(summary["last_quarter_net"]))
    assert pilot.main(["dsganet-table6-relations", "--rows", "3", "--heldout-images", "0"]) == 2
