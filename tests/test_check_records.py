"""`repro check` verifies what tables and claims are computed from: per-seed values against the seed records,
each seed record against its name, the row's mean and std (ddof 1) against its seeds, finite values, and no
stray file under seeds/ (on a copy of the committed results of mcan-pa)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from repro import results
from repro.cli import app
from repro.paths import REPO_DIR
from repro.report.check import check_records
from repro.specs import resolve

TABLE = "mcan-pa-table5-ablation"
ROW = "MCAN+PA_ours.synthetic"


@pytest.fixture
def copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """results/mcan-pa copied; REPRO_RESULTS points at the copy. Returns the table's folder."""
    shutil.copytree(REPO_DIR / "results" / "mcan-pa", tmp_path / "results" / "mcan-pa", symlinks=True)
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results" / "mcan-pa" / TABLE


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _check(runner, *args) -> tuple[int, str]:
    out = runner.invoke(app, ["check", TABLE, *args], env={"COLUMNS": "300"})
    return out.exit_code, out.output


def test_the_committed_copy_passes(runner, copied):
    code, output = _check(runner, "-v")
    assert code == 0, output
    assert "seed records" in " ".join(output.split())  # however the terminal wraps it


def test_seeds_under_several_configs_pass_with_a_note(runner, copied):
    other = "0123456789ab"
    _edit(copied / "seeds" / f"{ROW}.seed3.json", lambda d: d.update(config_hash=other))
    _edit(copied / f"{ROW}.json", lambda d: d.update(config_hash=f"{d['config_hash']},{other}"))
    code, output = _check(runner, "-v")
    assert code == 0, output
    assert "seeds ran under several configs" in " ".join(output.split())


def test_one_edited_per_seed_value_fails(runner, copied):
    _edit(
        copied / f"{ROW}.json",
        lambda d: d["extra"]["per_seed"][4].update({"All": d["extra"]["per_seed"][4]["All"] - 1}),
    )
    code, output = _check(runner)
    assert code == 1
    assert "per_seed of seed 4 differs from its seed record" in output and "not the mean of its seeds" in output


def test_every_per_seed_value_shifted_with_its_seed_records_fails_on_the_mean(runner, copied):
    """The audit's case: 10 off every per-seed value of a row (its seed records shifted alike) moved a
    claim's margin by 10 while `repro check` passed; the row's mean no longer follows from its seeds."""

    def shift(d):
        for m in d["extra"]["per_seed"] if "extra" in d and "per_seed" in d["extra"] else [d["metrics"]]:
            m["All"] -= 10

    _edit(copied / f"{ROW}.json", shift)
    for seed in (3, 4, 5):
        _edit(copied / "seeds" / f"{ROW}.seed{seed}.json", shift)
    code, output = _check(runner)
    assert code == 1 and "metrics.All" in output and "not the mean of its seeds" in output


def test_an_edited_seed_record_fails(runner, copied):
    _edit(copied / "seeds" / f"{ROW}.seed3.json", lambda d: d["metrics"].update({"Y/N": 99.0}))
    code, output = _check(runner)
    assert code == 1 and "per_seed of seed 3 differs from its seed record" in output


def test_a_truncated_seed_record_fails_naming_it(runner, copied):
    path = copied / "seeds" / f"{ROW}.seed5.json"
    path.write_text(path.read_text()[:200])
    code, output = _check(runner)
    assert code == 1 and f"{ROW}.seed5.json" in output and "unreadable seed record" in output
    assert "Traceback" not in output


def test_the_std_is_pinned_to_ddof_1(runner, copied):
    def ddof0(d):
        values = [m["All"] for m in d["extra"]["per_seed"]]
        d["std"]["All"] = statistics.pstdev(values)

    _edit(copied / f"{ROW}.json", ddof0)
    code, output = _check(runner)
    assert code == 1 and "std.All" in output and "ddof 1" in output
    # and the row record is written with ddof 1
    spec = resolve(TABLE)
    seeds = {0: _seed(spec, 0, 1.0), 1: _seed(spec, 1, 2.0), 2: _seed(spec, 2, 6.0)}
    row = results.aggregate(spec, spec.row("MCAN"), "synthetic", seeds)
    assert (
        row.std["All"]
        == pytest.approx(statistics.stdev([1.0, 2.0, 6.0]))
        != pytest.approx(statistics.pstdev([1.0, 2.0, 6.0]))
    )


