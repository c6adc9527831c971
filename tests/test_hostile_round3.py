"""Hostile input, round 3: no code runs from a checkpoint, no spec id leaves its folders, no command writes over
its own input."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from repro.cli import app
from repro.errors import ReproError
from repro.train import checkpoint
from tests.conftest import write_spec

MARK = "planted-command-ran"


class _Planted:
    """Pickles as a call of os.system: what a hostile `last.pt` hides in its `extra`."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plant(path: Path, marker: Path, model_state: dict | None = None) -> None:
    """A checkpoint of this toolkit's layout (format 1 and 2 alike) with one pickled `os.system` in its extra."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters())
    state = {
        "format": checkpoint.FORMAT,
        "model": model_state if model_state is not None else model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": None,
        "epoch": 1,
        "step": 1,
        "step_in_epoch": 0,
        "rng": checkpoint.rng_state(),
        "extra": {"global_batch": 1, "dataset_size": 1, "planted": _Planted(marker)},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)


def test_a_planted_callable_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / MARK
    plant(tmp_path / "last.pt", marker)
    with pytest.raises(ReproError, match=r"refused: the file asks for the callable posix.system"):
        checkpoint.load_checkpoint(tmp_path / "last.pt")
    assert not marker.exists()


def test_own_checkpoints_round_trip_with_their_generator_states(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    checkpoint.save_checkpoint(tmp_path / "last.pt", model=model, optimizer=optimizer, epoch=1, step=1, step_in_epoch=0)
    expected = random.random(), np.random.rand(), torch.rand(1).item()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    checkpoint.set_rng_state(checkpoint.load_checkpoint(tmp_path / "last.pt")["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_a_format_1_checkpoint_with_numpys_array_still_resumes(tmp_path):
    """Files written before format 2 hold numpy's RNG key as an array: read with numpy's array constructors only."""
    np.random.seed(4)
    state = {
        "format": 1,
        "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
        "extra": {},
    }
    expected = np.random.rand()
    torch.save(state, tmp_path / "old.pt")
    np.random.seed(0)
    checkpoint.set_rng_state(checkpoint.load_checkpoint(tmp_path / "old.pt")["rng"])
    assert np.random.rand() == expected


def _toy_unit(root: Path) -> Path:
    return root / "toy-table1" / "smoke" / "Sighted" / "seed0" / "last.pt"


@pytest.mark.parametrize("how", ["--resume", "--resume --workdir"])
def test_run_resume_on_a_planted_checkpoint_runs_nothing(runner, toy_family, tmp_path, how):
    marker = tmp_path / MARK
    workdir = tmp_path / "given" if "--workdir" in how else toy_family / "data" / "runs"
    plant(_toy_unit(workdir), marker)
    words = ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--resume"]
    if "--workdir" in how:
        words += ["--workdir", str(workdir)]
    out = runner.invoke(app, words)
    assert not marker.exists()
    assert out.exit_code != 0
    assert "refused: the file asks for the callable posix.system" in out.output
    assert "Traceback" not in out.output


@pytest.mark.slow
def test_repro_attention_on_a_planted_checkpoint_runs_nothing(runner, sandbox, tmp_path):
    pytest.importorskip("matplotlib")
    marker = tmp_path / MARK
    workdir = tmp_path / "runs"
    unit = workdir / "mcan-pa-table5-ablation" / "smoke" / "MCAN+PA_ours" / "seed0" / "last.pt"
    plant(unit, marker)
    shutil.copytree(Path(__file__).parents[1] / "experiments", sandbox / "experiments", dirs_exist_ok=True)
    from repro import specs

    specs.clear_cache()
    args = ["attention", "mcan-pa-table5-ablation", "--row", "MCAN+PA (ours)", "--scale", "smoke"]
    out = runner.invoke(app, [*args, "--question", "0", "-o", str(tmp_path / "a.png"), "--workdir", str(workdir)])
    if "no val question 0" in out.output:  # the smoke set's first val question, from the message
        first = out.output.split("val questions are e.g. ")[1].split(",")[0].strip()
        out = runner.invoke(app, [*args, "--question", first, "-o", str(tmp_path / "a.png"), "--workdir", str(workdir)])
    assert not marker.exists()
    assert out.exit_code != 0
    assert "refused: the file asks for the callable posix.system" in out.output, out.output


# --- spec ids are plain names ---------------------------------------------------------------------------------

BAD_IDS = ["/tmp/escape-abs", "../../escape", "a/b", "..", "x..y", ".hidden", "a\\b", "x" * 101, "tab\tname"]


@pytest.mark.parametrize("ident", BAD_IDS)
def test_a_spec_copy_whose_id_is_not_a_plain_name_is_refused_before_anything_is_written(
    runner, toy_family, tmp_path, ident
):
    import yaml

    from tests.conftest import TOY_SPEC

    spec = yaml.safe_load(TOY_SPEC)
    spec["id"] = ident
    copy = tmp_path / "elsewhere" / "copy.yaml"
    copy.parent.mkdir()
    copy.write_text(yaml.safe_dump(spec, sort_keys=False))
    before = sorted(p for p in tmp_path.rglob("*"))
    out = runner.invoke(app, ["run", str(copy), "--scale", "smoke", "--rows", "Sighted"])
    assert out.exit_code == 2, out.output
    assert f"{copy}:1: id " in out.output and "is not a plain name" in out.output
    assert sorted(p for p in tmp_path.rglob("*")) == before
    assert not Path("/tmp/escape-abs").exists()


def test_an_in_tree_spec_with_a_separator_in_its_id_is_refused_with_its_line(runner, sandbox):
    from tests.conftest import SPEC_TEXT

    path = write_spec(sandbox, "# a comment\n" + SPEC_TEXT.replace("id: t1-demo", "id: ../t1-demo"))
    out = runner.invoke(app, ["show", "t1-demo"])
    assert out.exit_code != 0
    assert f"{path}:2: id '../t1-demo' is not a plain name" in out.output


# --- no command writes over its own input ---------------------------------------------------------------------


def test_weights_convert_refuses_to_write_over_the_official_checkpoint(runner, tmp_path):
    official = tmp_path / "model.pth"
    official.write_bytes(b"the only copy")
    for target in (official, tmp_path / "." / "model.pth"):
        out = runner.invoke(
            app, ["weights", "convert", str(official), "--family", "mcan-pa", "--layout", "openvqa", "-o", str(target)]
        )
        assert out.exit_code == 2, out.output
        assert "is the official checkpoint it reads" in out.output
    link = tmp_path / "link.pth"
    os.link(official, link)  # the same file under another name
    out = runner.invoke(
        app, ["weights", "convert", str(official), "--family", "mcan-pa", "--layout", "openvqa", "-o", str(link)]
    )
    assert out.exit_code == 2 and "is the official checkpoint it reads" in out.output
    assert official.read_bytes() == b"the only copy"


# --- every name that becomes a path is checked in one place ---------------------------------------------------

HOSTILE_NAMES = ["../../escape", "/tmp/escape-abs", "..", ".", "a/b", "a\\b", ".hidden", "x" * 300, "nul\0name", ""]


def _joins(root: Path):
    """Every place the toolkit joins a name a user gives (spec id, paper, row, variant, dataset, recipe) into a
    path, as (what, function of a hostile name -> the path it makes)."""
    import dataclasses

    from repro import fingerprint, results, timing
    from repro.data.catalog import folder_inside
    from repro.datasets.prepare import feature_store_dir
    from repro.families import recipe_path
    from repro.names import inside
    from repro.run import unit_dir
    from repro.specs import Claim, Row, Spec

    spec = Spec(
        id="t1", paper="mcan-pa", table="T", title="t", datasets=(), split="val", columns=(), rows=(), path=root
    )
    row = Row(name="r", reported={})
    claim = Claim(text="", row="r", over="s", column="c")

    def with_spec(**change):
        return dataclasses.replace(spec, **change)

    return [
        ("result id", lambda n: results.result_path(with_spec(id=n), row, "paper", root)),
        ("result paper", lambda n: results.result_path(with_spec(paper=n), row, "paper", root)),
        ("result row", lambda n: results.result_path(spec, n, "paper", root)),
        ("seed record id", lambda n: results.seed_path(with_spec(id=n), row, "smoke", 0, root)),
        ("seed record row", lambda n: results.seed_path(spec, Row(name=n, reported={}), "smoke", 0, root)),
        ("unit folder id", lambda n: unit_dir(root, with_spec(id=n), "smoke", row, 0)),
        ("unit folder row", lambda n: unit_dir(root, spec, "smoke", Row(name=n, reported={}), 0)),
        ("unit folder scale", lambda n: unit_dir(root, spec, n, row, 0)),
        ("timing claim", lambda n: timing.timing_path(spec, dataclasses.replace(claim, row=n), "paper", root)),
        ("timing id", lambda n: timing.timing_path(with_spec(id=n), claim, "paper", root)),
        ("fingerprint id", lambda n: fingerprint.path_for(with_spec(id=n), "synthetic", root)),
        ("fingerprint scale", lambda n: fingerprint.path_for(spec, n, root)),
        ("dataset folder", lambda n: folder_inside(root, n)),
        ("feature store", lambda n: feature_store_dir(n, root)),
        ("recipe", lambda n: recipe_path(f"mcan-pa/{n}")),
        ("any other", lambda n: inside(root, n)),
    ]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=lambda n: repr(n[:20]))
def test_every_join_of_a_user_given_name_stays_in_its_folder_or_refuses(tmp_path, name):
    root = tmp_path / "root"
    for what, join in _joins(root):
        try:
            path = join(name)
        except ReproError as exc:
            assert len(str(exc)) < 400, (what, str(exc))
            continue
        assert os.path.normpath(path).startswith(str(root) + os.sep) or what == "recipe", (what, path)
        if what == "recipe":
            assert ".." not in Path(path).parts and Path(path).parent.name == "recipes", path


def test_the_predictions_and_plot_folders_take_their_names_through_the_same_check(tmp_path):
    """A RunContext's prediction file and a run folder's curves (repro plot) join the spec id and row slug."""
    from repro.names import slug

    for name in HOSTILE_NAMES:
        made = slug(name)
        assert made and "/" not in made and "\\" not in made and not made.startswith("."), (name, made)
        assert len(made.encode()) <= 200


def test_no_module_joins_a_spec_id_paper_or_row_into_a_path_by_hand():
    """The walk's other half: a `/` whose right side holds a spec's id or paper, a row's slug or `row_slug(...)`
    appears nowhere in the package; such names go through repro.names.inside."""
    import ast

    from repro.paths import PACKAGE_DIR

    def user_given(node) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in {"id", "paper", "slug"}:
                return True
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in {"row_slug", "slug"}:
                return True
        return False

    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and user_given(node.right):
                found.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_the_leftover_check_sees_a_file_left_in_a_watched_folder(tmp_path):
    from tests.conftest import _Folders

    (tmp_path / "results" / "paper").mkdir(parents=True)
    folders = _Folders([tmp_path, tmp_path / "cache"])
    assert folders.new_entries() == []
    (tmp_path / "results" / "paper" / "left.json").write_text("{}")
    (tmp_path / "cache").mkdir()
    assert set(folders.new_entries()) == {tmp_path / "results" / "paper" / "left.json", tmp_path / "cache"}
    assert folders.new_entries() == []  # each reported once


def test_the_leftover_check_blames_the_test_only_for_what_it_wrote_or_a_process_it_started_could_have(tmp_path):
    """A `repro run` writing its records into the checkout while the suite runs is not the test's doing: the file
    that appeared is reported as another program's (a warning). What the test's process writes, by any of the
    calls the toolkit writes with, or what appears while a process it started runs, still fails it."""
    import subprocess
    import sys

    from repro import results
    from repro.utils import atomic_open
    from tests.conftest import _leftover_message, _OwnWrites

    (tmp_path / "results").mkdir()
    own = _OwnWrites(tmp_path)
    other = tmp_path / "results" / "record.synthetic.json"
    subprocess.run([sys.executable, "-c", f"open({str(other)!r}, 'w').write('{{}}')"], check=True)
    own.reset()  # the test starts: it finds the other program's record there
    assert not own.wrote(other)
    assert _leftover_message([other], own) == (
        False,
        f"files appeared in the checkout while this test ran, written by another program: {other}",
    )
    results.git_state()  # a record asks git for its commit: a program that writes nothing
    assert not own.started
    with atomic_open(tmp_path / "results" / "atomic.json") as handle:
        handle.write("{}")
    (tmp_path / "results" / "plain.json").write_text("{}")
    (tmp_path / "made" / "inner").mkdir(parents=True)
    for written in ("results/atomic.json", "results/plain.json", "made"):
        assert own.wrote(tmp_path / written), written
        assert _leftover_message([tmp_path / written], own)[0]
    (tmp_path / "results" / "plain.json").read_text()
    own.reset()
    assert not own.wrote(tmp_path / "results" / "plain.json")  # reading is not writing
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert own.started
    fails, message = _leftover_message([other], own)
    assert fails and message.startswith("the test, or a process it started, left files")


# --- no command writes over (or into) its own inputs -----------------------------------------------------------


def test_repro_cp_never_writes_over_the_spec_or_into_the_experiments_folder(runner, toy_family, tmp_path):
    spec = toy_family / "experiments" / "toy" / "toy-table1.yaml"
    before = spec.read_bytes()
    for dest in (spec, toy_family / "experiments" / "toy" / "copy.yaml"):
        out = runner.invoke(app, ["cp", "toy-table1", str(dest), "--force"])
        assert out.exit_code == 2, out.output
        assert "the copy" in out.output and ("is the spec it reads" in out.output or "experiments folder" in out.output)
    assert spec.read_bytes() == before
    assert sorted(p.name for p in spec.parent.iterdir()) == ["toy-table1.yaml"]


def test_repro_table_and_plot_never_write_over_the_spec_or_into_its_records(runner, toy_family, tmp_path):
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"])
    assert out.exit_code == 0, out.output
    spec = toy_family / "experiments" / "toy" / "toy-table1.yaml"
    (record,) = (toy_family / "results" / "toy" / "toy-table1").glob("Sighted*.json")
    before = {p: p.read_bytes() for p in (spec, record)}
    for target, words in (
        (spec, ["table", "toy-table1", "--scale", "smoke", "-f", "md"]),
        (record, ["table", "toy-table1", "--scale", "smoke"]),
        (record.parent / "table.md", ["table", "toy-table1", "--scale", "smoke"]),
    ):
        out = runner.invoke(app, [*words, "-o", str(target)])
        assert out.exit_code == 2, out.output
        assert "-o " in out.output and ("it reads" in out.output), out.output
    assert {p: p.read_bytes() for p in before} == before
    assert not (record.parent / "table.md").exists()
    pytest.importorskip("matplotlib")
    out = runner.invoke(app, ["plot", "toy-table1", "--scale", "smoke", "-o", str(record.parent / "figure.png")])
    assert out.exit_code == 2 and "is inside the records folder it reads" in out.output, out.output
    out = runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "-o", str(tmp_path / "table.md")])
    assert out.exit_code == 0 and (tmp_path / "table.md").is_file(), out.output


# --- files a Slurm job leaves in the run folder are read as data ------------------------------------------------


def test_a_planted_slurm_result_pickle_runs_nothing_where_status_reads_it(tmp_path):
    import pickle

    from repro.launch.slurm import _outcome

    marker = tmp_path / MARK

    class Job:
        class paths:
            result_pickle = tmp_path / "1000_0_0_result.pkl"

    with open(Job.paths.result_pickle, "wb") as handle:
        pickle.dump(("error", _Planted(marker)), handle)
    assert _outcome(Job) == (None, None)
    assert not marker.exists()
    with open(Job.paths.result_pickle, "wb") as handle:
        pickle.dump(("error", "Traceback ...\nReproError: out of data"), handle)
    assert _outcome(Job) == ("error", "ReproError: out of data")


def test_a_units_outcome_comes_back_as_json_and_a_pickle_there_is_a_failure(tmp_path):
    import pickle

    from repro.launch.unit import read_outcome

    marker = tmp_path / MARK
    outbox = tmp_path / "outcome.json"
    outbox.write_text('["done", [{"seed": 0, "metrics": {"Acc": 1.0}, "record": null}]]')
    assert read_outcome(outbox) == ("done", [{"seed": 0, "metrics": {"Acc": 1.0}, "record": None}])
    outbox.write_bytes(pickle.dumps(("done", _Planted(marker))))
    assert read_outcome(outbox) == ("failed", None) and not marker.exists()
    assert read_outcome(tmp_path / "missing.json") == ("failed", None)


# --- one run of a unit at a time --------------------------------------------------------------------------------


def test_a_second_run_of_the_same_unit_at_once_is_refused_in_one_line(runner, toy_family):
    from filelock import FileLock

    lock = toy_family / "data" / "runs" / "toy-table1" / "smoke" / "Sighted" / "seed0.lock"
    lock.parent.mkdir(parents=True)
    with FileLock(str(lock), timeout=0):  # what the first run holds while it trains
        out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"])
    assert out.exit_code != 0
    assert "is being trained by another repro run now" in out.output, out.output
    assert "Traceback" not in out.output
    assert not list((toy_family / "data" / "runs" / "toy-table1" / "smoke" / "Sighted").glob("seed0/*"))
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"])
    assert out.exit_code == 0, out.output


# --- prediction files: one meaning only -------------------------------------------------------------------------


def _json(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_duplicate_key_in_a_prediction_file_is_refused_by_eval_and_submit(runner, tmp_path):
    gold = _json(tmp_path / "gold.json", '[{"question_id": 1, "answer": "yes"}]')
    preds = _json(tmp_path / "p.json", '[{"question_id": 1, "answer": "no", "answer": "yes"}]')
    out = runner.invoke(app, ["eval", "--metric", "accuracy", "--annotations", str(gold), "--predictions", str(preds)])
    assert out.exit_code == 2, out.output
    assert "names 'answer' twice" in out.output
    out = runner.invoke(app, ["submit", "vqa2-test-dev", "-p", str(preds), "--dry-run"])
    assert out.exit_code == 2 and "names 'answer' twice" in out.output, out.output


def test_eval_refuses_string_ids_where_the_annotations_have_integers_as_submit_does(runner, tmp_path):
    gold = _json(tmp_path / "gold.json", '[{"question_id": 1, "answer": "yes"}, {"question_id": 2, "answer": "no"}]')
    preds = _json(tmp_path / "p.json", '[{"question_id": "1", "answer": "yes"}, {"question_id": 2, "answer": "no"}]')
    out = runner.invoke(app, ["eval", "--metric", "accuracy", "--annotations", str(gold), "--predictions", str(preds)])
    assert out.exit_code == 2, out.output
    assert "1 prediction id(s) are written as strings where the annotations write int" in out.output


# --- YAML 1.2 everywhere ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expect",
    [
        ("1:30", "got text"),  # YAML 1.1 read it as 90 (base 60)
        ("0o17", "write numbers in decimal"),
        ("0x1f", "write numbers in decimal"),
        ("9" * 5000, "an integer of 5,000 digits"),
        ("2001-01-01", "YAML timestamp"),
    ],
)
def test_a_spec_value_yaml_1_1_would_read_otherwise_is_refused_with_its_line(runner, toy_family, value, expect):
    from tests.conftest import TOY_SPEC

    write_spec(toy_family, TOY_SPEC.replace("smoke: {seeds: [0]}", f"smoke: {{seeds: [{value}]}}"), "toy", "toy-table1")
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--dry-run"])
    assert out.exit_code == 2, out.output
    line = [n for n, text in enumerate(TOY_SPEC.splitlines(), 1) if "smoke: {seeds" in text][0]
    assert f"toy-table1.yaml:{line}: " in out.output and (expect in out.output or "seed is an integer" in out.output)
    assert len(out.output.strip().splitlines()) == 1 and len(out.output) < 1000


@pytest.mark.parametrize("value", ["1:30", "0x10", "9" * 5000])
def test_an_override_is_read_as_yaml_1_2_too(runner, toy_family, value):
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--dry-run", f"recipe.epochs={value}"])
    assert out.exit_code == 2, out.output
    assert "recipe.epochs=" in out.output and len(out.output) < 1000
    assert "Error" not in out.output  # no exception class name


def test_a_catalog_value_is_read_as_yaml_1_2(tmp_path):
    from repro.data.catalog import load_catalog

    path = tmp_path / "catalog.yaml"
    path.write_text("datasets:\n  a:\n    files: [{url: 'http://h/a', size: 0x10}]\n")
    with pytest.raises(ReproError, match=r"catalog .*catalog\.yaml:3: .*write numbers in decimal"):
        load_catalog(path)


# --- spec files meet the checks overrides meet: 70 random mutations --------------------------------------------

HOSTILE_VALUES = [
    float("inf"),
    float("-inf"),
    float("nan"),
    -1,
    0,
    2.5,
    10**40,
    2**70,
    {"a": 1},
    [1, 2],
    [1, 1],
    [3, 1],
    "text",
    True,
    None,
    1e20,
    "1:30",
    [],
    1,
    3,
    7,
    0.5,
]


def _settings_leaves(spec: dict) -> list[tuple[tuple, object]]:
    """(key path, value) of each synthetic-scale setting a mutation may change, and the tolerance."""
    synthetic = spec["scales"]["synthetic"]
    leaves = [(("scales", "synthetic", "tolerance", "default"), synthetic["tolerance"]["default"])]
    for section in ("generator", "sizes", "recipe"):
        for key, value in synthetic[section].items():
            if isinstance(value, dict):
                leaves += [(("scales", "synthetic", section, key, k), v) for k, v in value.items() if k != "name"]
            else:
                leaves.append((("scales", "synthetic", section, key), value))
    return leaves


def _sane(path: tuple, original, value) -> bool:
    """A value any reader would accept for the setting at `path`: the original's kind, finite, not negative, a
    count stays a count, a schedule's milestones rise. Such a value is harmless if a run takes it."""
    import math

    if isinstance(original, bool) or isinstance(value, bool):
        return isinstance(original, bool) and isinstance(value, bool)
    if isinstance(original, list):
        return (
            isinstance(value, list)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
            and value == sorted(set(value))
        )
    if isinstance(original, int):  # a size of 0 (no layers) builds and trains: an ablation, not a crash
        counts = "sizes" not in path and "schedule" not in path  # a schedule's warm-up of 0 epochs: none
        ok = isinstance(value, int) and value >= (1 if original >= 1 and counts else 0)
        return ok and (path[-1] != "seed" or value < 2**31) and value <= 10**8
    if isinstance(original, float):
        top = 1 if path[-1].endswith(("probability", "_error", "_share", "_change")) else 10_000
        return isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= top
    return type(value) is type(original)


