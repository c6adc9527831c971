"""The pilot tool: held-out curves from scenes the tables never train or score on."""

from __future__ import annotations

import json

import pytest

from repro import pilot as shared
from repro.errors import ReproError
from repro.families.mcan_pa import pilot


def test_quarter_change_is_the_largest_move_over_the_last_quarter():
    # eight evaluations (epochs 2, 4, ..., 16): the last quarter runs from epoch 12 to 16
    assert pilot.quarter_change([50.0, 60.0, 70.0, 71.0, 71.2, 70.9, 71.1, 71.0]) == pytest.approx(0.1)
    assert pilot.quarter_change([10.0, 20.0, 30.0, 40.0]) == pytest.approx(10.0)  # one look back: 30 -> 40
    assert pilot.quarter_change([5.0]) == 0.0


def test_overrides_reach_nested_settings_and_leave_the_spec_alone():
    settings = {"generator": {"seed": 0}, "recipe": {"schedule": {"base_lr": 1e-3}}, "sizes": {"d_model": 8}}
    overrides = ["recipe.schedule.base_lr=2.0e-3", "generator.question_weights={is_on: 1}"]
    out, _ = shared.apply_overrides(settings, overrides)
    assert out["recipe"]["schedule"]["base_lr"] == 2e-3 and out["generator"]["question_weights"] == {"is_on": 1}
    assert settings["recipe"]["schedule"]["base_lr"] == 1e-3
    with pytest.raises(ReproError, match="SECTION.KEY=VALUE"):
        shared.apply_overrides(settings, ["epochs=3"])


@pytest.mark.slow
def test_a_pilot_trains_on_the_specs_train_scenes_and_scores_only_the_extra_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    small = ["generator.train_images=12", "generator.val_images=2", "recipe.epochs=2", "recipe.batch_size=16"]
    small += ["sizes.d_model=16", "sizes.heads=2", "sizes.ffn=32", "sizes.layers=1"]
    args = ["mcan-pa-table5-ablation", "--rows", "MCAN", "--seeds", "0,1", "--heldout-images", "6", "--every", "1"]
    code = pilot.main([*args, *small])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    curves = [x for x in lines if not x.get("summary")]
    summaries = [x for x in lines if x.get("summary")]
    assert [(c["seed"], c["epoch"]) for c in curves] == [(0, 1), (1, 1), (0, 2), (1, 2)]
    assert {s["seed"] for s in summaries} == {0, 1} and all(s["together"] == 2 for s in summaries)
    # the questions of the 12 train scenes are trained on, those of the 6 more scenes scored
    (folder,) = [p for p in (tmp_path / "synthetic").iterdir() if p.is_dir()]
    train = json.loads((folder / "raw" / "v2_mscoco_train2014_annotations.json").read_text())["annotations"]
    ours = sum(a["image_id"] <= 12 for a in train)
    assert summaries[0]["train_questions"] == ours and summaries[0]["heldout_questions"] == len(train) - ours
    assert set(summaries[0]["last_quarter_change"]) == {"All", "Y/N", "Num", "Other"}


def test_a_bad_override_is_one_line_and_exit_2(capsys):
    assert pilot.main(["mcan-pa-table5-ablation", "--rows", "MCAN", "epochs=3"]) == 2
    assert "SECTION.KEY=VALUE" in capsys.readouterr().err
