"""CI regression of the committed synthetic results: they agree with their spec, and one row re-run
from scratch reproduces its stored value within the tolerance the spec states."""
from __future__ import annotations

import json

import pytest

from repro.cli import app
from repro.paths import REPO_DIR
from repro.report import check_spec
from repro.results import read_results
from repro.families.base import RunContext
from repro.run import _run_unit
from repro.specs import load_all, resolve

EXPERIMENTS = REPO_DIR / "experiments"
RESULTS = REPO_DIR / "results"


def test_committed_results_pass_check(runner, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(RESULTS))
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(EXPERIMENTS))
    checks = [c for spec in load_all(EXPERIMENTS) for c in check_spec(spec, RESULTS)]
    assert checks, "no committed results to check"
    out = runner.invoke(app, ["check"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output


def test_committed_synthetic_table5_has_every_row_and_three_seeds():
    spec = resolve("table5-ablation", EXPERIMENTS)
    stored = read_results(spec, scale="synthetic", root=RESULTS)
    assert {name for (name, _) in stored} == {r.name for r in spec.rows}
    for result in stored.values():
        assert result.seeds == spec.scales["synthetic"]["seeds"]
        assert len(result.extra["per_seed"]) == 3 and set(result.std) == set(result.metrics)


def test_one_synthetic_row_reproduces_its_stored_value(sandbox):
    """Re-run MCAN, seed 0, at the synthetic scale in a fresh data folder (single-threaded, as the
    committed runs were) and compare with the stored per-seed value."""
    import torch

    spec = resolve("table5-ablation", EXPERIMENTS)
    stored = read_results(spec, scale="synthetic", root=RESULTS)[("MCAN", "synthetic")]
    expected = stored.extra["per_seed"][stored.seeds.index(0)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        row = spec.row("MCAN")
        run, _ = _run_unit(RunContext(spec=spec, row=row, config=row.config, scale="synthetic",
                                      settings=spec.scales["synthetic"], seed=0, workdir=sandbox / "run",
                                      progress=False))
        metrics = run.metrics
    finally:
        torch.set_num_threads(threads)
    for column, value in expected.items():
        assert metrics[column] == pytest.approx(value, abs=spec.tolerance_for(column, "synthetic")), column
    json.dumps(metrics)  # plain floats, as a result file holds them
