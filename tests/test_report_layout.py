"""Terminal tables never cut a number or a row name: blocks of columns, plain text in pipes, --columns."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from repro.cli import app
from repro.report import build_view
from repro.report.numbers import fmt
from repro.report.view import column_digits, fmt_reported, fmt_reproduced, sign_mark
from repro.specs import resolve

BOX = set("┃│┏┗┡━┳╇┩└┘┴┬")


def _table(*args: str, columns: int = 80) -> str:
    out = CliRunner().invoke(app, ["table", *args], env={"COLUMNS": str(columns)})
    assert out.exit_code == 0, out.output
    return out.output


def _cells_by_row(output: str, labels: list[str]) -> dict[str, list[str]]:
    """Every cell printed on a row's lines, across all blocks (plain text: 2+ spaces; rich: │)."""
    found: dict[str, list[str]] = {label: [] for label in labels}
    for line in output.splitlines():
        cells = [c.strip() for c in (line.split("│") if "│" in line else re.split(r" {2,}", line))]
        cells = [c for c in cells if c]
        if cells and cells[0] in found:
            found[cells[0]] += cells[1:]
    return found


def _expected_synthetic(view) -> dict[str, list[str]]:
    expected = {}
    for row in view.rows:
        cells = []
        for col in view.columns:
            digits = column_digits(view, col)
            cell = row.cells[col]
            cells += [fmt_reported(cell, digits), fmt_reproduced(cell, digits)]
            if row is not view.baseline:
                paper, ours = view.effect(row, col, False), view.effect(row, col, True)
                mark = sign_mark(paper, ours)
                cells += [f"{paper:+.2f}", f"{ours:+.2f}" + (f" {mark}" if mark else "")]
        expected[row.label] = cells
    return expected


@pytest.mark.parametrize("fmt_args", [[], ["--format", "text"], ["--format", "rich"]])
def test_table5_at_80_columns_shows_every_number_in_full(fmt_args):
    view = build_view(resolve("table5-ablation"), "synthetic")
    assert all(r.result is not None for r in view.rows), "the checkout's synthetic records are missing"
    output = _table("table5-ablation", "--scale", "synthetic", "-v", *fmt_args)  # -v: the paper's Δ too
    assert "…" not in output
    assert max(len(line) for line in output.splitlines()) <= 80
    if fmt_args != ["--format", "rich"]:  # CliRunner's stdout is not a terminal: plain text by default
        assert not BOX & set(output)
    printed = _cells_by_row(output, [r.label for r in view.rows])
    for label, cells in _expected_synthetic(view).items():
        missing = [c for c in cells if c not in printed[label]]
        assert not missing, (label, missing)
        assert printed[label].count("base") == (4 * 2 if label == view.baseline.label else 0)


def test_effects_against_the_baseline_replace_delta_to_the_paper():
    output = _table("table5-ablation", "--scale", "synthetic", "--columns", "All", "-v")
    header = next(line for line in output.splitlines() if line.startswith("Row"))
    assert re.split(r" {2,}", header.strip()) == ["Row", "reported", "synthetic", "Δ paper", "Δ synthetic"]
    assert "Δ = row − MCAN (the first runnable row)" in output
    view = build_view(resolve("table5-ablation"), "synthetic")
    pe = next(r for r in view.rows if r.name == "MCAN+PE")
    paper, ours = view.effect(pe, "All", False), view.effect(pe, "All", True)
    line = next(line for line in output.splitlines() if line.startswith("MCAN+PE "))
    assert line.split()[-2:] == [f"{ours:+.2f}", "✓" if (paper > 0) == (ours > 0) else "✗"]
    assert f"{paper:+.2f}" in line.split()


def test_paper_scale_keeps_the_delta_to_the_paper(demo_spec):
    output = _table("t1-demo")
    header = next(line for line in output.splitlines() if line.startswith("Row"))
    assert re.split(r" {2,}", header.strip()) == ["Row", "reported", "ours", "Δ", "reported", "ours", "Δ"]


