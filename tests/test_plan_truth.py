"""The paper-scale plan is the truth: every download and prepare step a run asks for, listed in order with its
size; each row `missing: ...` while its data is not on disk (or why it does not run at paper scale)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repro.cli import app
from repro.families import implementation
from repro.families.base import DataNeed
from repro.paths import REPO_DIR
from repro.run import make_plan, need_commands
from repro.specs import clear_cache
from repro.specs import load_all as all_specs

PAPERS = ("mcan-pa", "sa-m4c", "psac", "dsganet", "ace-rpe")


@pytest.fixture
def empty_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data folder and results folder, the shipped specs."""
    for name in ("results", "data"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(REPO_DIR / "experiments"))
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("REPRO_TGIF_DIR", raising=False)
    clear_cache()
    yield tmp_path / "data"
    clear_cache()


def first_paper_spec(paper: str):
    """The paper's first spec (by id) with a row that trains at paper scale."""
    for spec in sorted(all_specs(), key=lambda s: s.id):
        if spec.paper != paper or not any(r.model for r in spec.runnable_rows):
            continue
        plan = make_plan(spec, "paper")
        if any(s.kind == "train" and not s.unsupported for s in plan.steps):
            return spec, plan
    raise AssertionError(f"{paper}: no spec trains at paper scale")


def named_steps(message: str) -> set[str]:
    """The download and prepare steps a refusal names: `repro download A B`, `repro prepare X`."""
    names = set()
    for verb, words in re.findall(r"repro (download|prepare) ([a-z0-9][a-z0-9 -]*)", message):
        for word in words.split():
            if word in ("and", "first", "then", "or"):
                break
            names.add(f"repro {verb} {word}")
    return names


@pytest.mark.parametrize("paper", PAPERS)
def test_empty_data_folder_every_row_missing_and_the_refusal_within_the_plan(paper, empty_data, runner):
    spec, plan = first_paper_spec(paper)
    trained = [s for s in plan.steps if s.kind == "train"]
    assert all(s.missing or s.unsupported for s in trained), [(s.row.name, s.missing) for s in trained]
    assert any(s.missing for s in trained)
    listed = {c.split(" --")[0] for need in plan.needs for c in need_commands(need)}
    listed |= {f"repro download {n.dataset}" for n in plan.needs}
    assert plan.data and all(line.endswith(": missing") for line in plan.data[: len(plan.needs)])
    result = runner.invoke(app, ["run", spec.id, "--rows", next(s for s in trained if s.missing).row.name])
    assert result.exit_code != 0
    assert "error:" in result.output
    refusal = " ".join(result.output[result.output.index("error:") :].split())  # the one line, unwrapped
    named = named_steps(refusal)
    assert named, refusal  # the refusal names the command that makes what it lacks
    assert named <= {" ".join(c.split()[:3]) for c in listed}, (named, listed)


def test_the_plan_lists_word_vectors_features_and_their_prepare_steps_in_order(empty_data):
    """The gap of issue 29: mcan-pa's table 5 also reads GloVe and the 36-box features (42 GB), and Visual Genome's
    QA, which its recipe trains on, before `repro prepare vqa2` reads it."""
    spec = next(s for s in all_specs() if s.id == "mcan-pa-table5-ablation")
    plan = make_plan(spec, "paper")
    commands = [c for need in plan.needs for c in need_commands(need)]
    assert commands == [
        "repro download glove-840b",
        "repro download vg-qa",
        "repro download vqa2",
        "repro prepare vqa2",
        "repro download bottom-up-36",
        "repro prepare bottom-up-36",
    ]
    assert "(42.0 GB)" in plan.data[3]
    assert all(_status(s).startswith("[red]missing:[/] `repro download glove-840b`") for s in plan.steps)


def _status(step) -> str:
    from repro.report.plan import status

    return status(step, "paper")


def test_a_row_is_ready_only_when_its_data_is_on_disk(empty_data, monkeypatch):
    """`ready` comes from the disk: the need's own check, or every catalog file and the prepared output."""
    spec = next(s for s in all_specs() if s.id == "psac-table2-sota")
    store = empty_data / "prepared" / "features" / "tgif-qa" / "resnet.store"
    plan = make_plan(spec, "paper")
    assert list(plan.steps[0].missing) == [
        "repro download tgif-qa",
        "repro download glove-6b",
        "repro download tgif-qa-features",
        "repro prepare tgif-qa",
    ]
    monkeypatch.setenv("REPRO_TGIF_DIR", str(empty_data / "questions"))
    from repro.datasets.tgif import SPLITS, TASKS, file_name

    (empty_data / "questions").mkdir()
    for split in SPLITS:
        for task in TASKS:
            (empty_data / "questions" / file_name(split, task)).write_text("x")
    store.mkdir(parents=True)
    (store / "meta.json").write_text("{}")
    assert list(make_plan(spec, "paper").steps[0].missing) == ["repro download glove-6b"]
    (empty_data / "glove-6b").mkdir()
    (empty_data / "glove-6b" / "glove.6B.300d.txt").write_text("the 0.1 0.2\n")
    plan = make_plan(spec, "paper")
    assert list(plan.steps[0].missing) == []
    assert _status(plan.steps[0]) == "ready"
    assert all(line.endswith(": ready") for line in plan.data[:3])


