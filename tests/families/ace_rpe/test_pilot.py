"""The synthetic pilot: each task's held-out curve on a fresh draw of the task generator, never the table's items."""

from __future__ import annotations

import json

import pytest

from repro import pilot as shared
from repro.errors import ReproError
from repro.families.ace_rpe import pilot
from repro.families.ace_rpe.sources import tasks_root
from repro.specs import resolve

SPEC = "ace-rpe-table2-pe"
TINY = [  # Table 2's smoke sizes on its synthetic scale's generators
    "generator.pretrain_images=8",
    "generator.train_images=1",
    "generator.test_images=1",
    "generator.captions_per_image=1",
    "task_generator.train_items=8",
    "task_generator.test_items=4",
    "pretrain_recipe.epochs=1",
    "task_recipe.epochs=2",
    "task_recipe.batch_size=8",
    "assign_recipe.batch_size=8",
    "assign_recipe.num_workers=0",
    "sizes.hidden_size=32",
    "sizes.heads=2",
    "sizes.intermediate_size=64",
    "sizes.image_layers=1",
    "sizes.text_layers=1",
    "sizes.fusion_layers=1",
]


def test_each_task_is_scored_every_epoch_on_items_the_table_is_not(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    assert pilot.main([SPEC, "--rows", "ACE-RPE", "--every", "1", *TINY]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summaries = {x["task"]: x for x in lines if x.get("summary")}
    assert list(summaries) == ["vqa", "snli-ve", "nlvr2"]  # the spec's tasks, in its column order
    for task, summary in summaries.items():
        curve = [x for x in lines if not x.get("summary") and x["task"] == task]
        assert [c["epoch"] for c in curve] == [1, 2] and all(0 <= c["score"] <= 100 for c in curve)
        assert summary["split"] == pilot.HELD_OUT[task] and summary["steps"] == 2 and summary["train_items"] == 8
        assert summary["final"] == curve[-1]["score"]
        assert summary["last_quarter_net"] == pytest.approx(curve[1]["score"] - curve[0]["score"])
        assert summary["last_quarter_gain"] == pytest.approx(curve[1]["score"] - curve[0]["score"])
    assert summaries["nlvr2"]["assign_steps"] > 0 and summaries["vqa"]["assign_steps"] is None
    assert pilot.main([SPEC, "--rows", "None", "--tasks", "snli-ve", "--every", "5", *TINY]) == 0  # 2 epochs of 5
    (last,) = [x for x in map(json.loads, capsys.readouterr().out.splitlines()) if not x.get("summary")]
    assert last["epoch"] == 2  # the last epoch is scored whatever --every says
    # the task files drawn are the generator's next seed: not the folder `repro run` scores the table on
    spec = resolve(SPEC)
    own, _ = shared.apply_overrides(spec.scales["synthetic"], TINY, pilot.SECTIONS)
    drawn = pilot.pilot_settings(spec, TINY, None)
    assert drawn["task_generator"]["seed"] == own["task_generator"]["seed"] + 1
    assert tasks_root(drawn).is_dir() and not tasks_root(own).exists()


def test_a_pilot_refuses_the_tables_own_items_and_unknown_tasks(capsys):
    spec = resolve(SPEC)
    own = spec.scales["synthetic"]["task_generator"]["seed"]
    with pytest.raises(ReproError, match="the spec's own"):
        pilot.pilot_settings(spec, [], own)
    assert pilot.main([SPEC, "--rows", "None", "--tasks", "grounding"]) == 2
    assert "has no task grounding" in capsys.readouterr().err
    assert pilot.main(["ace-rpe-table1-pe", "--rows", "None"]) == 2  # retrieval only: no task generator
    assert pilot.main([SPEC]) == 2  # no row
