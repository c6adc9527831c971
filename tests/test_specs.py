"""Spec loading: every committed spec validates; malformed specs give file:line; ids resolve."""

from __future__ import annotations

import json

import pytest

from repro import specs
from repro.cli import app
from repro.errors import ReproError
from repro.paths import REPO_DIR
from tests.conftest import SPEC_TEXT, write_spec


def test_every_committed_spec_loads():
    loaded = specs.load_all(REPO_DIR / "experiments")
    assert loaded, "no specs found"
    for spec in loaded:
        assert spec.rows and spec.columns
        for row in spec.rows:
            assert set(row.reported) <= {c.name for c in spec.columns}


EXPECTED_TABLES = {
    "mcan-pa": {"Table I", "Table II", "Table III", "Table IV", "Table V", "Table VI"},
    "sa-m4c": {"Table 1", "Table 2", "Table 3", "Section 6"},
    "psac": {f"Table {n}" for n in range(1, 7)},
    "dsganet": {"Table II", "Table III", "Table IV", "Table V", "Table VI", "Table VII", "Table VIII"},
    "ace-rpe": {f"Table {n}" for n in range(1, 10)},
}


def test_committed_specs_cover_every_paper_table():
    loaded = specs.load_all(REPO_DIR / "experiments")
    ids = [s.id for s in loaded]
    assert len(ids) == len(set(ids))
    tables = [s for s in loaded if not s.table.startswith("Control")]  # positive controls are no table of a paper
    assert len(tables) == 32
    found = {}
    for spec in tables:
        found.setdefault(spec.paper, set()).add(spec.table)
    assert found == EXPECTED_TABLES


def test_table5_ablation_matches_paper():
    spec = specs.resolve("table5-ablation", REPO_DIR / "experiments")
    assert spec.paper == "mcan-pa" and spec.table == "Table V" and spec.split == "test-dev"
    assert len(spec.rows) == 10 and len(spec.runnable_rows) == 10
    assert spec.row("MCAN").reported == {"Y/N": 86.82, "Num": 53.26, "Other": 60.72, "All": 70.63}
    assert spec.row("MCAN+PA (ours)").reported["All"] == 71.05
    assert spec.row("MCAN+PA*").model["fusion"] == "relation-network"


def test_demo_spec_parses(demo_spec):
    spec = specs.resolve("t1-demo")
    assert [c.name for c in spec.columns] == ["Num", "All"]
    cited, ours = spec.rows
    assert cited.cited == "[7]" and not cited.runnable
    assert ours.runnable and ours.uncertain == {"All": "PDF shows '71.0/'"}
    assert spec.tolerance_for("All", "paper") == 0.25
    assert spec.tolerance_for("Num", "paper") == 0.5
    assert spec.tolerance_for("Num", "smoke") == 0.1
    assert spec.tolerance_for("Num", "synthetic") == specs.DEFAULT_TOLERANCE["synthetic"]


@pytest.mark.parametrize(
    "old, new, line, message",
    [
        (
            "  - {name: All, metric: vqa, key: overall, better: higher}",
            "  - {name: All, metric: vqaa, key: overall, better: higher}",
            9,
            "unknown metric 'vqaa'",
        ),
        ("    reported: {Num: 54.86, All: 71.05}", "    reported: {Num: 54.86, Al: 71.05}", 16, "unknown column 'Al'"),
        ("    reported: {Num: 54.86, All: 71.05}", "    reported: {Num: '54.8x', All: 71.05}", 16, "must be a number"),
        ('    cited: "[7]"\n', "", 11, "needs one of: cited"),
        ("title: A demo table", "titel: A demo table", 4, "unknown spec key 'titel' (did you mean 'title'?)"),
        ("split: test-dev\n", "", 1, "missing required key 'split'"),
        ("tolerance: {default: 0.5, All: 0.25}", "tolerance: {default: -1}", 18, "non-negative"),
        ("  - name: Ours*", "  - name: Cited", 14, "clashes with row 'Cited'"),
        ("    uncertain: {All: \"PDF shows '71.0/'\"}", "    uncertain: {All: ''}", 17, "needs a note"),
        ("paper: mcan-pa", "paper: mcan", 2, "unknown paper 'mcan'"),
    ],
)
def test_malformed_spec_reports_file_and_line(sandbox, old, new, line, message):
    text = SPEC_TEXT.replace(old, new)
    assert text != SPEC_TEXT
    path = write_spec(sandbox, text)
    with pytest.raises(ReproError) as caught:
        specs.parse_spec(path)
    assert str(caught.value).startswith(f"{path}:{line}: "), str(caught.value)
    assert message in str(caught.value)


def test_invalid_yaml_reports_line(sandbox):
    path = write_spec(sandbox, SPEC_TEXT.replace("rows:", "rows: [\n"))
    with pytest.raises(ReproError, match=rf"{path}:\d+: invalid YAML"):
        specs.parse_spec(path)


def test_spec_in_wrong_folder_is_refused(sandbox):
    path = write_spec(sandbox, SPEC_TEXT, paper="psac")
    with pytest.raises(ReproError, match="must live at experiments/mcan-pa/t1-demo.yaml"):
        specs.parse_spec(path)