def _line_of(text: str, path: tuple) -> set[int]:
    """The lines of the key at `path` and of each mapping above it, in a block-style YAML text."""
    lines, depth, found = text.splitlines(), 0, set()
    start = 0
    for depth, key in enumerate(path):
        for n in range(start, len(lines)):
            if lines[n].startswith("  " * depth + f"{key}:"):
                found.add(n + 1)
                start = n + 1
                break
    return found


@pytest.mark.slow
def test_70_random_spec_mutations_are_refused_with_their_line_or_harmless(runner, sandbox, tmp_path):
    import copy

    import yaml
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from repro.paths import REPO_DIR

    original = yaml.safe_load((REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml").read_text())
    original["scales"]["synthetic"]["sizes"] = dict(original["scales"]["synthetic"]["sizes"])
    leaves = _settings_leaves(original)
    outcomes = {"refused": 0, "harmless": 0}

    @settings(max_examples=70, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.sampled_from(leaves), st.sampled_from(HOSTILE_VALUES))
    def mutate(leaf, value):
        path, before = leaf
        spec = copy.deepcopy(original)
        inner = spec
        for key in path[:-1]:
            inner = inner[key]
        inner[path[-1]] = value
        copy_file = tmp_path / "mutated.yaml"
        text = yaml.safe_dump(spec, sort_keys=False, default_flow_style=False, allow_unicode=True)
        if value == "1:30":
            text = text.replace("'1:30'", "1:30")  # as a person would type it (YAML 1.1 read 90)
        copy_file.write_text(text)
        out = runner.invoke(app, ["run", str(copy_file), "--scale", "synthetic", "--dry-run", "--rows", "MCAN"])
        if out.exit_code == 0:
            assert _sane(path, before, value), (path, value, out.output[-300:])
            outcomes["harmless"] += 1
            return
        line = out.output.strip()
        assert out.exit_code == 2 and "\n" not in line and len(line) < 1000, (path, value, out.output)
        assert line.startswith(f"error: {copy_file}:"), (path, value, line)
        at = int(line.split(f"{copy_file}:")[1].split(":")[0])
        assert at in _line_of(text, path), (path, value, line)
        assert "Traceback" not in out.output and "Error:" not in line
        outcomes["refused"] += 1

    mutate()
    assert outcomes["refused"] >= 35 and sum(outcomes.values()) == 70, outcomes


# --- finite weights, or a refusal naming the tensor ---------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, expect",
    [
        (float("nan"), "fc_1.weight holds 1 NaN or infinite value(s) of 12"),
        (float("inf"), "fc_1.weight holds 1 NaN or infinite value(s) of 12"),
        (1e300, "fc_1.weight holds 1e+300, beyond what float32 holds"),
    ],
)
def test_a_released_checkpoint_with_values_no_model_can_hold_is_refused_naming_the_tensor(bad, expect):
    from repro.weights import convert_by_rules, strict_load
    from tests.test_weights import RULES, Toy, _official, _snapshot, _unchanged

    model, official = Toy(), _official()
    official = {k: v.double() for k, v in official.items()}
    official["fc_1.weight"][1, 2] = bad
    before = _snapshot(model)
    with pytest.raises(ReproError, match=re.escape(expect)):
        strict_load(model, convert_by_rules(official, RULES, "toy"), "toy")
    assert _unchanged(model, before)


@pytest.mark.parametrize("bad", [float("nan"), float("-inf")])
def test_the_toolkits_own_checkpoint_with_a_nan_weight_is_refused_before_resume_or_evaluation(tmp_path, bad):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    with torch.no_grad():
        model.weight[0, 1] = bad
    checkpoint.save_checkpoint(tmp_path / "last.pt", model=model, optimizer=optimizer, epoch=1, step=1, step_in_epoch=0)
    with pytest.raises(ReproError, match=r"last\.pt: model\.weight holds 1 NaN or infinite value\(s\) of 6; refused"):
        checkpoint.load_checkpoint(tmp_path / "last.pt")


def test_the_toolkits_own_checkpoint_with_float64_beyond_float32_is_refused(tmp_path):
    state = {"format": checkpoint.FORMAT, "model": {"w": torch.tensor([1.0, 1e39], dtype=torch.float64)}, "extra": {}}
    torch.save(state, tmp_path / "last.pt")
    with pytest.raises(ReproError, match=r"model\.w holds 1e\+39, beyond what float32 holds"):
        checkpoint.load_checkpoint(tmp_path / "last.pt")


def test_resume_from_a_checkpoint_with_a_nan_weight_is_one_line(runner, toy_family, tmp_path):
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted"])
    assert out.exit_code == 0, out.output
    last = _toy_unit(toy_family / "data" / "runs")
    state = torch.load(last, weights_only=False)
    name = next(iter(state["model"]))
    state["model"][name].view(-1)[0] = float("nan")
    torch.save(state, last)
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--resume", "--force"])
    assert out.exit_code != 0
    assert f"model.{name} holds 1 NaN or infinite value(s)" in out.output and "Traceback" not in out.output


# --- the token never leaves, in any form --------------------------------------------------------------------------


def _encodings(token: str) -> dict[str, str]:
    import base64
    import codecs

    raw = token.encode()
    return {
        "as is": token,
        "upper case": token.upper(),
        "hex": raw.hex(),
        "base32": base64.b32encode(raw).decode(),
        "base64": base64.b64encode(raw).decode(),
        "rot13": codecs.encode(token, "rot13"),
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in token),
        "zero-width": "\u200b".join(token),
        "spaced": " ".join(token),
        "dashed": "-".join(token[i : i + 4] for i in range(0, len(token), 4)),
    }


