"""`key=value` overrides, `--limit` and spec files: checked before anything runs, stored in the record,
and kept apart from the committed results of the spec as written."""

from __future__ import annotations

import json

import pytest

from repro.cli import app
from repro.variants import Variant, parse_overrides
from tests.conftest import write_spec


def _run(runner, *args):
    return runner.invoke(
        app,
        ["run", "toy-table1", "--scale", "smoke", "--rows", "Sighted", "--seeds", "0", *args],
        env={"COLUMNS": "200"},
    )


def test_an_overridden_run_is_a_variant_kept_apart_and_its_record_holds_the_override(toy_family, runner):
    out = _run(runner, "recipe.epochs=2", "model.hidden=8")
    assert out.exit_code == 0, out.output
    committed = toy_family / "results" / "toy" / "toy-table1"
    assert not committed.exists()  # nothing written where the spec's own results live
    folder = toy_family / "results" / "variants" / "model.hidden=8,recipe.epochs=2" / "toy" / "toy-table1"
    unit = json.loads((folder / "seeds" / "Sighted.smoke.seed0.json").read_text())
    assert unit["config"]["recipe"]["epochs"] == 2 and unit["config"]["model"]["hidden"] == 8
    assert unit["variant"]["overrides"] == {"model.hidden": 8, "recipe.epochs": 2}
    assert json.loads((folder / "Sighted.smoke.json").read_text())["variant"]["overrides"]["recipe.epochs"] == 2
    assert "done [1/1] Sighted s0" in out.output and "Sighted.smoke.seed0.json" in out.output
    assert "repro table toy-table1 recipe.epochs=2 model.hidden=8 --scale smoke" in out.output

    plain = _run(runner)  # the spec as written: no clash with the variant's seed 0, another hash
    assert plain.exit_code == 0, plain.output
    mine = json.loads((committed / "seeds" / "Sighted.smoke.seed0.json").read_text())
    assert mine["variant"] is None and mine["config_hash"] != unit["config_hash"]

    shown = runner.invoke(
        app, ["table", "toy-table1", "recipe.epochs=2", "model.hidden=8", "--scale", "smoke", "-f", "json"]
    )
    view = json.loads(shown.output)
    assert view["variant"]["overrides"] == {"model.hidden": 8, "recipe.epochs": 2}
    text = runner.invoke(app, ["table", "toy-table1", "recipe.epochs=2", "model.hidden=8", "--scale", "smoke"])
    assert "VARIANT, not the spec as written: model.hidden=8, recipe.epochs=2" in " ".join(text.output.split())
    assert (
        json.loads(runner.invoke(app, ["table", "toy-table1", "--scale", "smoke", "-f", "json"]).output)["variant"]
        is None
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("recipe.epochz=2", "unknown recipe field 'epochz'"),
        ("recipe.epochs=two", "expected an integer, got text two"),
        ("recipe.epochs=0", "epochs: must be at least 1"),
        ("recipe.seed=3", "use --seeds"),
        ("recipe.schedule.base_lrr=1", "has no 'base_lrr'"),
        ("recipe.optimizer.name=lbfgs", "no optimizer 'lbfgs'; one of adam, adamax, adamw, sgd"),
        ("sizes.d_modle=32", "model size 'd_modle'"),
        ("sizes.d_model=33", "not divisible by heads"),
        ("model.positional=[pwx]", "row 'MCAN': positional.0"),
        ("generator.train_imagez=5", "unknown synthetic generator setting(s) train_imagez"),
        ("optimizer.lr=1", "override keys start with recipe., sizes., generator., model."),
        ("recipe.epochs", "an override is key=value"),
        ("recipe.epochs=[1", "not a YAML scalar or list"),
    ],
)
def test_a_bad_override_is_one_line_before_anything_runs(runner, override, message):
    out = runner.invoke(
        app, ["run", "table5-ablation", "--scale", "synthetic", "--rows", "MCAN", override, "--dry-run"]
    )
    assert out.exit_code == 2 and message in out.output, out.output
    assert "Traceback" not in out.output and len(out.output.strip().splitlines()) == 1


