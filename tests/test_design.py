"""A spec's design block (repro.design): validated with file:line, hashed into every record, honoured by `repro
table` (its seeds, its looks) and `repro check` (a changed design voids its records); its error rate simulated."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from benchmarks.claims_simulation import family_wise_error, records, table_spec
from repro import results, specs
from repro.cli import app
from repro.errors import ReproError
from repro.report.claims import judge_table
from tests.conftest import SPEC_TEXT, write_spec
from tests.test_report_claims import CLAIMS, DESIGN, _record

# --- the block ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("  alpha: 0.05\n", "  alpha: 0.7\n", "design.alpha must be between 0 and 0.5"),
        ("  test: welch\n", "  test: mann-whitney\n", "design.test must be one of welch"),
        ('source: reason, why: "one accuracy point"}\n    All', "source: guess}\n    All", "source must be one of"),
        ('why: "one accuracy point"}\n    All', 'why: ""}\n    All', "source 'reason' needs the reason"),
        ("    Num: {value: 1.0", "    Nmu: {value: 1.0", "design.delta names unknown column 'Nmu'"),
        ("{synthetic: [0, 1, 2, 3, 4, 5]}", "{synthetic: [0, 1, 1]}", "each seed once"),
        ("{synthetic: [0, 1, 2, 3, 4, 5]}", "{synthetc: [0, 1]}", "unknown scale 'synthetc'"),
        ('  fixed: "2026-11-28"\n', '  fixed: "soon"\n', "design.fixed must be a date"),
        ("  test: welch\n", "  test: welch\n  seed: 3\n", "unknown design key 'seed'"),
        (
            "{synthetic: [0, 1, 2, 3, 4, 5]}",
            "{synthetic: [0, 1, 2, 3, 4, 5]}\n  looks: {synthetic: {at: [2, 4]}}",
            "the last look must be at all 6 seeds",
        ),
    ],
)
def test_a_bad_design_is_refused_naming_its_line(sandbox, old, new, words):
    text = SPEC_TEXT + CLAIMS + DESIGN
    assert old in text
    path = write_spec(sandbox, text.replace(old, new))
    with pytest.raises(ReproError, match=words) as caught:
        specs.resolve("t1-demo")
    line = int(str(caught.value).split(f"{path}:")[1].split(":")[0])
    assert line > SPEC_TEXT.count("\n")  # inside the design block, not the top of the file


def test_every_committed_spec_with_claims_has_a_design_with_a_delta_for_each_claim_column():
    for spec in specs.load_all():
        if not spec.claims:
            continue
        assert spec.design is not None, spec.id
        assert spec.design.seeds.get("synthetic"), spec.id
        for claim in spec.claims:
            assert claim.column in spec.design.delta or claim.margin is not None, (spec.id, claim.column)


def test_the_hash_moves_with_delta_alpha_seeds_test_looks_and_the_claims_but_not_with_notes(sandbox):
    base = SPEC_TEXT + CLAIMS + DESIGN
    write_spec(sandbox, base)
    digest = specs.resolve("t1-demo").design_hash("synthetic")
    changes = [
        (
            'value: 1.0, source: reason, why: "one accuracy point"}\n    All',
            'value: 0.5, source: reason, why: "x"}\n    All',
        ),
        ("alpha: 0.05", "alpha: 0.01"),
        ("[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 3, 4, 5, 6]"),
        ("column: Num}", "column: All}"),
        ("[0, 1, 2, 3, 4, 5]}", "[0, 1, 2, 3, 4, 5]}\n  looks: {synthetic: {at: [3, 6]}}"),
    ]
    for old, new in changes:
        write_spec(sandbox, base.replace(old, new))
        assert specs.resolve("t1-demo").design_hash("synthetic") != digest, old
    write_spec(sandbox, base.replace("  test: welch\n", "  test: welch\n  note: a remark\n"))
    assert specs.resolve("t1-demo").design_hash("synthetic") == digest
    assert specs.resolve("t1-demo").design_hash("paper") == ""  # no design seeds at paper scale here


# --- records bound to it ---------------------------------------------------------------------------------------


def test_changing_delta_after_the_runs_makes_check_fail_naming_the_records(sandbox, runner):
    write_spec(sandbox, SPEC_TEXT + CLAIMS + DESIGN)
    spec = specs.resolve("t1-demo")
    _record(spec, "Ours*", [60.0, 62.0, 64.0, 61.0, 63.0, 59.0])
    _record(spec, "Cited", [57.0, 58.5, 56.0, 59.0, 58.0, 57.5])
    out = runner.invoke(app, ["check", "--scale", "synthetic"])
    assert out.exit_code == 0, out.output
    write_spec(sandbox, (SPEC_TEXT + CLAIMS + DESIGN).replace("Num: {value: 1.0", "Num: {value: 0.5"))
    out = runner.invoke(app, ["check", "--scale", "synthetic", "-v"])
    assert out.exit_code == 1, out.output
    assert "Ours-star.synthetic.json" in out.output and "Cited.synthetic.json" in out.output
    assert "ran under design" in out.output and "voids them" in out.output
    claim = json.loads(runner.invoke(app, ["table", "t1-demo", "--scale", "synthetic", "--format", "json"]).output)
    assert "another design" in claim["claims"][0]["verdict"]


def test_a_unit_run_under_a_design_carries_its_hash(toy_family, runner):
    path = toy_family / "experiments" / "toy" / "toy-table1.yaml"
    path.write_text(
        path.read_text()
        + 'design:\n  fixed: "2026-11-28"\n  alpha: 0.05\n  test: welch\n'
        + "  delta: {Acc: {value: 1, source: reason, why: one point}}\n  seeds: {smoke: [0, 1]}\n"
    )
    specs.clear_cache()
    out = runner.invoke(app, ["run", "toy-table1", "--scale", "smoke", "--seeds", "0,1"])
    assert out.exit_code == 0, out.output
    spec = specs.resolve("toy-table1")
    digest = spec.design_hash("smoke")
    seeds = results.read_seed_results(spec, spec.row("Sighted"), "smoke")
    assert {s.design_hash for s in seeds.values()} == {digest}
    record = results.read_results(spec)[("Sighted", "smoke")]
    assert record.design_hashes == [digest, digest]
    data = json.loads(runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "--format", "json"]).output)
    assert data["claims"][0]["design_hash"] == digest and data["claims"][0]["seeds_used"]["Sighted"] == [0, 1]


# --- looks of a sequential design ------------------------------------------------------------------------------

SEQUENTIAL = DESIGN.replace(
    "  seeds: {synthetic: [0, 1, 2, 3, 4, 5]}\n",
    "  seeds: {synthetic: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n  looks: {synthetic: {at: [6, 10], spending: pocock}}\n",
)


def test_a_look_is_read_only_at_its_seed_count(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS + SEQUENTIAL)
    spec = specs.resolve("t1-demo")
    ours = [60.0, 62.0, 64.0, 61.0, 63.0, 62.5, 61.5]
    cited = [55.0, 56.0, 57.0, 55.5, 56.5, 56.2, 55.8]
    _record(spec, "Ours*", ours)  # 7 seeds: past the first look (6), short of the second (10)
    _record(spec, "Cited", cited)
    from repro.report import build_view

    claim = build_view(spec, "synthetic").claims[0]
    assert claim.look == 1 and claim.n == (6, 6) and claim.seeds_used["Ours*"] == [0, 1, 2, 3, 4, 5]
    pocock_first = 0.05 * math.log(1 + (math.e - 1) * 0.6)
    assert claim.level == pytest.approx(pocock_first)
    assert claim.kind == "holds"  # floored at 2/924, after Holm over 2: 0.0043 < 0.035


def test_a_claim_decided_at_the_first_look_keeps_its_verdict(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS + SEQUENTIAL)
    spec = specs.resolve("t1-demo")
    # the first five seeds far apart; the last five would pull the means together
    ours = [60.0, 62.0, 64.0, 61.0, 63.0, 62.0, 50.0, 51.0, 52.0, 50.5]
    cited = [55.0, 56.0, 57.0, 55.5, 56.5, 56.0, 66.0, 67.0, 65.0, 66.5]
    _record(spec, "Ours*", ours)
    _record(spec, "Cited", cited)
    view = judge_table(spec, {r: results.read_results(spec)[(r, "synthetic")] for r in ("Ours*", "Cited")})
    claim = view.claims[0]
    assert claim.kind == "holds" and claim.look == 1
    assert statistics.fmean(ours) < statistics.fmean(cited)  # all ten seeds alone would not say holds


def test_a_claim_undecided_before_the_last_look_says_so(sandbox):
    write_spec(sandbox, SPEC_TEXT + CLAIMS + SEQUENTIAL)
    spec = specs.resolve("t1-demo")
    _record(spec, "Ours*", [60.0, 63.0, 58.0, 61.0, 64.0, 59.0, 62.0])  # 7 seeds: the first look (6) only
    _record(spec, "Cited", [59.0, 62.0, 60.0, 58.5, 61.0, 60.5, 59.5])
    view = judge_table(spec, {r: results.read_results(spec)[(r, "synthetic")] for r in ("Ours*", "Cited")})
    claim = view.claims[0]
    assert claim.kind == "underpowered" and claim.look == 1 and claim.looks == 2
    assert claim.verdict.startswith("underpowered at look 1 of 2 (")
    _record(spec, "Ours*", [60.0, 63.0, 58.0, 61.0, 64.0, 59.0, 62.0, 60.5, 61.5, 59.5])  # all ten: the last look
    _record(spec, "Cited", [59.0, 62.0, 60.0, 58.5, 61.0, 60.5, 59.5, 60.0, 61.0, 59.0])
    view = judge_table(spec, {r: results.read_results(spec)[(r, "synthetic")] for r in ("Ours*", "Cited")})
    claim = view.claims[0]
    assert claim.kind == "underpowered" and claim.look == 2
    assert claim.verdict.startswith("underpowered (")


def test_a_planted_stopping_rule_keeps_the_error_rate():
    """The rule "stop at the first look that decides, else add seeds to the next", under no effect: the looks'
    alpha spending keeps the share of tables with a wrong verdict at α (within 3 Monte-Carlo standard errors)."""
    spec = table_spec(rows=2, seeds=10, looks=[5, 10], spending="pocock")
    levels = spec.design.looks["synthetic"].levels(0.05)
    assert sum(levels) == pytest.approx(0.05) and levels[0] < 0.05
    rate = family_wise_error(spec, 600, effect=0.0, seed=3)
    assert rate.rate <= 0.05 + 3 * rate.standard_error, rate.rate


# --- the family-wise error, simulated ---------------------------------------------------------------------------


@pytest.mark.slow
def test_null_tables_keep_the_family_wise_error_at_alpha():
    """1,000 tables of 6 claims, no true effect: the share with any holds or reversed is at most α plus 3
    Monte-Carlo standard errors (two Holm families, one per direction, gave about 2α)."""
    rate = family_wise_error(table_spec(rows=4, seeds=6), 1000, effect=0.0, seed=11)
    assert rate.rate <= 0.05 + 3 * rate.standard_error, rate.rate


@pytest.mark.slow
def test_tables_at_the_margin_keep_wrong_equivalences_at_alpha():
    """Every true effect exactly δ: an "equivalent" (or "reversed") verdict is wrong; at most α of tables have one."""
    rate = family_wise_error(table_spec(rows=4, seeds=6), 600, effect=1.0, sd=0.5, seed=12)
    assert rate.rate <= 0.05 + 3 * rate.standard_error, rate.rate


def test_records_helper_makes_design_records():
    spec = table_spec(rows=2, seeds=3)
    made = records(spec, {"R0": [1.0, 2.0, 3.0], "R1": [2.0, 3.0, 4.0]})
    assert made["R0"].design_hashes == [spec.design_hash("synthetic")] * 3


# --- controls ----------------------------------------------------------------------------------------------------

CONTROL = """id: t1-control
paper: mcan-pa
table: Control
title: PA on a task built to need it
datasets: [vqa2]
split: val
columns:
  - {name: Pos, metric: vqa, key: overall, better: higher}
