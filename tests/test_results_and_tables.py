"""Result records (round trip, atomic writes, tolerant reads), table rendering, `repro check`."""

from __future__ import annotations

import csv
import io
import json
import os
import re

import pytest

from repro import results, utils
from repro.cli import app
from repro.report import build_view, render_csv, render_json, render_latex, render_markdown
from repro.specs import resolve


def _result(row: str, scale: str = "paper", **metrics) -> results.Result:
    return results.Result(
        spec="t1-demo",
        paper="mcan-pa",
        row=row,
        scale=scale,
        split="test-dev",
        metrics=metrics,
        seeds=[0],
        config_hash="abc",
        git_commit="deadbeef",
        hardware={"cpu_count": 2},
        wall_time_s=1.5,
        date="2026-11-21T00:00:00+00:00",
    )


def test_result_round_trip(demo_spec):
    spec = resolve("t1-demo")
    original = _result("Ours*", Num=55.0, All=71.1)
    path = results.write_result(original, spec)
    assert path.name == "Ours-star.json" and path.parent.name == "t1-demo"
    loaded = results.read_results(spec)
    assert loaded[("Ours*", "paper")] == original


def test_a_row_name_ending_in_a_dot_is_read_back_at_every_scale(sandbox):
    from tests.conftest import SPEC_TEXT, write_spec

    write_spec(sandbox, SPEC_TEXT.replace("name: Ours*", "name: Ours w/ Char."))
    spec = resolve("t1-demo")
    for scale in ("paper", "smoke"):
        path = results.write_result(_result("Ours w/ Char.", scale, Num=1.0, All=2.0), spec)
        assert path.name.startswith("Ours_w_Char.")
    assert set(results.read_results(spec)) == {("Ours w/ Char.", "paper"), ("Ours w/ Char.", "smoke")}


def test_scale_suffix_and_reference_kept(demo_spec):
    spec = resolve("t1-demo")
    first = results.write_result(_result("Ours*", "smoke", Num=10.0, All=20.0), spec)
    assert first.name == "Ours-star.smoke.json"
    results.write_result(_result("Ours*", "smoke", Num=11.0, All=21.0), spec)
    stored = results.read_results(spec, scale="smoke")[("Ours*", "smoke")]
    assert stored.metrics == {"Num": 11.0, "All": 21.0}
    assert stored.reference == {"Num": 10.0, "All": 20.0}
    results.write_result(_result("Ours*", "smoke", Num=12.0, All=22.0), spec, rebaseline=True)
    assert results.read_results(spec)[("Ours*", "smoke")].reference == {"Num": 12.0, "All": 22.0}


def _unit(config_hash: str, **metrics) -> results.SeedResult:
    return results.SeedResult(
        spec="t1-demo",
        paper="mcan-pa",
        row="Ours*",
        scale="smoke",
        seed=0,
        split="val",
        metrics=metrics,
        config_hash=config_hash,
    )


