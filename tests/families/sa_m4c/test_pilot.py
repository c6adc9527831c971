"""The pilot tool: held-out curves from train scenes the tables never train or score on."""

from __future__ import annotations

import json

import pytest

from repro.families.sa_m4c import pilot


def test_a_scene_is_the_specs_own_when_drawn_before_the_extra_ones():
    assert pilot.spec_scene("train000000000", 12) and pilot.spec_scene("train000110000", 12)
    assert not pilot.spec_scene("train000120000", 12) and not pilot.spec_scene("train01000000a", 12)


@pytest.mark.slow
def test_a_pilot_trains_on_the_specs_train_scenes_and_scores_only_the_extra_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path))
    small = ["generator.train_images=12", "generator.val_images=2", "recipe.epochs=2", "recipe.batch_size=16"]
    args = ["sa-m4c-table2-ablations", "--rows", "1 M4C†", "--seeds", "0", "--heldout-images", "6", "--every", "1"]
    assert pilot.main([*args, *small]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    curves = [x for x in lines if not x.get("summary")]
    (summary,) = [x for x in lines if x.get("summary")]
    assert [c["epoch"] for c in curves] == [1, 2] and set(curves[0]) >= {"All", "spatial"}
    # the questions of the 12 train scenes are trained on, those of the 6 more scenes scored; val is never read
    (folder,) = [p for p in (tmp_path / "synthetic").iterdir() if p.is_dir()]
    train = json.loads((folder / "TextVQA_0.5.1_train.json").read_text())["data"]
    ours = sum(pilot.spec_scene(q["image_id"], 12) for q in train)
    assert summary["train_questions"] == ours and summary["heldout_questions"] == len(train) - ours > 0
    assert set(summary["last_quarter_net"]) == set(summary["final"]) >= {"All", "spatial"}


def test_no_rows_is_one_line_and_exit_2(capsys):
    assert pilot.main(["sa-m4c-table2-ablations", "--rows", ""]) == 2
    assert "--rows names at least one row" in capsys.readouterr().err