def test_generic_readiness_needs_every_catalog_file_and_the_prepared_output(empty_data, monkeypatch):
    from repro.run import need_missing

    need = DataNeed("glove-840b")
    assert need_missing(need) == ["repro download glove-840b"]
    folder = empty_data / "glove-840b"
    folder.mkdir()
    (folder / "glove.840B.300d.zip").write_bytes(b"zip")
    assert need_missing(need) == []
    need = DataNeed("vqa2", "vqa2")
    assert need_missing(need) == ["repro download vqa2", "repro prepare vqa2"]
    (empty_data / "prepared" / "vqa2").mkdir(parents=True)
    (empty_data / "prepared" / "vqa2" / "manifest.json").write_text("{}")
    assert need_missing(need) == ["repro download vqa2"]


def test_dsganet_grid_rows_say_they_do_not_run_at_paper_scale(empty_data):
    spec = next(s for s in all_specs() if s.id == "dsganet-table7-ablation")
    plan = make_plan(spec, "paper")
    grids = [s for s in plan.steps if s.row.config is not None and s.row.config.features == "grids"]
    assert grids and all("grid features" in s.unsupported and not s.missing for s in grids)
    assert all(_status(s).startswith("[yellow]unsupported") for s in grids)


def test_every_family_names_what_its_paper_scale_rows_read():
    from repro.families import by_paper

    for paper in PAPERS:
        hooks = implementation(by_paper(paper))
        assert hooks.paper_data.__name__ == "paper_data", paper


def test_dsganet_object_rows_have_an_estimate_and_the_total_counts_them(empty_data):
    spec = next(s for s in all_specs() if s.id == "dsganet-table7-ablation")
    plan = make_plan(spec, "paper")
    objects = [s for s in plan.steps if s.row.config.features == "objects"]
    assert objects and all(s.gpu_hours and 1.0 < s.gpu_hours < 100.0 for s in objects)
    from repro.report.plan import cost_lines, gpu_hours

    assert gpu_hours(plan) == pytest.approx(sum(s.gpu_hours for s in objects))
    lines = cost_lines(plan)
    assert lines[0].startswith(f"estimated GPU-hours (paper schedule): {gpu_hours(plan):.1f} for 1 seed(s)")
    assert f"3 seeds per row (`--seeds 0,1,2`): {3 * gpu_hours(plan):.1f} GPU-hours" in lines[1]


def test_the_plan_prices_each_row_times_its_seeds(empty_data):
    spec = next(s for s in all_specs() if s.id == "mcan-pa-table5-ablation")
    plan = make_plan(spec, "paper", ["MCAN"], seeds=[0, 1, 2])
    from repro.report.plan import cost_lines, row_hours

    assert row_hours(plan.steps[0]) == "15.0 x 3 = 45.0"
    estimate, assumption = cost_lines(plan)
    assert estimate == "estimated GPU-hours (paper schedule): 45.0 for 3 seed(s) per row"
    assert assumption.startswith("GPU-hours from FLOPs (where the paper states no training time) assume one A100")


def test_psac_trains_the_official_codes_epochs_per_task_at_paper_scale(empty_data):
    from repro.families.psac.tasks import recipe_overrides

    spec = next(s for s in all_specs() if s.id == "psac-table2-sota")
    ctx = type("Ctx", (), {"generated": False, "settings": {}})()
    assert recipe_overrides(ctx, "action")["epochs"] == 300
    assert recipe_overrides(ctx, "transition")["epochs"] == 300
    assert recipe_overrides(ctx, "count")["epochs"] == 100
    ctx.settings = {"recipe": {"epochs": 2}}
    assert recipe_overrides(ctx, "action")["epochs"] == 2  # an override still wins
    ctx.generated = True
    ctx.settings = {}
    assert "epochs" not in recipe_overrides(ctx, "action")
    assert spec.recipe
