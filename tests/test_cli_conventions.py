"""Command-line conventions: -h, choices checked while parsing, env vars in --help, one meaning per short
option, --format json where a command prints data, shell completion of ids, rows, datasets and targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer

from repro import cli
from repro.cli import app


def test_help_short_flag_and_env_vars_in_help(runner):
    out = runner.invoke(app, ["-h"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    text = " ".join(out.output.split())  # where a line breaks is the terminal's width
    for name in ("REPRO_DATA_DIR", "REPRO_RESULTS", "REPRO_EXPERIMENTS", "REPRO_CATALOG", "REPRO_DEBUG"):
        assert f"[env var: {name}]" in text
    assert "--install-completion" in out.output


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["table", "no-such-id", "--format", "xml"], "--format"),
        (["table", "no-such-id", "--scale", "huge"], "--scale"),
        (["run", "no-such-id", "--scale", "huge"], "--scale"),
        (["eval", "--metric", "bleu", "-a", "x", "-p", "y"], "--metric"),
        (["list", "--format", "yaml"], "--format"),
    ],
)
def test_choices_are_checked_while_parsing_before_anything_else(runner, args, option):
    out = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert (
        out.exit_code == 2 and f"Invalid value for '{option}'" in out.output and "unknown experiment" not in out.output
    )


def test_choices_are_shown_in_help(runner):
    out = runner.invoke(app, ["table", "-h"], env={"COLUMNS": "200"})
    assert "[rich|text|md|csv|latex|html|json]" in out.output and "[paper|synthetic|smoke]" in out.output


def test_the_cli_lists_of_choices_are_the_toolkits():
    from repro.report import FORMATS
    from repro.specs import SCALES

    assert cli.SCALES == SCALES and cli.TABLE_FORMATS == FORMATS


def test_a_short_option_means_one_thing_in_every_command():
    group = typer.main.get_command(app)
    meaning: dict[str, set[str]] = {}
    for command in group.commands.values():
        for param in command.params:
            if (
                type(param).__name__ == "TyperOption"
                or hasattr(param, "secondary_opts")
                and param.param_type_name == "option"
            ):
                longs = [o for o in param.opts if o.startswith("--")]
                for short in (o for o in param.opts + param.secondary_opts if len(o) == 2):
                    meaning.setdefault(short, set()).update(longs)
    clashes = {s: names for s, names in meaning.items() if len(names) > 1}
    assert clashes == {}


def test_show_prints_json(runner):
    data = json.loads(runner.invoke(app, ["show", "table5-ablation", "--format", "json"]).output)
    assert data["id"] == "mcan-pa-table5-ablation" and any(r["name"] == "MCAN" for r in data["rows"])


def _complete(words: str) -> list[str]:
    env = {
        **os.environ,
        "_REPRO_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - 1),
    }
    out = subprocess.run([sys.executable, "-m", "repro"], env=env, capture_output=True, text=True, timeout=60)
    return out.stdout.split("\n")


def test_completion_offers_ids_rows_choices_datasets_and_targets():
    assert "mcan-pa-table5-ablation" in _complete("repro table mcan-pa-table5")
    assert "MCAN+PA (ours)" in _complete("repro run table5-ablation --rows MCAN+P")
    assert "vqa2" in _complete("repro download vq")


def test_completers_offer_choices_and_targets_in_process():
    from repro import completion

    assert completion.targets("vqa2") == ["vqa2-test-dev", "vqa2-test-std"]
    assert completion.experiment_ids("acerpe-table1") == ["acerpe-table1-pe"]


def test_check_prints_json(runner):
    out = runner.invoke(app, ["check", "table5-ablation", "--format", "json"])
    data = json.loads(out.output)
    assert out.exit_code == 0 and data["regressions"] == 0 and all(c["ok"] for c in data["checks"])