def test_malformed_spec_in_cli_is_one_line_exit_2(sandbox, runner):
    write_spec(sandbox, SPEC_TEXT.replace("metric: vqa, key: number", "metric: nope, key: number"))
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if "t1-demo.yaml" in line]
    assert len(lines) == 1 and "t1-demo.yaml:8: unknown metric 'nope'" in lines[0]


def test_resolve_accepts_paper_prefix_and_case(demo_spec):
    assert specs.resolve("mcan-pa/t1-demo").id == "t1-demo"
    assert specs.resolve("T1-Demo").id == "t1-demo"


def test_unknown_id_lists_close_matches(demo_spec, runner):
    with pytest.raises(ReproError, match="close matches: t1-demo"):
        specs.resolve("t1-dem")
    result = runner.invoke(app, ["show", "t1-dem"])
    assert result.exit_code == 2 and "t1-demo" in result.output and "Traceback" not in result.output


def test_row_slugs_are_file_names():
    assert specs.row_slug("MCAN+PA (ours)") == "MCAN+PA_ours"
    assert specs.row_slug("MCAN+PA*") == "MCAN+PA-star"
    assert specs.row_slug("VL-BERT†") == "VL-BERT-dagger"


def test_list_json_has_every_spec(demo_spec, runner):
    result = runner.invoke(app, ["list", "--format", "json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.output)
    assert entries == [
        {
            "id": "t1-demo",
            "aliases": [],
            "paper": "mcan-pa",
            "table": "Table IX",
            "title": "A demo table",
            "rows": 2,
            "runnable": 1,
            "implemented": 1,
            "with_results": 0,
            "scales": [],  # scales with results
            "runnable_scales": ["smoke", "paper"],
        }
    ]


def test_show_prints_rows_and_uncertainty(demo_spec, runner):
    result = runner.invoke(app, ["show", "t1-demo"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Ours*" in result.output and "71.05?" in result.output
    assert "uncertain Ours* / All: PDF shows '71.0/'" in result.output


def test_a_typo_in_a_shipped_specs_model_mapping_fails_list_with_file_and_line(sandbox, runner):
    text = (REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml").read_text()
    assert "positional: [pwa]}" in text
    write_spec(sandbox, text.replace("positional: [pwa]}", "positonal: [pwa]}", 1), ident="mcan-pa-table5-ablation")
    out = runner.invoke(app, ["list"])
    line = next(i for i, text_line in enumerate(text.splitlines(), 1) if "positional: [pwa]}" in text_line)
    assert out.exit_code == 2 and f"mcan-pa-table5-ablation.yaml:{line}:" in out.output
    assert "unknown model key 'positonal'" in out.output and "did you mean 'positional'" in out.output


def test_ids_before_the_one_scheme_keep_resolving():
    for old, new in (
        ("table5-ablation", "mcan-pa-table5-ablation"),
        ("sam4c-table1-textvqa", "sa-m4c-table1-textvqa"),
        ("acerpe-table1-pe", "ace-rpe-table1-pe"),
        ("mcan-pa/table5-ablation", "mcan-pa-table5-ablation"),
        ("psac-table2-sota", "psac-table2-sota"),
    ):
        assert specs.resolve(old, REPO_DIR / "experiments").id == new


def test_clear_cache_makes_the_next_resolve_read_the_files_again(demo_spec):
    assert specs.resolve("t1-demo").title == "A demo table"
    demo_spec.write_text(demo_spec.read_text().replace("title: A demo table", "title: Another title"))
    assert specs.resolve("t1-demo").title == "A demo table"  # read once per process
    specs.clear_cache()
    assert specs.resolve("t1-demo").title == "Another title"


def test_a_columns_direction_defaults_from_its_metric_and_better_is_still_accepted(sandbox, runner):
    text = SPEC_TEXT.replace("metric: vqa, key: number, better: higher}", "metric: mse, key: number}")
    write_spec(sandbox, text.replace("key: overall, better: higher}", "key: overall, better: none}"))
    spec = specs.resolve("t1-demo")
    assert [c.better for c in spec.columns] == ["lower", "none"]  # mse's own direction; the column's word
    shown = json.loads(runner.invoke(app, ["table", "t1-demo", "--format", "json"]).output)
    assert [c["better"] for c in shown["columns"]] == ["lower", "none"]


def test_a_new_metric_is_one_entry_of_the_metric_table(sandbox, monkeypatch):
    from repro import metrics

    write_spec(sandbox, SPEC_TEXT.replace("metric: vqa, key: number, better: higher}", "metric: bleu}"))
    with pytest.raises(ReproError, match="unknown metric 'bleu'"):
        specs.resolve("t1-demo")
    monkeypatch.setitem(metrics.METRICS, "bleu", metrics.Metric("higher", "repro.metrics.accuracy"))
    specs.clear_cache()
    assert specs.resolve("t1-demo").column("Num").better == "higher"
    assert "bleu" in metrics.REGISTRY and metrics.get("bleu").evaluate
