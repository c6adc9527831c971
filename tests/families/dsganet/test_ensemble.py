"""`repro run --ensemble` for DSGANet: a Table VII row's seeds trained together give each seed's lone result, for
the GRU and BERT question encoders, objects (DAA, SGA) and grids."""

from __future__ import annotations

import json
import shutil

import pytest

from repro import specs
from repro.cli import app
from repro.paths import REPO_DIR

# 1: GRU, objects; 5: BERT, objects, DAA and SGA (DSGANet-O); 8: BERT, grids, DAA (DSGANet-G)
RUN = ["run", "dsganet-table7-ablation", "--scale", "smoke", "--rows", "1,5,8", "--seeds", "0,1"]


@pytest.fixture
def table7(sandbox):
    folder = sandbox / "experiments" / "dsganet"
    folder.mkdir()
    shutil.copy(REPO_DIR / "experiments" / "dsganet" / "dsganet-table7-ablation.yaml", folder)
    specs._load_all.cache_clear()
    return sandbox


def seed_records(sandbox):
    folder = sandbox / "results" / "dsganet" / "dsganet-table7-ablation" / "seeds"
    return {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}


def test_seeds_trained_together_equal_their_lone_runs(table7, runner):
    sandbox = table7
    out = runner.invoke(app, [*RUN, "--workdir", str(sandbox / "lone")])
    assert out.exit_code == 0, out.output
    lone = seed_records(sandbox)
    shutil.rmtree(sandbox / "results" / "dsganet")

    out = runner.invoke(app, [*RUN, "--ensemble", "--workdir", str(sandbox / "together")])
    assert out.exit_code == 0, out.output
    together = seed_records(sandbox)
    assert sorted(together) == sorted(lone) and len(lone) == 6  # three rows, two seeds
    for name in lone:
        a, b = lone[name], together[name]
        # no dropout at this scale, so each seed is its lone run up to the batched kernels' summation order
        assert b["metrics"] == pytest.approx(a["metrics"], abs=0.01), name
        assert b["training"]["final_loss"] == pytest.approx(a["training"]["final_loss"], rel=1e-4), name
        assert b["training"]["ensemble"] == [0, 1] and "ensemble" not in a["training"]
        assert b["info"] == a["info"] and b["extra"].keys() == a["extra"].keys()
        assert b["config_hash"] == a["config_hash"]
    assert runner.invoke(app, ["check", "dsganet-table7-ablation"]).exit_code == 0


def test_paper_scale_is_not_trained_together(table7, runner):
    out = runner.invoke(app, ["run", "dsganet-table7-ablation", "--rows", "1", "--seeds", "0,1", "--ensemble"])
    assert out.exit_code == 2 and "at the generated scales" in out.output and "Traceback" not in out.output
