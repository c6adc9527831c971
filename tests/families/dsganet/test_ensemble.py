"""`repro run --ensemble` for DSGANet: a Table VII row's seeds trained together give each seed's lone result, for
the GRU and BERT question encoders, objects (DAA, SGA) and grids."""

from __future__ import annotations

import pytest

from repro.cli import app
from tests.conftest import copy_spec, lone_and_together

# 1: GRU, objects; 5: BERT, objects, DAA and SGA (DSGANet-O); 8: BERT, grids, DAA (DSGANet-G)
RUN = ["run", "dsganet-table7-ablation", "--scale", "smoke", "--rows", "1,5,8", "--seeds", "0,1"]


@pytest.mark.slow
def test_seeds_trained_together_equal_their_lone_runs(sandbox, runner):
    copy_spec(sandbox, "dsganet", "dsganet-table7-ablation")
    lone, together = lone_and_together(runner, sandbox, RUN, "dsganet", "dsganet-table7-ablation")
    assert sorted(together) == sorted(lone) and len(lone) == 6  # three rows, two seeds
    for name in lone:
        a, b = lone[name], together[name]
        # no dropout at this scale, so each seed is its lone run up to the batched kernels' summation order
        assert b["metrics"] == pytest.approx(a["metrics"], abs=0.01), name
        assert b["training"]["final_loss"] == pytest.approx(a["training"]["final_loss"], rel=1e-4), name
        assert b["training"]["ensemble"] == [0, 1] and "ensemble" not in a["training"]
        assert b["info"] == a["info"] and b["extra"].keys() == a["extra"].keys()
        assert b["config_hash"] == a["config_hash"]


def test_paper_scale_is_not_trained_together(sandbox, runner):
    copy_spec(sandbox, "dsganet", "dsganet-table7-ablation")
    out = runner.invoke(app, ["run", "dsganet-table7-ablation", "--rows", "1", "--seeds", "0,1", "--ensemble"])
    assert out.exit_code == 2 and "at the generated scales" in out.output and "Traceback" not in out.output
