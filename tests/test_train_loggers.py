"""Experiment loggers beside train.jsonl: TensorBoard (read back with its own EventAccumulator), Weights & Biases
(offline), the `--logger` choice, and a one-line error when the extra is missing."""

from __future__ import annotations

import json
import os

import pytest
import torch

from repro.cli import app
from repro.errors import ReproError
from repro.families import load_recipe
from repro.train import fit, loggers
from repro.train.ensemble import fit_ensemble
from tests.test_train_resume import RECIPE
from tests.tiny_vqa import NUM_ANSWERS, TINY_SIZES, TinyVQA


@pytest.fixture
def recipe(tmp_path):
    """The trainer's resume-test recipe (tests/test_train_resume.py) over two epochs."""
    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    return load_recipe(str(path)).replace(epochs=2)


@pytest.fixture(autouse=True)
def no_loggers_chosen(monkeypatch):
    monkeypatch.delenv(loggers.LOGGERS_ENV, raising=False)


class Probe(torch.nn.Module):
    """A linear read-out of the mean region feature: a model that trains in milliseconds."""

    def __init__(self):
        super().__init__()
        self.out = torch.nn.Linear(TINY_SIZES["feature_dim"], NUM_ANSWERS)

    def forward(self, batch):
        return self.out(batch["features"].mean(1))


def new_model(seed=0):
    torch.manual_seed(seed)
    return Probe()


def read_log(workdir):
    return [json.loads(line) for line in (workdir / "train.jsonl").read_text().splitlines()]


def scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_gets_every_step_of_train_jsonl_and_no_number_moves(tmp_path, recipe):
    pytest.importorskip("tensorboard")
    data = TinyVQA(20)  # 3 steps an epoch
    plain = fit(new_model(), data, recipe, tmp_path / "plain", progress=False)
    logged = fit(new_model(), data, recipe, tmp_path / "tb", progress=False, loggers=["tensorboard"])
    assert logged.final_loss == plain.final_loss
    lines = read_log(tmp_path / "tb")
    assert [(r["step"], r["loss"], r["lr"]) for r in lines] == [
        (r["step"], r["loss"], r["lr"]) for r in read_log(tmp_path / "plain")
    ]
    assert not (tmp_path / "plain" / loggers.TENSORBOARD_DIR).exists()
    board = scalars(tmp_path / "tb" / loggers.TENSORBOARD_DIR)
    assert set(board) == {"epoch", "loss", "lr", "samples_per_s", "elapsed_s"}  # counters are the step axis
    assert [step for step, _ in board["loss"]] == [r["step"] for r in lines] == list(range(1, 7))
    assert [value for _, value in board["loss"]] == pytest.approx([r["loss"] for r in lines], rel=1e-6)
    assert [value for _, value in board["lr"]] == pytest.approx([r["lr"] for r in lines], rel=1e-6)

    again = fit(new_model(), data, recipe, tmp_path / "tb", progress=False, loggers=["tensorboard"])
    assert again.final_loss == plain.final_loss
    assert len(list((tmp_path / "tb" / loggers.TENSORBOARD_DIR).glob("events.out.tfevents.*"))) == 1  # a fresh run


def test_each_seed_trained_together_gets_its_own_tensorboard_curves(tmp_path, recipe):
    pytest.importorskip("tensorboard")
    recipes = [recipe, recipe.replace(seed=6)]
    dirs = [tmp_path / f"seed{r.seed}" for r in recipes]
    states = fit_ensemble(
        [new_model(5), new_model(6)], TinyVQA(16), recipes, dirs, progress=False, loggers=["tensorboard"]
    )
    for state, workdir in zip(states, dirs):
        lines = read_log(workdir)
        board = scalars(workdir / loggers.TENSORBOARD_DIR)
        assert [step for step, _ in board["loss"]] == [r["step"] for r in lines] == [1, 2, 3, 4]
        assert [value for _, value in board["loss"]] == pytest.approx([r["loss"] for r in lines], rel=1e-6)
        assert board["loss"][-1][1] == pytest.approx(state.final_loss, rel=1e-6)
    assert read_log(dirs[0])[-1]["loss"] != read_log(dirs[1])[-1]["loss"]


def test_weights_and_biases_runs_offline_beside_train_jsonl(tmp_path, recipe, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv(loggers.LOGGERS_ENV, "wandb")  # what --logger sets for the run's processes
    workdir = tmp_path / "runs" / "spec" / "smoke" / "MCAN" / "seed5"
    state = fit(new_model(), TinyVQA(16), recipe, workdir, progress=False)
    (run_file,) = (workdir / "wandb").glob("offline-run-*/run-*.wandb")
    written = run_file.read_bytes()
    lines = read_log(workdir)
    assert len(lines) == 4 and lines[-1]["loss"] == state.final_loss
    for line in lines:  # every step's loss, as W&B's history encodes it (JSON)
        assert json.dumps(line["loss"]).encode() in written
    assert b"spec/smoke/MCAN/seed5" in written  # the run's name: the unit it trains


def test_logger_names_are_checked_and_a_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda name: object())
    assert loggers.parse_loggers(["tensorboard,wandb", "TensorBoard", ""]) == ("tensorboard", "wandb")
    assert loggers.parse_loggers(None) == ()
    with pytest.raises(ReproError, match=r"unknown logger 'tensorbord' \(did you mean 'tensorboard'\?\)"):
        loggers.parse_loggers(["tensorbord"])
    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ReproError, match=r"^--logger wandb needs the wandb package: pip install 'repro\[wandb\]'$"):
        loggers.parse_loggers(["wandb"])
    monkeypatch.setenv(loggers.LOGGERS_ENV, "tensorboard")
    with pytest.raises(ReproError, match=r"pip install 'repro\[tensorboard\]'"):
        loggers.selected()


def test_logger_option_reaches_every_process_of_the_run(runner, monkeypatch):
    pytest.importorskip("tensorboard")
    monkeypatch.setenv(loggers.LOGGERS_ENV, "")
    out = runner.invoke(
        app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--logger", "tensorboard", "--dry-run"]
    )
    assert out.exit_code == 0, out.output
    assert os.environ[loggers.LOGGERS_ENV] == "tensorboard"
    bad = runner.invoke(app, ["train", "table5-ablation", "--row", "MCAN", "--scale", "smoke", "--logger", "mlflow"])
    assert bad.exit_code == 2 and "unknown logger 'mlflow'" in bad.output and "Traceback" not in bad.output


def test_the_jsonl_logger_is_the_metric_logger_shape(tmp_path):
    path = tmp_path / "train.jsonl"
    with loggers.open_loggers(tmp_path, path, []) as logger:
        logger.log_dict({"step": 1, "loss": 0.5}, 1)
        logger.log("lr", 0.01, 2)
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"step": 1, "loss": 0.5},
        {"step": 2, "lr": 0.01},
    ]


def test_a_wrong_repro_loggers_is_one_line_naming_it_before_anything_runs(runner, monkeypatch):
    monkeypatch.setenv(loggers.LOGGERS_ENV, "tensorbord")
    out = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--dry-run"])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert "error: REPRO_LOGGERS=tensorbord: unknown logger 'tensorbord' (did you mean 'tensorboard'?)" in out.output
    assert "plan:" not in out.output  # refused before the plan