def _leaks(text: str, token: str) -> list[str]:
    """Which form of the token a text holds: each encoding looked for after the text is normalised as a reader
    would read it (NFKC, zero-width characters and separators removed, any case), by any 12 characters in a row."""
    import base64
    import codecs
    import unicodedata

    def norm(s: str) -> str:
        s = unicodedata.normalize("NFKC", s).lower()
        return "".join(c for c in s if c not in "\u200b\u200c\u200d\u2060\ufeff\u00ad \t\n\r-_.:/")

    seen = norm(text)
    raw = token.encode()
    forms = {
        "token": token,
        "hex": raw.hex(),
        "base32": base64.b32encode(raw).decode(),
        "base64": base64.b64encode(raw).decode(),
        "rot13": codecs.encode(token, "rot13"),
    }
    found = []
    for name, form in forms.items():
        form = norm(form)
        if any(form[i : i + 12] in seen for i in range(len(form) - 11)):
            found.append(name)
    return found


@pytest.mark.parametrize("outcome", ["finished", "failed"])
def test_the_token_appears_in_no_output_record_or_file_in_any_encoding(runner, sandbox, monkeypatch, outcome):
    from tests.evalai_stub import EvalAIStub
    from tests.test_submit import TOKEN, vqa_predictions, vqa_questions

    home = sandbox / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("EVALAI_API_URL", raising=False)
    echoes = " | ".join(f"{name}: {text}" for name, text in _encodings(TOKEN).items())
    server = EvalAIStub(TOKEN).start()
    try:
        (home / ".evalai").mkdir()
        (home / ".evalai" / "host_url").write_text(server.url)
        (home / ".evalai" / "token.json").write_text(json.dumps({"token": TOKEN}))
        server.outcome = outcome
        server.result = [{"test-dev": {"overall": 71.05, f"echo {echoes}": 1.0}}, {echoes: {"number": 54.86}}]
        server.stderr_text = f"Traceback (most recent call last):\nValueError: bad token {echoes}\n"
        server.remaining[1793] = {"remaining_submissions_today_count": 1, "message": f"hello {echoes}"}
        vqa_questions(sandbox)
        preds = vqa_predictions(sandbox / "p.json")
        words = ["submit", "vqa2-test-dev", "-p", str(preds), "--yes", "--wait", "--poll", "0.01"]
        out = runner.invoke(app, words)
        assert out.exit_code == (0 if outcome == "finished" else 1), out.output
        assert ("71.05" in out.stdout) == (outcome == "finished")
        sid = max(server.submissions)
        status = runner.invoke(app, ["submit", "--status", str(sid)])
        server.fail["poll"] = (403, {"error": f"token {echoes} not allowed"})
        refused = runner.invoke(app, ["submit", "--status", str(sid)])
        assert refused.exit_code == 1
    finally:
        server.stop()
    texts = {"output": out.output, "status": status.output, "refused": refused.output}
    for path in sandbox.rglob("*"):
        if path.is_file() and ".evalai" not in path.parts and path.suffix in (".jsonl", ".json", ".txt", ".log"):
            texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    assert any("submissions.jsonl" in name for name in texts)
    assert any(f"{sid}." in name for name in texts)  # the server's file, kept
    leaked = {name: forms for name, text in texts.items() if (forms := _leaks(text, TOKEN))}
    assert leaked == {}
    assert _leaks(echoes, TOKEN)  # the check finds every form it looks for