def _seed(spec, seed: int, value: float) -> results.SeedResult:
    return results.SeedResult(spec.id, spec.paper, "MCAN", "synthetic", seed, "val", {"All": value})


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            f"{ROW}.seed17.json",
            '{"spec": "x", "row": "y", "scale": "synthetic", "seed": 17, "metrics": {"All": NaN}}',
            "unreadable",
        ),
        (f"{ROW}.seed18.json", None, "not a finite measurement"),  # 1e308
        (f"{ROW}.weird.json", "{}", "a stray file"),
        ("MCAN.weird.seed0.json", "{}", "names no row and scale"),
        (f"{ROW}.seed19.json", "dir", "not a file"),
        (f"{ROW}.seed16.json", "link", "leads out of the results folder"),
        (f"{ROW}.seed16.json", "misnamed", "its name says 16"),
        (f"{ROW}.seed16.json", "extra", "is not in its row record"),
    ],
)
def test_a_stray_or_corrupt_file_under_seeds_fails_naming_it(runner, copied, tmp_path, name, content, message):
    path = copied / "seeds" / name
    good = json.loads((copied / "seeds" / f"{ROW}.seed3.json").read_text())
    if content is None:
        path.write_text(json.dumps({**good, "seed": 18, "metrics": {**good["metrics"], "All": 1e308}}))
    elif content == "dir":
        path.mkdir()
    elif content == "link":
        outside = tmp_path / "elsewhere.json"
        outside.write_text(json.dumps({**good, "seed": 16}))
        path.symlink_to(outside)
    elif content == "misnamed":
        path.write_text(json.dumps(good))  # says seed 3
    elif content == "extra":
        path.write_text(json.dumps({**good, "seed": 16}))
    else:
        path.write_text(content)
    code, output = _check(runner)
    assert code == 1, output
    assert name in output and message in output and "Traceback" not in output


def test_json_output_lists_the_problems(runner, copied):
    (copied / "seeds" / f"{ROW}.weird.json").write_text("{}")
    code, output = _check(runner, "--format", "json")
    data = json.loads(output)
    assert code == 1 and data["records"]["problems"][0]["path"].endswith(f"{ROW}.weird.json")


OTHER_CONFIG = "32966c29c94ba0a6"


def _seeds_3_to_5_under_another_config(copied: Path, row: str) -> None:
    """Seeds 3-5 of `row` recorded as run under OTHER_CONFIG, and the row record naming both configs."""
    for seed in (3, 4, 5):
        _edit(copied / "seeds" / f"{row}.seed{seed}.json", lambda d: d.update(config_hash=OTHER_CONFIG))
    _edit(copied / f"{row}.json", lambda d: d.update(config_hash=f"{d['config_hash']},{OTHER_CONFIG}"))


def test_mixed_configs_are_named_with_their_seeds(copied):
    _seeds_3_to_5_under_another_config(copied, ROW)
    notes = check_records(resolve(TABLE)).notes
    mixed = [n for n in notes if "MCAN+PA (ours) (synthetic): seeds ran under several configs" in n]
    assert mixed and "for seeds 3, 4, 5" in mixed[0] and "for seeds 0, 1, 2" in mixed[0]


def test_the_table_says_which_seeds_ran_under_which_config(copied):
    from repro.report import build_view
    from repro.report.view import footnotes

    _seeds_3_to_5_under_another_config(copied, "MCAN+PE.synthetic")
    notes = " ".join(footnotes(build_view(resolve(TABLE), "synthetic")))
    assert "Seeds pooled from several configs: MCAN+PE: config " in notes
    others = [s for s in json.loads((copied / "MCAN+PE.synthetic.json").read_text())["seeds"] if s not in (3, 4, 5)]
    assert f"for seeds {', '.join(map(str, others))}; config {OTHER_CONFIG} for seeds 3, 4, 5" in notes


def _with_changed_recipe(tmp_path: Path):
    """Table 5's spec with its synthetic recipe's epochs changed after its results were made."""
    folder = tmp_path / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    text = (REPO_DIR / "experiments" / "mcan-pa" / f"{TABLE}.yaml").read_text()
    assert text.count("      epochs: 56\n") == 1
    (folder / f"{TABLE}.yaml").write_text(text.replace("      epochs: 56\n", "      epochs: 57\n"))
    return resolve(TABLE, tmp_path / "experiments")


def test_results_made_before_the_settings_changed_are_named_in_check_and_table(copied, tmp_path):
    from repro.report import build_view
    from repro.report.view import footnotes

    assert not [n for n in check_records(resolve(TABLE)).notes if "other settings" in n]  # as committed: none
    assert "other settings" not in " ".join(footnotes(build_view(resolve(TABLE), "synthetic")))
    changed = _with_changed_recipe(tmp_path)
    notes = [n for n in check_records(changed).notes if "made under other settings than the spec's now" in n]
    assert len(notes) == len([r for r in changed.rows if r.runnable])  # every synthetic row of the table
    assert f"{TABLE} / MCAN+PA (ours) (synthetic)" in " ".join(notes)
    words = " ".join(" ".join(footnotes(build_view(changed, "synthetic"))).split())
    assert "Made under other settings than the spec's now" in words and "MCAN+PA (ours)" in words


def test_the_hashes_checked_against_are_the_ones_a_run_gives():
    from repro.run import config_hashes_now, make_plan

    for ident in (TABLE, "psac-table3-vpsa", "dsganet-table8-gqa-ablation", "ace-rpe-table2-pe"):
        spec = resolve(ident)
        for scale in ("smoke", "synthetic"):
            planned = {u.row.name: u.config_hash for u in make_plan(spec, scale).units}
            assert config_hashes_now(spec, scale) == planned, (ident, scale)
