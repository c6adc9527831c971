"""Table 1 as a compute task of the psac family, from the real question files."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.families.base import RunContext
from repro.families.psac.statistics import statistics
from repro.specs import resolve

REAL = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tgif-qa"  # beside the checkout


@pytest.mark.skipif(not (REAL / "Test_action_question.csv").is_file(), reason="real TGIF-QA files absent")
def test_statistics_rows_fill_present_cells_and_name_the_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("REPRO_TGIF_DIR", str(REAL))
    spec = resolve("psac-table1-stats")
    runs = {}
    for row in spec.rows:
        ctx = RunContext(spec=spec, row=row, config=None, scale="paper", settings={}, seed=0, workdir=tmp_path)
        runs[row.name] = statistics(ctx)
    test = runs["Test"]
    assert test.metrics == {c: float(v) for c, v in spec.row("Test").reported.items()}
    train = runs["Train"]
    assert train.metrics["Action QA-pairs"] == 20471 and train.metrics["Action GIFs"] == 3542
    assert any("Train_transition_question.csv" in m for m in train.info["missing"])
    assert "Trans QA-pairs" not in train.metrics and "FrameQA GIFs" not in runs["Total"].metrics
    assert runs["Total"].metrics["Count GIFs"] == 13316
    assert test.info["distinct"]["Action GIFs"]["gif_name"] == 2274
