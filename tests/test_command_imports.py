"""A command imports only what it uses: `repro --help`, `show`, `list`, `table` and `eval` load no pandas, torch or
scipy (each command's speed is `benchmarks/bench_commands.py`'s; no test times anything)."""

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
        ["table", "mcan-pa-table5-ablation", "--scale", "synthetic"],
        ["table", "mcan-pa-table5-ablation", "--scale", "synthetic", "-v"],
    ],
)
def test_the_first_commands_load_no_pandas_torch_or_scipy(args):
    heavy, output = loaded(args)
    assert heavy == [], output


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