def test_values_are_yaml_and_exponents_are_numbers():
    assert dict(parse_overrides(["recipe.schedule.base_lr=1e-3", "model.positional=[pwa, poa]"])) == {
        "model.positional": ["pwa", "poa"],
        "recipe.schedule.base_lr": 0.001,
    }
    assert dict(parse_overrides(["recipe.precision=bf16", "recipe.grad_clip=null"])) == {
        "recipe.grad_clip": None,
        "recipe.precision": "bf16",
    }


def test_an_override_switches_the_optimiser_and_the_schedule_keeping_the_keys_they_share():
    from repro import specs
    from repro.variants import apply

    spec = specs.resolve("mcan-pa-table5-ablation")
    names = ["recipe.optimizer.name=sgd", "recipe.schedule.name=constant", "recipe.schedule.base_lr=0.5"]
    settings, _ = apply(spec, "paper", {}, list(spec.rows), parse_overrides(names))
    assert settings["recipe"] == {
        "optimizer": {"name": "sgd", "weight_decay": 0.0},  # Adam's betas and eps dropped, SGD has no momentum
        "schedule": {"name": "constant", "base_lr": 0.5},
    }


def test_variant_names_are_readable_and_safe():
    assert Variant(parse_overrides(["sizes.d_model=32", "recipe.epochs=2"])).name == "recipe.epochs=2,sizes.d_model=32"
    odd = Variant(parse_overrides(["model.positional=[pwa, poa]"]))
    assert (
        "/" not in odd.name
        and " " not in odd.name
        and odd.name != Variant(parse_overrides(["model.positional=[pwa]"])).name
    )
    assert Variant().empty and Variant().results_root() is None and Variant(limit=5).name == "limit=5"


