"""A newcomer's first hour, continued: exports say what their columns are and carry only what the terminal
shows; the markdown export through pandas."""

from __future__ import annotations

import csv
import io
import json

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
    assert "| MCAN+PA (ours) |" in md and "+6.56 ✓" in md  # text kept as text (no number parsing)
