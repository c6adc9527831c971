"""`ensemble: true`: a Table V row's seeds trained together give each seed's lone result, recorded as usual."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import yaml

from repro import families, specs
from repro.cli import app
from repro.paths import REPO_DIR

MCAN_PA = families.by_paper("mcan-pa")

ROW = "MCAN+PA (ours)"  # PWA, POA and PMA: every positional module's learned bias under vmap


@pytest.fixture
def table5(sandbox):
    text = (REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml").read_text()
    spec = yaml.safe_load(text)
    spec["scales"]["smoke"]["seeds"] = [0, 1]
    path = sandbox / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml"
    path.parent.mkdir(parents=True)

    def write(**settings):
        spec["scales"]["smoke"].update(settings)
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        specs._load_all.cache_clear()

    write()
    return sandbox, write


def seed_records(sandbox):
    folder = sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation" / "seeds"
    return {int(p.stem.rsplit("seed", 1)[1]): json.loads(p.read_text()) for p in folder.glob("*.json")}


@pytest.mark.slow
def test_seeds_trained_together_equal_their_lone_runs(table5, runner):
    sandbox, write = table5
    args = ["run", "table5-ablation", "--scale", "smoke", "--rows", ROW]
    out = runner.invoke(app, [*args, "--workdir", str(sandbox / "lone")])
    assert out.exit_code == 0, out.output
    lone = seed_records(sandbox)
    shutil.rmtree(sandbox / "results" / "mcan-pa")

    write(ensemble=True)
    out = runner.invoke(app, [*args, "--workdir", str(sandbox / "together")])
    assert out.exit_code == 0, out.output
    together = seed_records(sandbox)
    assert sorted(together) == sorted(lone) == [0, 1]
    for seed in lone:
        a, b = lone[seed], together[seed]
        # smoke tolerance 0.01 points; measured: identical metrics, final losses equal to ~1e-7 relative
        assert b["metrics"] == pytest.approx(a["metrics"], abs=0.01)
        assert b["training"]["final_loss"] == pytest.approx(a["training"]["final_loss"], rel=1e-5)
        assert b["training"]["ensemble"] == [0, 1] and "ensemble" not in a["training"]
        assert b["config_hash"] == a["config_hash"]  # how seeds are scheduled is not what they compute
        assert set(b) == set(a) and b["extra"].keys() == a["extra"].keys()
        assert (
            sandbox / "together" / "mcan-pa-table5-ablation" / "smoke" / "MCAN+PA_ours" / f"seed{seed}" / "last.pt"
        ).is_file()
    row = json.loads(
        (sandbox / "results" / "mcan-pa" / "mcan-pa-table5-ablation" / "MCAN+PA_ours.smoke.json").read_text()
    )
    assert row["seeds"] == [0, 1]
    assert runner.invoke(app, ["check", "table5-ablation"]).exit_code == 0


def test_a_family_without_ensembles_or_a_bad_value_says_so(table5, runner, monkeypatch):
    sandbox, write = table5
    write(ensemble="yes")
    out = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN"])
    assert out.exit_code == 2 and "ensemble must be true or false" in out.output and "Traceback" not in out.output

    write(ensemble=True)
    hooks, real = families.implementation(MCAN_PA), families.implementation
    without = dataclasses.replace(hooks, run_ensemble=None)
    monkeypatch.setattr(families, "implementation", lambda f: without if f == MCAN_PA else real(f))
    out = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN"])
    assert out.exit_code == 2 and "trains one seed at a time" in out.output
    assert not (sandbox / "results" / "mcan-pa").exists()


def test_vl_bert_rows_are_not_trained_together(tmp_path):
    from repro.errors import ReproError
    from repro.families.base import RunContext

    spec = specs.resolve("mcan-pa-table4-pretraining")
    row = next(r for r in spec.runnable_rows if r.config.arch == "vl-bert")
    ctxs = [RunContext(spec, row, row.config, "smoke", {}, seed, tmp_path / str(seed)) for seed in (0, 1)]
    with pytest.raises(ReproError, match="only MCAN rows"):
        families.implementation(MCAN_PA).run_ensemble(ctxs)


def test_on_slurm_a_rows_seeds_together_are_one_job(table5, runner):
    sandbox, write = table5
    write(ensemble=True)
    words = ["run", "table5-ablation", "--scale", "smoke", "--launcher", "slurm", "--rows", "MCAN", "--dry-run"]
    out = runner.invoke(app, words)
    assert out.exit_code == 0, out.output
    # the time of both seeds one after another; the run on stub Slurm commands is in tests/test_launch_slurm.py
    assert "slurm: MCAN: one job for its 2 seeds trained together, 0 GPU(s), 2 CPUs, 4 GB, ~2 h" in out.output
    out = runner.invoke(app, [*words, "--slurm-opt", "gpus_per_node=2"])
    assert out.exit_code == 2 and "run in one process, not on 2 GPUs" in out.output