def test_a_copied_spec_runs_as_a_variant_of_its_own(toy_family, runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, ["cp", "toy-table1", "my.yaml"])
    assert out.exit_code == 0 and (tmp_path / "my.yaml").read_text().startswith("id: toy-table1")
    again = runner.invoke(app, ["cp", "toy-table1", "my.yaml"])
    assert again.exit_code == 2 and "--force" in again.output
    (tmp_path / "my.yaml").write_text((tmp_path / "my.yaml").read_text().replace("seeds: [0]", "seeds: [3]"))
    ran = runner.invoke(app, ["run", "my.yaml", "--scale", "smoke", "--rows", "Sighted"])
    assert ran.exit_code == 0, ran.output
    assert not (toy_family / "results" / "toy").exists()
    (variant,) = (toy_family / "results" / "variants").iterdir()
    assert variant.name.startswith("my@")
    unit = json.loads((variant / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed3.json").read_text())
    assert unit["variant"]["spec_file"] == "my.yaml" and len(unit["variant"]["spec_sha256"]) == 64


def test_limit_is_for_paper_scale_and_families_that_take_it(toy_family, runner):
    smoke = _run(runner, "--limit", "5")
    assert smoke.exit_code == 2 and "--limit is for paper-scale data" in smoke.output
    paper = runner.invoke(app, ["run", "toy-table1", "--rows", "Sighted", "--limit", "5", "--dry-run"])
    assert paper.exit_code == 2 and "--limit is not supported" in paper.output


def test_a_limited_paper_run_is_a_partial_variant(runner):
    limited = runner.invoke(app, ["run", "table5-ablation", "--rows", "MCAN", "--limit", "100", "--dry-run"])
    assert limited.exit_code == 0 and "partial: first 100 questions" in limited.output
    assert "variants/limit=100" in limited.output


def test_overrides_reach_a_spec_given_its_own_settings(toy_family, runner):
    write_spec(
        toy_family,
        (toy_family / "experiments" / "toy" / "toy-table1.yaml")
        .read_text()
        .replace("smoke: {seeds: [0]}", "smoke: {seeds: [0], recipe: {epochs: 3}}"),
        paper="toy",
        ident="toy-table1",
    )
    assert _run(runner, "recipe.schedule.base_lr=0.01").exit_code == 0
    (variant,) = (toy_family / "results" / "variants").iterdir()
    unit = json.loads((variant / "toy" / "toy-table1" / "seeds" / "Sighted.smoke.seed0.json").read_text())
    assert unit["config"]["recipe"]["epochs"] == 3  # the spec's scale setting stays
    assert unit["config"]["recipe"]["schedule"] == {"name": "constant", "base_lr": 0.01}


def test_progress_is_read_from_each_units_log_whatever_process_trains_it(tmp_path):
    from rich.console import Console

    from repro.monitor import RunMonitor, Unit, describe, fraction, last_line

    unit = tmp_path / "seed0"
    unit.mkdir()
    assert last_line(unit) == {} and describe({}) == "starting"
    lines = [{"epoch": 1, "epochs": 2, "step": s, "steps": 10, "loss": 1.0 / s} for s in (1, 2, 3)]
    (unit / "train.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"epoch": 1, "st')
    line = last_line(unit)  # a line being written is skipped
    assert line["step"] == 3 and fraction(line) == pytest.approx(0.3) and describe(line).startswith("epoch 1/2")
    assert describe({**line, "step": 10}).endswith("evaluating")

    console = Console(record=True, width=200, force_terminal=False)
    units = {("MCAN", 0): Unit("MCAN s0", unit), ("MCAN", 1): Unit("MCAN s1", tmp_path / "seed1")}
    with RunMonitor(console, units, heartbeat_s=0) as monitor:
        monitor._refresh()
        assert "[0/2 units" in monitor.status_line() and "MCAN s0: epoch 1/2" in monitor.status_line()
        monitor.finished(("MCAN", 0), {"All": 51.345}, 61.2, tmp_path / "MCAN.seed0.json")
    text = console.export_text()
    assert "done [1/2] MCAN s0 in 61s: All 51.34" in text or "done [1/2] MCAN s0 in 61s: All 51.35" in text
    assert "MCAN.seed0.json" in text


@pytest.mark.parametrize(
    ("ident", "row", "good", "shown", "bad", "refused"),
    [  # the positive controls' variants: depth questions only (dsganet), spatial questions only (sa-m4c)
        ("dsganet-table7-ablation", "2", "generator.templates=[closest]", "templates=['closest']",
         "generator.templates=[closer]", "unknown template(s) closer"),
        ("sa-m4c-table2-ablations", "1 M4C†", "generator.control_share=0.0", "control_share=0.0",
         "generator.control_shares=0.0", "unknown synthetic generator setting(s) control_shares"),
    ],
)  # fmt: skip
def test_each_familys_generator_overrides_reach_its_generator(runner, ident, row, good, shown, bad, refused):
    words = ["run", ident, "--scale", "synthetic", "--dry-run", "--rows", row]
    out = runner.invoke(app, [*words, good], env={"COLUMNS": "250"})
    assert out.exit_code == 0 and shown in out.output, out.output
    out = runner.invoke(app, [*words, bad], env={"COLUMNS": "250"})
    assert out.exit_code == 2 and refused in out.output, out.output


def test_a_mapping_setting_of_the_generator_is_overridden_key_by_key(runner):
    """mcan-pa's question_weights: `generator.question_weights.is_on=2` changes that key of the spec's mapping (an
    unset mapping starts empty); a whole mapping on the command line, or a key of a setting that is not a mapping, is
    one line of refusal."""
    from repro import specs
    from repro.variants import apply

    spec = specs.resolve("mcan-pa-control-pa")
    settings = spec.scales["synthetic"]
    override = parse_overrides(["generator.question_weights.is_on=2"])
    out, _ = apply(spec, "synthetic", settings, list(spec.rows), override)
    assert out["generator"]["question_weights"] == {"is_on": 2, "count_near": 1, "extreme": 1}
    assert settings["generator"]["question_weights"]["is_on"] == 1  # the spec's own settings untouched
    table_v = specs.resolve("mcan-pa-table5-ablation")
    override = parse_overrides(["generator.val_question_weights.on_top=1"])
    out, _ = apply(table_v, "synthetic", table_v.scales["synthetic"], list(table_v.rows), override)
    assert out["generator"]["val_question_weights"] == {"on_top": 1}
    words = ["run", "mcan-pa-control-pa", "--scale", "synthetic", "--dry-run", "--rows", "MCAN"]
    for bad, refused in (
        ("generator.question_weights.is_onn=1", "unknown template 'is_onn'"),
        ("generator.question_weights.is_on=-1", "must not be negative"),
        ("generator.position_noise.x=1", "generator.position_noise is not a mapping"),
        ("generator.question_weights={is_on: 1}", "give one key per override"),
    ):
        result = runner.invoke(app, [*words, bad], env={"COLUMNS": "250"})
        assert result.exit_code == 2 and refused in result.output, (bad, result.output)
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