rows:
  - {name: Blind, model: {arch: mcan}, reported: {Pos: 50.0}}
  - {name: Sighted, model: {arch: mcan}, reported: {Pos: 60.0}}
claims:
  - {text: "sighted beats blind", row: Sighted, over: Blind, column: Pos}
design:
  fixed: "2026-11-28"
  alpha: 0.05
  test: welch
  delta: {Pos: {value: 1.0, source: reason, why: one point}}
  seeds: {synthetic: [0, 1, 2, 3, 4, 5]}
"""


def _control_record(spec, row, values):
    digest = spec.design_hash("synthetic")
    results.write_result(
        results.Result(
            spec=spec.id,
            paper=spec.paper,
            row=row,
            scale="synthetic",
            split="val",
            metrics={"Pos": statistics.fmean(values)},
            std={"Pos": statistics.stdev(values)},
            seeds=list(range(len(values))),
            extra={"per_seed": [{"Pos": v} for v in values]},
            design_hashes=[digest] * len(values),
        ),
        spec,
    )


@pytest.mark.parametrize(
    "sighted, status",
    [
        ([70.0, 71.0, 72.0, 70.5, 71.5, 70.8], "passed"),
        ([50.1, 49.0, 51.0, 50.5, 49.5, 50.2], "failed"),
        (None, "not run"),
    ],
)
def test_a_claim_is_informative_only_when_its_control_passed(sandbox, runner, sighted, status):
    write_spec(sandbox, CONTROL, ident="t1-control")
    write_spec(sandbox, SPEC_TEXT + CLAIMS.replace("column: Num}", "column: Num, control: t1-control}") + DESIGN)
    spec, control = specs.resolve("t1-demo"), specs.resolve("t1-control")
    _record(spec, "Ours*", [60.0, 62.0, 64.0, 61.0, 63.0, 59.0])
    _record(spec, "Cited", [57.0, 58.5, 56.0, 59.0, 58.0, 57.5])
    if sighted is not None:
        _control_record(control, "Sighted", sighted)
        _control_record(control, "Blind", [50.0, 49.5, 50.5, 50.2, 49.8, 50.1])
    data = json.loads(runner.invoke(app, ["table", "t1-demo", "--scale", "synthetic", "--format", "json"]).output)
    claim = data["claims"][0]
    assert claim["control"] == status and claim["control_spec"] == "t1-control"
    if status == "passed":
        assert claim["verdict"] == "holds"
    else:
        assert (
            claim["verdict"] == f"uninformative (control {'failed' if status == 'failed' else 'not run'}: t1-control)"
        )
        assert claim["p_adjusted"] is not None  # the statistics are still there: the control decides what they mean
