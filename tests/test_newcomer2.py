"""A newcomer's first hour, continued: exports say what their columns are and carry only what the terminal
shows; the markdown export through pandas."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from typer.testing import CliRunner

from repro import results
from repro.cli import app
from repro.report import build_view, render_csv, render_html, render_json, render_latex, render_markdown
from repro.report.export import FIELDS
from repro.specs import resolve


def _table(*args: str):
    out = CliRunner().invoke(app, ["table", *args], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    return out.stdout


def test_off_paper_scale_exports_carry_no_synthetic_minus_paper_delta():
    rows = list(csv.DictReader(io.StringIO(_table("table5-ablation", "--scale", "synthetic", "-f", "csv"))))
    assert rows and "delta" in rows[0] and {r["delta"] for r in rows} == {""}
    assert {r["effect_reproduced"] for r in rows} != {""}  # the effects, which the terminal shows, stay
    data = json.loads(_table("table5-ablation", "--scale", "synthetic", "-f", "json"))
    assert all("delta" in r and r["delta"] is None for r in data["rows"])  # the key stays, empty
    assert any(r["reproduced"] for r in data["rows"])
    assert "paper scale only" in data["fields"]["delta"]


def test_at_paper_scale_the_delta_is_what_the_terminal_shows(demo_spec):
    spec = resolve("t1-demo")
    results.write_result(
        results.Result(
            spec="t1-demo", paper="mcan-pa", row="Ours*", scale="paper", split="test-dev", metrics={"All": 70.55}
        ),
        spec,
    )
    view = build_view(spec)
    ours = next(
        r for r in csv.DictReader(io.StringIO(render_csv(view))) if r["row"] == "Ours*" and r["column"] == "All"
    )
    assert float(ours["delta"]) == -0.5
    assert json.loads(render_json(view))["rows"][1]["delta"] == {"All": -0.5}
    line = next(line for line in render_markdown(view).splitlines() if line.startswith("| Ours*"))
    assert line.replace(" ", "").endswith("|70.55|-0.50|")


def test_every_export_says_what_its_columns_are():
    view = build_view(resolve("table5-ablation"), "synthetic")
    note = "Columns under each metric: reported = the paper's value; synthetic = our mean over the seeds"
    assert note in render_markdown(view)
    assert note.replace("'", "&#x27;") in render_html(view) or note.replace("'", "&#39;") in render_html(view)
    assert "Columns under each metric" in render_latex(view)
    data = json.loads(render_json(view))
    row_keys = set(data["rows"][0])
    assert row_keys - {"runnable", "reference", "reproduced_split"} <= set(data["fields"]), row_keys - set(
        data["fields"]
    )
    assert data["columns_note"].startswith("Columns under each metric")
    header = next(csv.reader(io.StringIO(render_csv(view))))  # plain CSV: a header row, no comment line
    assert header[0] == "row" and set(header) <= set(FIELDS)


def test_markdown_goes_through_pandas_and_aligns_its_columns():
    md = render_markdown(build_view(resolve("table5-ablation"), "synthetic"))
    table = [line for line in md.splitlines() if line.startswith("|")][:12]
    assert table[1].startswith("|:---") and table[1].count("---:") == table[0].count("|") - 2
    assert len({len(line) for line in table}) == 1, "columns padded to one width, as tabulate writes them"
    [line] = [line for line in table if line.startswith("| MCAN+PA (ours) |")]
    assert re.search(r" [+-]\d+\.\d\d(?: [✓✗])? \|", line), line  # signed gaps and marks kept as text, not parsed


# --- logging: -v/-q and run.log beside train.jsonl ------------------------------------------------

RECIPE = """\
optimizer: {name: adam, betas: [0.9, 0.98], eps: 1.0e-9}
schedule: {name: mcan, base_lr: 0.001, warmup_epochs: 1, decay_epochs: [2], decay_rate: 0.2}
epochs: 2
batch_size: 8
loss: bce-sum
seed: 5
"""


def _log_levels():
    import logging

    from repro import log

    return logging, log


def test_console_level_follows_v_and_q_and_always_shows_warnings(capsys):
    logging, log = _log_levels()
    assert (log.level_for(), log.level_for(verbose=1), log.level_for(quiet=1)) == (
        logging.INFO,
        logging.DEBUG,
        logging.WARNING,
    )
    try:
        for level, shown in (
            (logging.WARNING, {"warning: w", "error: e"}),
            (logging.INFO, {"i", "warning: w", "error: e"}),
            (logging.DEBUG, {"d", "i", "warning: w", "error: e"}),
        ):
            log.setup(level)
            capsys.readouterr()
            child = logging.getLogger("repro.somewhere")
            child.debug("d"), child.info("i"), child.warning("w"), child.error("e")
            child.info("file only", extra=log.file_only())
            assert set(capsys.readouterr().err.splitlines()) == shown
        log.setup(logging.ERROR)  # asking for less than warnings still shows them
        child.warning("w")
        assert capsys.readouterr().err == "warning: w\n"
    finally:
        log.setup(logging.INFO)


def test_root_options_v_and_q():
    runner = CliRunner()
    try:
        out = runner.invoke(app, ["-v", "show", "mcan-pa-table5-ablation"], env={"COLUMNS": "80"})
        assert out.exit_code == 0, out.output
        assert "log level DEBUG" in out.stderr
        out = runner.invoke(app, ["show", "mcan-pa-table5-ablation"], env={"COLUMNS": "80"})
        assert out.exit_code == 0 and "log level" not in out.stderr
        out = runner.invoke(app, ["-v", "-q", "list"])
        assert out.exit_code == 2 and "-v and -q contradict each other" in out.output
        assert "Traceback" not in out.output
    finally:
        _log_levels()[1].setup(_log_levels()[0].INFO)


def test_a_training_run_writes_run_log_beside_train_jsonl(tmp_path):
    import torch

    from repro.families import load_recipe
    from repro.families.mcan_pa.build import build_model
    from repro.train import TrainingInterrupted, fit
    from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA

    (tmp_path / "tiny.yaml").write_text(RECIPE)
    recipe = load_recipe(str(tmp_path / "tiny.yaml"))
    torch.manual_seed(0)
    model = build_model(TABLE5_CONFIGS["MCAN"], NUM_TOKENS, NUM_ANSWERS, sizes=TINY_SIZES)
    workdir = tmp_path / "unit"
    fit(model, TinyVQA(16), recipe, workdir, progress=False)
    assert (workdir / "train.jsonl").exists()
    lines = (workdir / "run.log").read_text(encoding="utf-8").splitlines()
    assert "INFO repro.train: training MCAN" in lines[0] and "16 samples" in lines[0]
    assert [line.split(": ", 1)[1].split(":")[0] for line in lines[1:3]] == ["epoch 1/2 done", "epoch 2/2 done"]
    assert lines[-1].endswith("training loop ended")

    def stop(step):  # a failure inside the loop is recorded in run.log, then raised as before
        raise TrainingInterrupted("stopped by the test")

    model = build_model(TABLE5_CONFIGS["MCAN"], NUM_TOKENS, NUM_ANSWERS, sizes=TINY_SIZES)
    with pytest.raises(TrainingInterrupted):
        fit(model, TinyVQA(16), recipe, workdir, progress=False, on_step=stop)
    lines = (workdir / "run.log").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and "WARNING repro.train: stopped: TrainingInterrupted: stopped by the test" in lines[-1]


# --- make demo: no pip ERROR line, the demo's rows beside the committed ones -------------------------


def _demo_commands(tmp_path) -> list[str]:
    import shutil
    import subprocess

    from repro.paths import REPO_DIR

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", "-B", "demo", f"VENV={tmp_path / 'venv'}"], cwd=REPO_DIR, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if not line.startswith("#")]


def test_make_demo_installs_evalai_last_so_pip_reports_no_conflict(tmp_path):
    # pip checks the installed packages for conflicts after each install unless --no-deps or
    # --no-warn-conflicts; evalai's pins conflict by design, so no install may check once it is in
    commands = _demo_commands(tmp_path)
    installs = [i for i, line in enumerate(commands) if "pip install" in line and "--upgrade pip" not in line]
    evalai = next(i for i in installs if "evalai==" in commands[i])
    assert "--no-deps" in commands[evalai]
    assert all("--no-warn-conflicts" in commands[i] for i in installs if i > evalai), [commands[i] for i in installs]
    assert any(i < evalai and "-e '.[test]'" in commands[i] for i in installs)
    assert any("without its pins on purpose" in commands[i] for i in range(evalai))


def test_make_demo_shows_its_own_rows_then_the_committed_table_each_under_a_heading(tmp_path):
    commands = _demo_commands(tmp_path)
    run = next(i for i, line in enumerate(commands) if " run mcan-pa-table5-ablation" in line)
    tables = [i for i, line in enumerate(commands) if " table mcan-pa-table5-ablation --scale synthetic" in line]
    assert len(tables) == 2 and run < tables[0] < tables[1]
    results = commands[run].split()[0]
    assert results.startswith("REPRO_RESULTS=") and commands[tables[0]].startswith(results)  # the demo's folder
    assert "REPRO_RESULTS" not in commands[tables[1]]  # the committed results
    assert "THIS DEMO" in commands[tables[0] - 1] and "seed 0" in commands[tables[0] - 1]
    committed = json.loads(_table("mcan-pa-table5-ablation", "--scale", "synthetic", "-f", "json"))
    seeds = sorted(row["n"] for row in committed["rows"])
    heading = commands[tables[1] - 1]  # says how many seeds the committed rows have, as the records do
    assert "COMMITTED" in heading and f"all {len(seeds)} rows, {seeds[0]}-{seeds[-1]} seeds each" in heading
