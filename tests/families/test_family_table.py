"""The family table: a new family is one folder plus one line, and the generic layers run it unchanged."""

from __future__ import annotations

import json
import subprocess

from repro.cli import app
from repro.paths import REPO_DIR
from tests.conftest import TOY_SPEC, write_spec


def test_a_toy_family_runs_through_run_and_table_without_touching_the_toolkit(toy_family, runner):
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    table = json.loads(runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "--format", "json"]).output)
    reproduced = {row["name"]: row["reproduced"]["Acc"] for row in table["rows"]}
    assert reproduced["Sighted"] > 90.0 and 20.0 < reproduced["Blind"] < 80.0
    model = json.loads(runner.invoke(app, ["model", "toy-table1", "--row", "Sighted", "--format", "json"]).output)
    assert model["models"][0]["trainable_params"] == 2 * 16 + 16 + 16 * 2 + 2


def test_a_typo_in_a_toy_row_is_refused_with_its_line(toy_family, runner):
    write_spec(
        toy_family, TOY_SPEC.replace("use_position: false", "use_postion: false"), paper="toy", ident="toy-table1"
    )
    out = runner.invoke(app, ["list"])
    assert out.exit_code == 2
    assert "toy-table1.yaml:12:" in out.output and "use_postion" in out.output and "use_position" in out.output


def test_generic_layers_name_no_paper_model_or_dataset():
    generic = [
        "repro/cli.py",
        "repro/run.py",
        "repro/train/trainer.py",
        "repro/report",
        "repro/variants.py",
        "repro/monitor.py",
    ]
    found = subprocess.run(
        ["grep", "-rniE", "mcan|vqa|m4c|psac|albef", *generic], cwd=REPO_DIR, capture_output=True, text=True
    ).stdout.splitlines()
    code = [line for line in found if not line.split(":", 2)[2].lstrip().startswith("#")]
    assert code == [], "\n".join(code)
