"""`repro run ID --rows ROW --weights released --dry-run` for every row a released checkpoint fills: the plan
names each checkpoint and its download (the catalog's url, or the share link to put it in place by hand, then
`repro weights download NAME`), the GPU-hours of evaluation only, and the submit step; it writes nothing."""

from __future__ import annotations

import shutil

import pytest

from repro import families, specs
from repro.cli import app
from repro.paths import REPO_DIR
from repro.run import format_hours
from repro.weights import RELEASED, released_cells, with_weights_rows

CELLS = sorted({(spec, row) for r in RELEASED for spec, row, _ in r.cells})
SUBMIT = {
    "mcan-pa-table3-vqa2": "then: `repro submit` of each test-set file it writes to vqa2-test-dev",
    "sa-m4c-table1-textvqa": "then: `repro submit` of each test-set file it writes to textvqa-test",
    "ace-rpe-table3-sota": "then: nothing to submit: the test split is scored here",
    "ace-rpe-table4-sota": "then: `repro submit` of each test-set file it writes to vqa2-test-dev",
}


def test_every_cell_is_planned():
    assert CELLS == [
        ("ace-rpe-table3-sota", "ALBEF (14M)"),
        ("ace-rpe-table4-sota", "ALBEF (14M)"),
        ("mcan-pa-table3-vqa2", "MCAN"),
        ("sa-m4c-table1-textvqa", "12 SA-M4C (ours)"),
        ("sa-m4c-table1-textvqa", "4 M4C"),
    ]


@pytest.mark.parametrize(("spec_id", "row"), CELLS)
def test_released_dry_run_prints_downloads_evaluation_cost_and_submit_step(sandbox, runner, spec_id, row):
    paper = spec_id.split("-table")[0]
    folder = sandbox / "experiments" / paper
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / paper / f"{spec_id}.yaml", folder)
    specs.clear_cache()
    out = runner.invoke(
        app, ["run", spec_id, "--rows", row, "--weights", "released", "--dry-run"], env={"COLUMNS": "500"}
    )
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    for released, part in released_cells(spec_id, row):
        entry, f = released.catalog()
        columns = f" for the {part} columns" if part else ""
        assert f"{row}: weights released {released.name}{columns}:" in text
        if f.urls:
            assert f"download: `repro weights download {released.name}` ({f.urls[0]}," in text
        else:  # share links only: where to put it, then the same command verifies it
            assert f"put {f.name} in {sandbox / 'data' / released.dataset} by hand" in text
            assert f"then `repro weights download {released.name}` verifies it" in text
    cited = with_weights_rows(specs.resolve(spec_id), [row], "released").row(row)
    hours = families.for_row(cited).evaluation_hours(cited.config, specs.resolve(spec_id))
    assert hours is not None and hours > 0
    assert f"{row}: no training; evaluation ~{format_hours(hours)} GPU-hours" in text
    assert "records go to results/weights/released/" in text
    assert SUBMIT[spec_id] in text
    assert not list((sandbox / "results").rglob("*")) and not list((sandbox / "data").rglob("*.pth"))
