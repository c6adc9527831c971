"""Planning `repro run`: rows, seeds, scales, dry-run output and refusals."""

from __future__ import annotations

import pytest

from repro.cli import app
from repro.errors import ReproError
from repro.paths import REPO_DIR
from repro.run import make_plan
from repro.specs import resolve


@pytest.fixture
def table5():
    return resolve("table5-ablation", REPO_DIR / "experiments")


def test_plan_has_every_runnable_row(table5):
    plan = make_plan(table5, "paper")
    assert [s.row.name for s in plan.steps] == [r.name for r in table5.rows]
    assert all(s.kind == "train" and s.seeds == [0] for s in plan.steps)
    assert plan.steps[0].gpu_hours == pytest.approx(4150 * 13 / 3600)
    assert plan.steps[-1].gpu_hours == pytest.approx(5583 * 13 / 3600)


def test_plan_selects_rows_by_name_or_file_name(table5):
    plan = make_plan(table5, "paper", ["MCAN", "MCAN+PA_ours", "MCAN+PA*"], seeds=[1, 2])
    assert [s.row.name for s in plan.steps] == ["MCAN", "MCAN+PA (ours)", "MCAN+PA*"]
    assert plan.steps[0].seeds == [1, 2]


def test_unknown_row_suggests_names(table5):
    with pytest.raises(ReproError, match="did you mean"):
        make_plan(table5, "paper", ["MCAN+PWX"])


def test_cited_rows_are_never_run():
    spec = resolve("table3-vqa2", REPO_DIR / "experiments")
    cited = next(r for r in spec.rows if r.cited)
    with pytest.raises(ReproError, match="shown, never run"):
        make_plan(spec, "paper", [cited.name])


def test_scale_without_settings_is_refused():
    spec = resolve("psac-table2-sota", REPO_DIR / "experiments")
    with pytest.raises(ReproError, match="no settings for scale 'smoke'"):
        make_plan(spec, "smoke")


def test_dry_run_prints_plan_and_gpu_hours(runner):
    out = runner.invoke(app, ["run", "table5-ablation", "--dry-run"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "MCAN+PA (ours)" in out.output and "estimated GPU-hours" in out.output
    assert "repro download vqa2" in out.output


def test_bad_seeds_is_one_line(runner):
    out = runner.invoke(app, ["run", "table5-ablation", "--dry-run", "--seeds", "a,b"])
    assert out.exit_code == 2 and "--seeds must be comma-separated integers" in out.output


def test_rows_without_an_implementation_are_planned_and_refused_before_training(runner, monkeypatch):
    """A family folder without its family.py yet (every family has one now: one is hidden here)."""
    from repro import families

    real = families.implementation
    monkeypatch.setattr(families, "implementation", lambda f: None if f.paper == "sa-m4c" else real(f))
    out = runner.invoke(app, ["run", "sa-m4c-table1-textvqa", "--dry-run"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "not implemented yet" in out.output
    out = runner.invoke(app, ["run", "sa-m4c-table1-textvqa"])
    assert out.exit_code == 2 and "not implemented yet" in out.output and "Traceback" not in out.output


def test_dry_run_download_commands_name_catalog_datasets(runner):
    from repro.data.catalog import load_catalog

    out = runner.invoke(app, ["run", "table1-cocoqa", "--dry-run"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "repro download coco-qa" in out.output and "coco-qa" in load_catalog()
    out = runner.invoke(app, ["run", "table2-vqa1", "--dry-run"], env={"COLUMNS": "200"})
    assert "repro download vg-qa" in out.output and "repro prepare vg-qa" not in out.output


def test_a_familys_prepare_data_sees_only_the_rows_the_run_trains(monkeypatch):
    """`--rows` reaches data preparation: sa-m4c converts the paper-scale data of each row's OCR system and detector,
    so the spec it is handed must hold the selected rows only (whole runs and single units alike)."""
    import dataclasses

    from repro import families
    from repro.families.base import with_data
    from repro.launch import units

    spec = resolve("sa-m4c-table2-ablations")
    runnable = [r.name for r in spec.rows if r.config is not None]
    seen: list[list[str]] = []
    real = families.for_row

    def recording(row):
        hooks = real(row)
        record = lambda spec, scale, settings: seen.append([r.name for r in spec.rows])  # noqa: E731
        return None if hooks is None else dataclasses.replace(hooks, prepare_data=record)

    monkeypatch.setattr(families, "for_row", recording)
    plan = make_plan(spec, "smoke", runnable[1:3])
    units.prepare_data(plan)
    assert seen == [runnable[1:3]]
    ctx = plan.steps[0].units[0].context(progress=False)
    with_data(ctx)
    assert seen[-1] == [runnable[1]] and len(ctx.spec.rows) == len(spec.rows)