# --- a dataset's type codes are its own -------------------------------------------------------------------------


def test_a_cocoqa_type_code_outside_its_four_is_refused_with_its_line(runner, tmp_path):
    split = tmp_path / "test"
    split.mkdir()
    (split / "answers.txt").write_text("dog\nred\n")
    (split / "types.txt").write_text("0\n7\n")
    preds = _json(tmp_path / "pred.txt", "dog\nblue\n")
    out = runner.invoke(app, ["eval", "--metric", "accuracy", "-a", str(split), "-p", str(preds)])
    assert out.exit_code == 2 and f"{split / 'types.txt'}:2: type 7 is not one of COCO-QA's 0-3" in out.output


def test_a_cocoqa_file_that_is_not_utf8_is_one_line_with_its_line(tmp_path):
    from repro.datasets.vqa import COCOQA_FILES, read_cocoqa_split

    for name in COCOQA_FILES:
        (tmp_path / name).write_text("1\n2\n" if name != "questions.txt" else "what?\nwho?\n")
    (tmp_path / "types.txt").write_bytes(b"0\n\xff\n")
    with pytest.raises(ReproError, match=r"types\.txt:2: not UTF-8 text"):
        read_cocoqa_split(tmp_path)


# --- every failure is one clean line ------------------------------------------------------------------------------

EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")


def _one_clean_line(out) -> str:
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert out.exit_code == 2, out.output
    assert len(lines) == 1 and lines[0].startswith("error: "), out.output
    assert not EXCEPTION_NAME.search(lines[0]) and len(lines[0]) <= 1000, lines[0]
    return lines[0]


def test_100000_deep_json_in_submit_dry_run_is_one_line(runner, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out = runner.invoke(app, ["submit", "vqa2-test-dev", "-p", str(deep), "--dry-run"])
    assert f"{deep}: not readable: the JSON is nested too deeply" in _one_clean_line(out)


def test_a_5000_digit_number_in_a_prediction_file_and_an_override_is_one_line(runner, toy_family, tmp_path):
    big = tmp_path / "big.json"
    big.write_text('[{"question_id": 1, "answer": 1' + "0" * 5000 + "}]")
    out = runner.invoke(app, ["submit", "vqa2-test-dev", "-p", str(big), "--dry-run"])
    assert "a number in it has too many digits" in _one_clean_line(out)
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--dry-run", "recipe.epochs=" + "9" * 5000])
    line = _one_clean_line(out)
    assert "a value of 5,000 characters" in line and "(4,814 more characters)" in line  # the echo cut, with a count


@pytest.mark.parametrize("key", ["1=2", "recipe.1=2", "x" * 5000 + "=1", "recipe.epochs" + "." * 3000 + "=2"])
def test_odd_override_keys_are_one_short_line(runner, toy_family, key):
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--dry-run", key])
    assert len(_one_clean_line(out)) < 400


def test_a_spec_with_an_integer_key_is_refused_with_its_line(runner, toy_family):
    from tests.conftest import TOY_SPEC

    write_spec(toy_family, TOY_SPEC.replace("smoke: {seeds: [0]}", "smoke: {seeds: [0], 7: 1}"), "toy", "toy-table1")
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--dry-run"])
    assert "key 7 is not a name; quote it" in _one_clean_line(out)


def test_a_file_size_limit_is_one_line_naming_the_file(tmp_path):
    """`ulimit -f`: the write fails with EFBIG (Python ignores SIGXFSZ); the command says which file, in one line."""
    import subprocess
    import sys

    out = tmp_path / "table.md"
    script = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); "
        "from repro.cli import main; "
        "sys.argv = ['repro', 'table', 'mcan-pa-table5-ablation', '-o', sys.argv[1]]; main()"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)], capture_output=True, text=True, env=env, timeout=300
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and lines == [f"error: {out}: File too large"], done.stdout + done.stderr
    assert not out.exists() and not list(tmp_path.glob(".table.md.*"))  # no partial file left


