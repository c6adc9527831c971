"""Where records go and where they are read: paper and synthetic records in the results folder (the checkout's
`results/`), smoke and variant records in the scratch folder (`~/.cache/repro/results`), everything in
REPRO_RESULTS when it is set; an installed package reads the committed results it ships until there is a
`./results`.

The checkout is never written: each test points `repro.paths.REPO_DIR` at a fake checkout in tmp_path (a
`pyproject.toml`, `experiments/`, `results/`), and XDG_CACHE_HOME at tmp_path, with REPRO_RESULTS unset.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from repro import paths
from repro.cli import app
from repro.errors import ReproError
from repro.paths import REPO_DIR, resolve, results_dir, results_read_dir, scratch_dir
from repro.results import SeedResult, read_results, write_seed_result
from repro.specs import resolve as resolve_spec
from repro.variants import Variant
from tests.conftest import TOY_SPEC, write_spec


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _checkout_results_status() -> str:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", "results"],
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout if out.returncode == 0 else "(no git)"


@pytest.fixture
def defaults(toy_family, tmp_path, monkeypatch):
    """The toy family with REPRO_RESULTS unset: a fake checkout for results/, the cache in tmp_path."""
    write_spec(
        toy_family,
        TOY_SPEC.replace("smoke: {seeds: [0]}", "smoke: {seeds: [0], recipe: {epochs: 1}}"),
        "toy",
        "toy-table1",
    )
    checkout = tmp_path / "checkout"
    (checkout / "experiments").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    committed = checkout / "results" / "toy" / "toy-table1" / "Blind.synthetic.json"
    committed.parent.mkdir(parents=True)
    record = {"spec": "toy-table1", "paper": "toy", "row": "Blind", "scale": "synthetic", "metrics": {"Acc": 50.0}}
    committed.write_text(json.dumps(record))  # stands for a tracked file: nothing may be added beside it
    monkeypatch.setattr(paths, "REPO_DIR", checkout)
    monkeypatch.delenv("REPRO_RESULTS", raising=False)
    monkeypatch.delenv("REPRO_SCRATCH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return checkout


def test_the_rule_smoke_and_variants_to_the_scratch_folder_unless_repro_results_is_set(defaults, tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "repro" / "results"
    assert results_dir() == results_dir("paper") == results_dir("synthetic") == defaults / "results"
    assert results_dir("smoke") == scratch_dir() == cache
    assert Variant(limit=5).results_root() == cache / "variants" / "limit=5" and Variant().results_root() is None
    monkeypatch.setenv("REPRO_SCRATCH", str(tmp_path / "scratch"))
    assert results_dir("smoke") == tmp_path / "scratch" and results_dir("synthetic") == defaults / "results"
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "mine"))  # set: every record goes there, as before
    assert results_dir("smoke") == results_dir("paper") == scratch_dir() == tmp_path / "mine"
    assert Variant(limit=5).results_root() == tmp_path / "mine" / "variants" / "limit=5"


def test_a_smoke_run_leaves_results_alone_and_every_reader_finds_its_records(defaults, runner, tmp_path):
    before, real_before = _files(defaults / "results"), _checkout_results_status()
    cache = tmp_path / "cache" / "repro" / "results"
    run = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"], env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    assert _files(defaults / "results") == before and _checkout_results_status() == real_before
    record = json.loads((cache / "toy" / "toy-table1" / "Sighted.smoke.json").read_text())
    assert (cache / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json").is_file()
    last = run.output.strip().splitlines()[-1]
    assert last.startswith(f"records: {cache / 'toy' / 'toy-table1'}/") and "kept out of results/" in last

    table = runner.invoke(app, ["table", "toy-table1", "--scale", "smoke"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and f"{record['metrics']['Acc']:.2f}" in table.output, table.output
    listed = {e["id"]: e for e in json.loads(runner.invoke(app, ["list", "--format", "json"]).output)}
    assert listed["toy-table1"]["scales"] == ["smoke", "synthetic"]  # both folders read
    check = runner.invoke(app, ["check", "toy-table1", "-v"], env={"COLUMNS": "200"})
    assert check.exit_code == 0 and "Sighted" in check.output and "no stored results" not in check.output
    # resume reads the scratch folder too: seed 0 is kept, seed 1 added
    again = runner.invoke(
        app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0,1", "--resume"]
    )
    assert again.exit_code == 0, again.output
    assert json.loads((cache / "toy" / "toy-table1" / "Sighted.smoke.json").read_text())["seeds"] == [0, 1]

    variant = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Blind", "recipe.epochs=2"])
    assert variant.exit_code == 0, variant.output
    assert (cache / "variants" / "recipe.epochs=2" / "toy" / "toy-table1" / "Blind.smoke.json").is_file()
    shown = runner.invoke(app, ["table", "toy-table1", "recipe.epochs=2", "--scale", "smoke"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "recipe.epochs=2" in shown.output and "Blind" in shown.output
    assert _files(defaults / "results") == before and _checkout_results_status() == real_before


def test_a_smoke_record_names_its_files_relative_to_the_scratch_folder(defaults):
    spec = resolve_spec("toy-table1")
    file = results_dir("smoke") / "toy" / "toy-table1" / "predictions" / "Sighted.smoke.seed0.test.json"
    unit = SeedResult(
        spec=spec.id, paper=spec.paper, row="Sighted", scale="smoke", seed=0, split="val", metrics={"Acc": 1.0}
    )
    unit.predictions = [str(file)]
    path = write_seed_result(spec, unit)
    assert path.is_relative_to(scratch_dir())
    (stored,) = json.loads(path.read_text())["predictions"]
    assert (
        stored == "toy/toy-table1/predictions/Sighted.smoke.seed0.test.json" and resolve(stored, scratch_dir()) == file
    )


def test_an_installed_package_reads_its_shipped_results_until_there_is_a_results_folder(
    toy_family, tmp_path, monkeypatch
):
    package = tmp_path / "site" / "repro"
    shipped = package / "results" / "toy" / "toy-table1" / "Sighted.synthetic.json"
    shipped.parent.mkdir(parents=True)
    record = {"spec": "toy-table1", "paper": "toy", "row": "Sighted", "scale": "synthetic", "metrics": {"Acc": 97.5}}
    shipped.write_text(json.dumps(record))
    monkeypatch.setattr(paths, "REPO_DIR", tmp_path / "site")  # no pyproject.toml: not a checkout
    monkeypatch.setattr(paths, "PACKAGE_DIR", package)
    monkeypatch.delenv("REPRO_RESULTS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    spec = resolve_spec("toy-table1")
    assert results_dir("synthetic") == work / "results"  # a run writes here, never into the package
    assert results_read_dir("synthetic") == package / "results"
    assert read_results(spec, "synthetic")[("Sighted", "synthetic")].metrics == {"Acc": 97.5}
    assert read_results(spec)[("Sighted", "synthetic")].metrics == {"Acc": 97.5}
    (work / "results").mkdir()  # once a run has written ./results, that is what is read
    assert results_read_dir() == work / "results" and read_results(spec) == {}
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "mine"))
    assert results_read_dir("synthetic") == tmp_path / "mine"


def test_a_folder_variable_naming_a_file_is_one_line_before_anything_runs(defaults, runner, tmp_path, monkeypatch):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    monkeypatch.setenv("REPRO_SCRATCH", str(a_file))
    run = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"], env={"COLUMNS": "200"})
    assert run.exit_code == 2 and "Traceback" not in run.output, run.output
    assert (
        run.output.strip().splitlines()[-1] == f"error: REPRO_SCRATCH={a_file}: not a folder; point it at a folder "
        "(it is made when missing) or unset it"
    )
    assert "done [" not in run.output  # refused before the unit trained
    table = runner.invoke(app, ["table", "toy-table1", "--scale", "smoke"])
    assert table.exit_code == 2 and "REPRO_SCRATCH" in table.output
    monkeypatch.delenv("REPRO_SCRATCH")
    for name in ("REPRO_RESULTS", "REPRO_DATA_DIR"):
        monkeypatch.setenv(name, str(a_file))
        with pytest.raises(ReproError, match=f"^{name}=.*: not a folder"):
            results_dir("smoke") if name == "REPRO_RESULTS" else paths.data_dir()
        monkeypatch.delenv(name)


def test_empty_folder_variables_mean_their_defaults(defaults, tmp_path, monkeypatch):
    for name in ("REPRO_SCRATCH", "REPRO_DATA_DIR", "REPRO_RESULTS"):
        monkeypatch.setenv(name, "")
    assert scratch_dir() == tmp_path / "cache" / "repro" / "results"
    assert paths.data_dir() == tmp_path / "cache" / "repro" / "data"  # not the current folder
    assert results_dir("synthetic") == defaults / "results"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert (
        paths.data_dir() == Path.home() / ".cache" / "repro" / "data"
        and scratch_dir().parent.parent == paths.data_dir().parent.parent
    )


def test_numbers_from_given_weights_go_where_their_scale_goes(defaults, tmp_path, monkeypatch):
    """`repro run --weights` at the smoke scale (a pipeline check) is scratch too; at paper scale its numbers sit
    under the results folder's weights/ beside, never among, the numbers trained here."""
    from repro.weights import Checkpoint, WeightsSource

    monkeypatch.setenv("REPRO_SCRATCH", str(tmp_path / "scratch"))
    source = WeightsSource((Checkpoint(tmp_path / "mine.pth", sha256="ab" * 32),))
    assert source.results_root("smoke") == tmp_path / "scratch" / "weights" / "mine@abababab"
    assert source.results_root("paper") == results_dir("paper") / "weights" / "mine@abababab"
    assert source.results_root("paper").parent.parent != scratch_dir()
