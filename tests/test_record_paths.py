"""Paths in result records: written relative to the results root (the data dir as `$REPRO_DATA_DIR`),
read back against the root in use, so a cloned or copied results folder still names its own files; the
absolute paths of older records keep working."""

from __future__ import annotations

import json
import shutil

from repro.paths import command_words, portable, portable_value, resolve, resolve_command, results_dir
from repro.results import SeedResult, aggregate, portable_record, read_seed_results, write_seed_result
from repro.specs import resolve as resolve_spec


def test_paths_under_the_results_root_or_the_data_dir_are_stored_portably(sandbox, monkeypatch):
    results, data = sandbox / "results", sandbox / "data"
    file = results / "toy" / "toy-table1" / "predictions" / "Sighted.seed0.json"
    assert portable(str(file)) == "toy/toy-table1/predictions/Sighted.seed0.json"
    assert resolve("toy/toy-table1/predictions/Sighted.seed0.json") == file
    assert portable(str(data / "runs" / "x" / "vqa")) == "$REPRO_DATA_DIR/runs/x/vqa"
    assert resolve("$REPRO_DATA_DIR/runs/x/vqa") == data / "runs" / "x" / "vqa"
    assert portable(f"FrameQA GIFs: Train.csv is not in {data / 'tgif-qa'}") == (
        "FrameQA GIFs: Train.csv is not in $REPRO_DATA_DIR/tgif-qa"
    )
    assert portable(str(data)) == "$REPRO_DATA_DIR" and resolve("$REPRO_DATA_DIR") == data
    # a sibling whose name starts like a root, and a folder elsewhere, are not the root's
    assert portable(f"{results}-old/a.json {data}2/b") == f"{results}-old/a.json {data}2/b"
    assert portable("/elsewhere/a.json") == "/elsewhere/a.json" and resolve("/elsewhere/a.json").is_absolute()
    # a variant's records are relative to its own folder
    variant = results / "variants" / "recipe.epochs=2"
    assert portable(str(variant / "toy" / "a.json"), variant) == "toy/a.json"
    assert resolve("toy/a.json", variant) == variant / "toy" / "a.json"
    # a relative REPRO_RESULTS names the same folder, from wherever the run started
    monkeypatch.chdir(sandbox)
    monkeypatch.setenv("REPRO_RESULTS", "results")
    assert (
        portable(str(results_dir() / "toy" / "a.json")) == "toy/a.json"
        and resolve("toy/a.json") == file.parents[3] / "toy" / "a.json"
    )
    stored = portable_value({str(file): [f"repro submit t --predictions {file} --questions {data / 'q.json'}"]})
    assert stored == {
        "toy/toy-table1/predictions/Sighted.seed0.json": [
            "repro submit t --predictions toy/toy-table1/predictions/Sighted.seed0.json"
            " --questions $REPRO_DATA_DIR/q.json"
        ]
    }


def test_a_command_line_is_stored_without_the_machines_folders(sandbox):
    data = sandbox / "data"
    assert command_words(["/home/me/repro/repro/__main__.py", "run", "x", "--workdir", str(data / "runs")]) == [
        "repro",
        "run",
        "x",
        "--workdir",
        "$REPRO_DATA_DIR/runs",
    ]
    assert command_words([".venv/bin/repro", "run", "x", "--workdir=/scratch/me/runs", "recipe.epochs=2"]) == [
        "repro",
        "run",
        "x",
        "--workdir={local}/runs",
        "recipe.epochs=2",
    ]


def _unit(spec, predictions, extra, command):
    return SeedResult(
        spec=spec.id,
        paper=spec.paper,
        row="Sighted",
        scale="smoke",
        seed=0,
        split="val",
        metrics={"Acc": 75.0},
        environment={"command": command},
        predictions=predictions,
        extra=extra,
        finished="2025-01-01T00:00:00",
    )


def test_a_copied_results_folder_names_its_own_files_and_old_absolute_records_still_read(toy_family):
    sandbox = toy_family
    spec = resolve_spec("toy-table1")
    row = spec.row("Sighted")
    first = sandbox / "results"
    file = first / "toy" / "toy-table1" / "predictions" / "Sighted.smoke.seed0.test.json"
    file.parent.mkdir(parents=True)
    file.write_text("[]")
    command = f"repro submit toy-test --predictions {file} --questions {sandbox / 'data' / 'q.json'}"
    write_seed_result(spec, _unit(spec, [str(file)], {"submit": {str(file): [command]}}, ["repro", "run"]))
    on_disk = json.loads((first / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json").read_text())
    assert on_disk["predictions"] == ["toy/toy-table1/predictions/Sighted.smoke.seed0.test.json"]
    assert on_disk["metrics"] == {"Acc": 75.0} and on_disk["metrics"] == on_disk["reference"]

    # the folder cloned elsewhere: its record names the clone's file, and so does the submit command
    clone = sandbox / "clone" / "results"
    shutil.copytree(first, clone)
    shutil.rmtree(first)
    result = aggregate(spec, row, "smoke", read_seed_results(spec, row, "smoke", clone))
    (stored,) = result.extra["predictions"]
    assert resolve(stored, clone).read_text() == "[]"
    (commands,) = result.extra["submit"]
    here = resolve_command(commands[stored][0], [stored], clone).split()
    assert resolve(here[4]).samefile(clone / stored) and here[6] == str(sandbox / "data" / "q.json")

    # a record written before paths were portable: absolute paths, read and shown as they are
    old = _unit(spec, [str(file)], {"submit": {str(file): [command]}}, ["/old/checkout/repro/__main__.py", "run"])
    old_path = clone / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json"
    old_path.write_text(json.dumps(old.to_json()))
    result = aggregate(spec, row, "smoke", read_seed_results(spec, row, "smoke", clone))
    assert result.extra["predictions"] == [str(file)] and resolve(str(file), clone) == file
    assert resolve_command(command, [str(file)], clone) == command  # (its file is where it was written)
    assert portable_record(old.to_json(), clone)["environment"]["command"] == ["repro", "run"]