def test_weights_convert_into_a_folder_it_cannot_write_is_one_line(runner, tmp_path):
    official = tmp_path / "model.pth"
    torch.save({"state_dict": {"a": torch.zeros(2)}}, official)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = runner.invoke(
        app,
        ["weights", "convert", str(official), "--family", "mcan-pa", "--layout", "mcan-vqa", "-o", f"{blocker}/x.pt"],
    )
    assert f"{blocker}/x.pt: Not a directory" in _one_clean_line(out)


@pytest.mark.parametrize(
    "override, expect",
    [
        ("recipe.schedule.decay_epochs=[1, 1]", "must rise, each value once"),
        ("recipe.schedule.decay_epochs=[3, 1]", "must rise, each value once"),
        ("recipe.schedule.warmup_epochs=-1", "must not be negative"),
        ("generator.seed=2^70", "expected an integer"),
        ("generator.seed=1180591620717411303424", "at most 1,000,000,000"),
        ("generator.train_images=0", "must be at least 1"),
        ("generator.annotator_error=1.5", "a probability or share, 0..1"),
        ("sizes.layers=2.5", "expected an integer"),
    ],
)
def test_overrides_the_issue_names_are_refused(runner, sandbox, override, expect):
    from tests.conftest import copy_spec

    copy_spec(sandbox, "mcan-pa", "mcan-pa-table5-ablation")
    words = ["run", "mcan-pa-table5-ablation", "--scale", "synthetic", "--rows", "MCAN", "--dry-run", override]
    line = _one_clean_line(runner.invoke(app, words))
    assert expect in line and override.split("=")[0] in line, line
