"""The paper-scale plan readable at 80 columns and in pipes: one line per row, statuses pointing at the numbered
`data:` lines, every missing command whole, the memory estimate per row."""

from __future__ import annotations

import re

import pytest

from repro.cli import app
from repro.run import need_commands
from tests.test_plan_truth import empty_data  # noqa: F401  (the fixture)


def _plan(runner, spec_id: str, width: int = 80) -> str:
    out = runner.invoke(app, ["run", spec_id, "--dry-run"], env={"COLUMNS": str(width)})
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.slow
def test_table5_fits_80_columns_and_names_every_missing_command_whole(runner, empty_data):  # noqa: F811
    from repro.paths import REPO_DIR
    from repro.run import make_plan
    from repro.specs import resolve

    output = _plan(runner, "mcan-pa-table5-ablation")
    lines = output.splitlines()
    assert len(lines) <= 45, output
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith(("note", "GiB/GPU", "data:")))]
    assert all(len(line) <= 80 for line in table), table
    plan = make_plan(resolve("mcan-pa-table5-ablation", REPO_DIR / "experiments"), "paper")
    for step in plan.steps:
        for command in step.missing:
            assert f"`{command}`" in output, command  # on one line, never split
    data = {int(m[1]): m[2] for m in re.finditer(r"^data: (\d+)\. (.*)$", output, re.M)}
    statuses = re.findall(r"missing: data ([0-9]+(?:[–,] ?[0-9]+)*)", output)
    assert len(statuses) == len(plan.steps)
    for status in statuses:
        for part in status.split(", "):
            first, _, last = part.partition("–")
            assert all(n in data and data[n].endswith("missing") for n in range(int(first), int(last or first) + 1))
    prose = " ".join(output.split())
    assert "GiB/GPU: an estimate" in prose and "CUDA context" in prose


def test_status_points_at_the_lines_that_list_its_commands(empty_data):  # noqa: F811
    from repro.paths import REPO_DIR
    from repro.report.plan import data_numbers, status
    from repro.run import make_plan
    from repro.specs import resolve

    plan = make_plan(resolve("dsganet-table7-ablation", REPO_DIR / "experiments"), "paper")
    for step in plan.steps:
        if not step.missing:
            continue
        numbers = data_numbers(step, plan)
        listed = {c for n in numbers for c in need_commands(plan.needs[n - 1])}
        assert set(step.missing) <= listed
        assert status(step, "paper", plan).startswith("[red]missing:[/] data ")
    grids = [s for s in plan.steps if s.unsupported]
    output = "\n".join(plan.data)
    assert grids and "repro prepare depth" in output


@pytest.mark.slow
def test_unsupported_rows_point_at_a_note_and_staged_rows_have_their_estimates(runner, empty_data):  # noqa: F811
    output = _plan(runner, "dsganet-table7-ablation")
    assert "unsupported: note 1" in output and "note 1: unsupported at scale paper: grid features" in output
    output = _plan(runner, "ace-rpe-table1-pe")  # no recipe of its own: its pre-training's memory, fp32 hours
    assert re.search(r"^None +0 +3286\.0 +4\d\.\d +missing: data 1–5$", output, re.M), output
    assert "GiB/GPU ?" not in output


def test_each_rows_model_as_its_settings():
    from repro.paths import REPO_DIR
    from repro.report.plan import compact_what
    from repro.run import make_plan
    from repro.specs import resolve

    plan = make_plan(resolve("mcan-pa-table5-ablation", REPO_DIR / "experiments"), "paper", ["MCAN", "MCAN+PA (ours)"])
    assert [compact_what(s, False) for s in plan.steps] == ["defaults", "positional=pwa,poa,pma fusion=eq8"]
    assert compact_what(plan.steps[0]) == "arch=mcan"
