"""A command imports only what it uses: `repro --help`, `show`, `list`, `table` and `eval` load no pandas, torch or
scipy, except what judging a table's claims uses (scipy, and statsmodels with pandas); none loads torch (each
command's speed is `benchmarks/bench_commands.py`'s; no test times anything)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repro.paths import REPO_DIR

HEAVY = ("pandas", "torch", "scipy")
PROBE = """
import sys
from repro.cli import app
try:
    app(sys.argv[1:], prog_name="repro")
except SystemExit as exc:
    code = exc.code
print("\\nLOADED", sorted(m for m in {heavy!r} if m in sys.modules), code)
"""


def loaded(args: list[str], env_extra: dict[str, str] | None = None) -> tuple[list[str], str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO_DIR), **(env_extra or {})}
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True, env=env, cwd=REPO_DIR
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED"))
    return json.loads(line.split(" ", 1)[1].rsplit(" ", 1)[0].replace("'", '"')), done.stdout + done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["show", "mcan-pa-table5-ablation"],
        ["list"],
        ["table", "psac-table1-stats"],
        ["table", "mcan-pa-table6-complexity", "-v"],
    ],
)
def test_the_first_commands_load_no_pandas_torch_or_scipy(args):
    heavy, output = loaded(args)
    assert heavy == [], output


@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_a_table_that_judges_its_claims_loads_their_statistics_and_no_torch(verbose):
    # scipy's t and noncentral t, and statsmodels' TOST (which brings pandas), are what judging uses
    heavy, output = loaded(["table", "mcan-pa-table5-ablation", "--scale", "synthetic", *verbose])
    assert "torch" not in heavy and "scipy" in heavy and "holds" in output, output


def test_eval_loads_no_pandas_torch_or_scipy(tmp_path):
    annotations = {
        "annotations": [
            {"question_id": 1, "answer_type": "yes/no", "question_type": "is", "answers": [{"answer": "yes"}] * 10}
        ]
    }
    (tmp_path / "a.json").write_text(json.dumps(annotations))
    (tmp_path / "p.json").write_text(json.dumps([{"question_id": 1, "answer": "yes"}]))
    args = ["eval", "--metric", "vqa", "-a", str(tmp_path / "a.json"), "-p", str(tmp_path / "p.json"), "--json"]
    heavy, output = loaded(args)
    assert heavy == [] and '"overall": 100.0' in output, output


MODULES = """
import json, sys
from repro.cli import app
try:
    app(sys.argv[1:], prog_name="repro")
except SystemExit:
    pass
print("\\nMODULES", json.dumps(sorted(sys.modules)))
"""


def modules(args: list[str]) -> set[str]:
    """The modules a command has loaded when it ends (run as a process of its own)."""
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    done = subprocess.run([sys.executable, "-c", MODULES, *args], capture_output=True, text=True, env=env, cwd=REPO_DIR)
    line = next((line for line in done.stdout.splitlines() if line.startswith("MODULES")), None)
    assert line is not None, done.stdout + done.stderr
    return set(json.loads(line.split(" ", 1)[1]))


def packages(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


def test_help_is_clicks_plain_help_and_loads_neither_rich_nor_pydantic():
    assert not packages(modules(["--help"])) & {"rich", "pydantic"}


def test_show_loads_the_config_of_its_own_family_only_and_no_yaml_reader_once_parsed():
    modules(["show", "mcan-pa-table5-ablation"])  # parses the files and keeps the parse (the session's cache folder)
    loaded = modules(["show", "mcan-pa-table5-ablation"])
    configs = {name for name in loaded if name.startswith("repro.families.") and name.endswith(".config")}
    assert configs == {"repro.families.mcan_pa.config"}
    assert "yaml" not in packages(loaded) and "ruamel.yaml" not in loaded
