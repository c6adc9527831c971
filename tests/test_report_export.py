"""Exports through pandas: md, csv, latex (multi-level headers, best in bold), html, json; -o by suffix."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from repro import results
from repro.cli import app
from repro.report import build_view, render_html, render_latex
from repro.report.view import column_digits, fmt_reported, fmt_reproduced
from repro.specs import resolve
from tests.conftest import SPEC_TEXT, write_spec


def _invoke(*args: str):
    return CliRunner().invoke(app, ["table", *args], env={"COLUMNS": "80"})


def _latex_number(text: str) -> str:
    return text.replace("±", r"$\pm$").replace("-", "$-$")


def test_latex_of_table5_shows_every_number_in_full():
    out = _invoke("table5-ablation", "--scale", "synthetic", "--format", "latex")
    assert out.exit_code == 0, out.output
    latex = out.output
    view = build_view(resolve("table5-ablation"), "synthetic")
    for row in view.rows:
        line = next(line for line in latex.splitlines() if line.startswith(row.label + " & "))
        for col in view.columns:
            cell = row.cells[col]
            assert _latex_number(fmt_reported(cell, column_digits(view, col))) in line
            assert _latex_number(fmt_reproduced(cell, column_digits(view, col))) in line
            if row is not view.baseline:
                assert _latex_number(f"{view.effect(row, col, True):+.2f}") in line
    assert r"\multicolumn{4}{c}{Y/N}" in latex and r"\toprule" in latex and "…" not in latex


def test_latex_bolds_the_best_value_respecting_better(sandbox):
    write_spec(sandbox, SPEC_TEXT.replace("key: number, better: higher", "key: number, better: lower"))
    spec = resolve("t1-demo")
    latex = render_latex(build_view(spec))
    # Num is lower-is-better: Cited's 50.00 is the best; All is higher-is-better: Ours*'s 71.05
    assert r"Cited [7] & \textbf{50.00} & -- & -- & 70.00 &" in latex
    assert r"Ours* & 54.86 & -- & -- & \textbf{71.05?}" in latex


def test_latex_groups_columns_by_dataset():
    latex = render_latex(build_view(resolve("ace-rpe-table1-pe")))
    assert r"\multicolumn{18}{c}{flickr30k}" in latex and r"\multicolumn{18}{c}{coco-retrieval}" in latex
    assert r"\multicolumn{3}{c}{Flickr30K TR R@1}" in latex


def test_html_has_every_number_and_bold_best(demo_spec):
    spec = resolve("t1-demo")
    results.write_result(
        results.Result(
            spec="t1-demo",
            paper="mcan-pa",
            row="Ours*",
            scale="paper",
            split="test-dev",
            metrics={"Num": 55.36, "All": 70.55},
            seeds=[0],
        ),
        spec,
    )
    page = render_html(build_view(spec))
    assert page.startswith("<!DOCTYPE html>") and "font-weight: bold" in page
    for number in ("54.86", "55.36", "+0.50", "71.05?", "70.55", "-0.50", "50.00", "70.00"):
        assert f">{number}<" in page


@pytest.mark.parametrize(
    "suffix, check",
    [
        (".md", lambda text: text.startswith("**mcan-pa Table V")),
        (".csv", lambda text: next(csv.DictReader(io.StringIO(text)))["row"] == "MCAN"),
        (".tex", lambda text: text.startswith(r"\begin{table}")),
        (".html", lambda text: text.startswith("<!DOCTYPE html>")),
        (".json", lambda text: json.loads(text)["id"] == "mcan-pa-table5-ablation"),
        (".txt", lambda text: text.startswith("mcan-pa Table V") and "┃" not in text),
    ],
)
def test_output_file_takes_its_format_from_the_suffix(tmp_path, suffix, check):
    target = tmp_path / f"table{suffix}"
    out = _invoke("table5-ablation", "--scale", "synthetic", "-o", str(target))
    assert out.exit_code == 0, out.output
    assert check(target.read_text(encoding="utf-8"))
    assert [p.name for p in tmp_path.iterdir()] == [target.name], "temporary file left behind"
    assert f"wrote {target}" in out.stderr


def test_output_file_errors(tmp_path):
    out = _invoke("table5-ablation", "-o", str(tmp_path / "table.xlsx"))
    assert out.exit_code == 2 and "cannot tell the format" in out.output
    out = _invoke("table5-ablation", "-o", str(tmp_path / "table.md"), "--format", "csv")
    assert out.exit_code == 2 and "names a md file but --format is csv" in out.output
    assert list(tmp_path.iterdir()) == []


SEEDS = len(resolve("table5-ablation").scales["synthetic"]["seeds"])  # the committed synthetic run's


def test_json_keeps_its_keys_and_adds_some():
    data = json.loads(_invoke("table5-ablation", "--scale", "synthetic", "--format", "json").output)
    assert {"id", "paper", "table", "title", "split", "scale", "columns", "rows", "other_scales", "claims"} <= set(data)
    row = data["rows"][0]
    assert {
        "name",
        "cited",
        "reference",
        "runnable",
        "reported",
        "uncertain",
        "reproduced",
        "std",
        "delta",
        "scale",
    } <= set(row)
    assert row["n"] == SEEDS and row["reproduced_split"] == "val" and data["baseline"] == "MCAN"


def test_csv_is_long_form_with_seeds_and_effects():
    rows = list(csv.DictReader(io.StringIO(_invoke("table5-ablation", "--scale", "synthetic", "-f", "csv").output)))
    assert len(rows) == 10 * 4
    pe = next(r for r in rows if r["row"] == "MCAN+PE" and r["column"] == "All")
    assert pe["n"] == str(SEEDS) and pe["split"] == "val" and pe["baseline"] == "MCAN"
    assert float(pe["effect_paper"]) == pytest.approx(69.60 - 70.63)