def test_wide_spec_without_results_shows_every_reported_number():
    spec = resolve("acerpe-table1-pe")
    assert len(spec.columns) >= 10
    view = build_view(spec)
    for args in ([], ["--format", "rich"]):
        output = _table("acerpe-table1-pe", *args)
        assert "…" not in output
        assert max(len(line) for line in output.splitlines()) <= 80
        printed = _cells_by_row(output, [r.label for r in view.rows])
        for row in view.rows:
            for col in view.columns:
                if row.cells[col].reported is not None:
                    assert fmt_reported(row.cells[col], column_digits(view, col)) in printed[row.label], (row.name, col)
        for col in view.columns:  # every column name, possibly wrapped at spaces in rich headers
            assert all(word in output for word in col.split())


def test_columns_picks_columns_and_checks_them():
    output = _table("table5-ablation", "--scale", "synthetic", "--columns", "Num,All", columns=200)
    assert "Num ─" in output and "All ─" in output and "Y/N ─" not in output and "Other ─" not in output
    out = CliRunner().invoke(app, ["table", "table5-ablation", "--columns", "Nmu"])
    assert out.exit_code == 2 and "has no column 'Nmu'; did you mean 'Num'?" in out.output


def test_wide_terminal_puts_groups_side_by_side():
    output = _table("table5-ablation", "--scale", "synthetic", columns=250)
    group_lines = [line for line in output.splitlines() if "Y/N ─" in line]
    assert len(group_lines) == 1 and "All ─" in group_lines[0]


def test_narrow_terminal_never_cuts_a_row_name_or_number():
    output = _table("table5-ablation", "--scale", "synthetic", "--format", "rich", columns=40)
    assert "…" not in output
    view = build_view(resolve("table5-ablation"), "synthetic")
    for row in view.rows:
        assert row.label in output
    assert fmt(view.rows[0].cells["All"].reproduced) in output


def test_the_default_table_fits_80_columns_and_60_lines_and_v_shows_everything(runner):
    """`repro table mcan-pa-table5-ablation --scale synthetic` at 80 columns: two columns side by side, one line per
    claim, at most 60 lines none wider than 80; `-v` is the whole view (the paper's Δ, the claims' statistics and
    how they are judged), as a text file written with -o is."""
    from repro.cli import app
    from repro.report import build_view
    from repro.report.layout import claims_caption, render_plain
    from repro.specs import resolve

    words = ["table", "mcan-pa-table5-ablation", "--scale", "synthetic"]
    short = runner.invoke(app, words, env={"COLUMNS": "80"})
    assert short.exit_code == 0, short.output
    lines = short.output.splitlines()
    assert len(lines) <= 60 and max(len(line) for line in lines) <= 80, (len(lines), short.output)
    assert "Δ paper" not in short.output and claims_caption()[:40] not in " ".join(lines)
    full = runner.invoke(app, [*words, "-v"], env={"COLUMNS": "80"})
    view = build_view(resolve("mcan-pa-table5-ablation"), "synthetic")
    assert full.exit_code == 0 and full.output == render_plain(view, 80)
    assert "Δ paper" in full.output and len(full.output.splitlines()) > len(lines)


def test_a_table_judges_its_claims_once_whatever_it_prints(runner, monkeypatch):
    """The statistics are computed once per table: building the view judges them, every renderer reads the view."""
    from repro.cli import app
    from repro.report import claims, view

    calls = []
    real = claims.judge_table

    def counting(spec, *args, **kwargs):
        calls.append(spec.id)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(view, "judge_table", counting)
    for extra in ([], ["-v"], ["--format", "rich"], ["--format", "json"]):
        calls.clear()
        out = runner.invoke(app, ["table", "mcan-pa-table5-ablation", "--scale", "synthetic", *extra])
        assert out.exit_code == 0 and calls == ["mcan-pa-table5-ablation"], (extra, calls)