def test_a_seed_keeps_its_reference_only_while_its_configuration_is_the_same(demo_spec):
    spec = resolve("t1-demo")
    row = spec.row("Ours*")
    results.store_seed(spec, row, _unit("aaa", Num=10.0, All=20.0))
    _, same = results.store_seed(spec, row, _unit("aaa", Num=11.0, All=21.0))
    assert same.reference == {"Num": 10.0, "All": 20.0}  # a re-run of one configuration: the first run stays
    _, changed = results.store_seed(spec, row, _unit("bbb", Num=30.0, All=40.0))
    assert changed.reference == {"Num": 30.0, "All": 40.0}  # new settings: the old values measured another thing
    _, rerun = results.store_seed(spec, row, _unit("bbb", Num=31.0, All=41.0))
    assert rerun.reference == {"Num": 30.0, "All": 40.0}


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    utils.write_json_atomic(target, {"ok": 1})

    def boom(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        utils.write_json_atomic(target, {"ok": 2})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"], "temp file left behind"


def test_corrupt_result_is_warned_and_skipped(demo_spec, runner, sandbox):
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", Num=55.0, All=71.1), spec)
    bad = sandbox / "results" / "mcan-pa" / "t1-demo" / "Cited.json"
    bad.write_text("{not json")
    with pytest.warns(results.CorruptResult, match="Cited.json"):
        found = results.read_results(spec)
    assert list(found) == [("Ours*", "paper")]
    out = runner.invoke(app, ["table", "t1-demo", "--format", "json"])
    assert out.exit_code == 0
    assert "Cited.json" in out.stderr


def test_views_render_in_every_format(demo_spec):
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", Num=55.36, All=70.55), spec)
    view = build_view(spec)

    md = re.sub(r" +", " ", render_markdown(view))
    assert "| Ours* | 54.86 | 55.36 | +0.50 | 71.05? | 70.55 | -0.50 |" in md
    assert "| Cited [7] | 50.00 | – | – | 70.00 | – | – |" in md

    rows = list(csv.DictReader(io.StringIO(render_csv(view))))
    ours_all = next(r for r in rows if r["row"] == "Ours*" and r["column"] == "All")
    assert ours_all["reported"] == "71.05" and ours_all["uncertain"] == "yes"
    assert float(ours_all["delta"]) == pytest.approx(-0.5)

    latex = render_latex(view)
    assert r"\begin{tabular}{lrrrrrr}" in latex
    assert r"Ours* & \textbf{54.86} & 55.36 & +0.50 & \textbf{71.05?} & 70.55 & $-$0.50" in latex  # best reported

    data = json.loads(render_json(view))
    assert data["id"] == "t1-demo" and data["paper"] == "mcan-pa" and data["table"] == "Table IX"
    assert [c["name"] for c in data["columns"]] == ["Num", "All"]
    cited, ours = data["rows"]
    assert cited == {**cited, "name": "Cited", "cited": True, "reproduced": None}
    assert ours["reproduced"] == {"Num": 55.36, "All": 70.55} and ours["scale"] == "paper"
    assert ours["reported"] == {"Num": 54.86, "All": 71.05}


def test_table_command_formats(demo_spec, runner):
    for fmt in ("rich", "md", "csv", "latex", "json"):
        out = runner.invoke(app, ["table", "t1-demo", "--format", fmt], env={"COLUMNS": "200"})
        assert out.exit_code == 0, (fmt, out.output)
        assert "Ours" in out.output
    bad = runner.invoke(app, ["table", "t1-demo", "--format", "xml"])
    assert bad.exit_code == 2 and "Invalid value for '--format'" in bad.output and "'xml'" in bad.output


def test_table_never_mixes_scales(demo_spec, runner):
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", "smoke", Num=1.0, All=2.0), spec)
    paper = json.loads(runner.invoke(app, ["table", "t1-demo", "--format", "json"]).output)
    assert paper["rows"][1]["reproduced"] is None and paper["other_scales"] == ["smoke"]
    smoke = json.loads(runner.invoke(app, ["table", "t1-demo", "--format", "json", "--scale", "smoke"]).output)
    assert smoke["rows"][1]["reproduced"] == {"Num": 1.0, "All": 2.0} and smoke["scale"] == "smoke"


def test_check_passes_within_tolerance(demo_spec, runner):
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", Num=55.3, All=71.2), spec)  # within 0.5 and 0.25
    out = runner.invoke(app, ["check"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "all 2 stored values within tolerance" in out.output


def test_check_fails_outside_tolerance(demo_spec, runner):
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", Num=55.3, All=71.4), spec)  # All is 0.35 off, tolerance 0.25
    out = runner.invoke(app, ["check", "t1-demo"], env={"COLUMNS": "200"})
    assert out.exit_code == 1
    assert "REGRESSION" in out.output and "1 regression(s)" in out.output


def test_check_compares_other_scales_with_their_reference(demo_spec, runner):
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", "smoke", Num=10.0, All=20.0), spec)
    assert runner.invoke(app, ["check"]).exit_code == 0
    results.write_result(_result("Ours*", "smoke", Num=10.05, All=20.5), spec)  # All moved by 0.5 > 0.1
    out = runner.invoke(app, ["check"], env={"COLUMNS": "200"})
    assert out.exit_code == 1 and "reference" in out.output


def test_check_fails_on_unreadable_result(demo_spec, runner, sandbox):
    folder = sandbox / "results" / "mcan-pa" / "t1-demo"
    folder.mkdir(parents=True)
    (folder / "Ours-star.json").write_text(
        json.dumps({"spec": "t1-demo", "row": "Ours*", "scale": "paper", "metrics": {"All": "high"}})
    )
    out = runner.invoke(app, ["check"])
    assert out.exit_code == 1 and "unreadable" in out.output


def test_explained_deviation_is_checked_against_its_own_reference(sandbox, runner):
    from tests.conftest import SPEC_TEXT, write_spec

    write_spec(
        sandbox,
        SPEC_TEXT.replace(
            "    uncertain: {All: \"PDF shows '71.0/'\"}",
            '    uncertain: {All: "PDF shows \'71.0/\'"}\n    deviation: {Num: "the paper\'s own accounting gives 60"}',
        ),
    )
    spec = resolve("t1-demo")
    results.write_result(_result("Ours*", Num=60.0, All=71.1), spec)  # Num is 5 points off the paper
    out = runner.invoke(app, ["check", "-v"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "t1-demo · scale paper · expected = the reference its record carries" in out.output
    assert [line.split() for line in out.output.splitlines() if line.startswith("Ours*  Num")] == [
        ["Ours*", "Num", "60", "60", "+0", "±0.5", "ok"]
    ]
    results.write_result(_result("Ours*", Num=61.0, All=71.1), spec)  # moved from its reference
    assert runner.invoke(app, ["check"]).exit_code == 1
    md = render_markdown(build_view(spec))
    assert "61.00!" in md and "explained deviation" in md
    shown = runner.invoke(app, ["show", "t1-demo"], env={"COLUMNS": "200"})
    assert "deviation Ours* / Num: the paper's own accounting gives 60" in shown.output


def _claims_spec(sandbox, claim: str):
    from tests.conftest import SPEC_TEXT, write_spec

    return write_spec(sandbox, SPEC_TEXT + "claims:\n" + claim)


def test_claims_are_judged_under_the_design_over_its_seeds(sandbox):
    from tests.test_report_claims import DESIGN

    _claims_spec(sandbox, '  - {text: "ours beats cited on Num", row: Ours*, over: Cited, column: Num}\n' + DESIGN)
    spec = resolve("t1-demo")

    def judged(ours, cited, design=None):
        for row, values in (("Ours*", ours), ("Cited", cited)):
            r = _result(row, "synthetic", Num=sum(values) / len(values), All=1.0)
            r.seeds = list(range(len(values)))
            r.extra = {"per_seed": [{"Num": v, "All": 1.0} for v in values]}
            r.design_hashes = [spec.design_hash("synthetic") if design is None else design] * len(values)
            results.write_result(r, spec)
        return build_view(spec, "synthetic").claims[0]

    cited = [54.0, 55.0, 56.0, 54.5, 55.5, 55.2]
    claim = judged([59.0, 60.0, 61.0, 59.5, 60.5, 60.2], cited)
    assert claim.paper is True and claim.verdict == "holds" and claim.margin == pytest.approx(5.0)
    assert judged([55.0, 56.0, 57.0, 54.0, 56.5, 55.0], cited).verdict.startswith("underpowered (the smallest effect")
    assert judged([50.0, 51.0, 52.0, 50.5, 51.5, 51.2], cited).verdict == "reversed"
    assert judged([59.0, 60.0, 61.0, 59.5, 60.5, 60.2], cited, design="").verdict.startswith("not judged (pre-design")
    one = judged([60.0], cited)
    assert one.verdict == "not judged (1 of 6 design seeds run at the first look; the design names 6)"
    smoke = build_view(spec, "smoke").claims[0]
    assert smoke.verdict.startswith("not judged (the design names no seeds at scale smoke")
    md = re.sub(r" +", " ", render_markdown(build_view(spec, "synthetic")))
    assert "| ours beats cited on Num | yes | not judged (1 of 6 design seeds run" in md


def test_claim_naming_an_unknown_row_is_a_spec_error(sandbox):
    path = _claims_spec(sandbox, '  - {text: "x", row: Nope, over: Cited, column: Num}\n')
    from repro.errors import ReproError
    from repro.specs import parse_spec

    with pytest.raises(ReproError, match=r"t1-demo.yaml:2\d: claim names unknown row 'Nope'"):
        parse_spec(path)
