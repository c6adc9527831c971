"""`python -m benchmarks.bench_batch`: a sample's cost from a stage's steady rate, and the stage's recipe batch
multiplied where the trainer receives it; no speed is asserted."""

from __future__ import annotations

import pytest

from benchmarks import bench_batch


def test_a_sample_costs_the_steady_rate_over_the_batch_or_the_mean_rate_under_four_steps():
    assert bench_batch.per_sample_ms({"steady_cpu_s_per_step": 0.064, "cpu_s": 9.0, "steps": 100}, 32) == pytest.approx(
        2.0
    )
    assert bench_batch.per_sample_ms({"steady_cpu_s_per_step": None, "cpu_s": 0.3, "steps": 3}, 10) == pytest.approx(
        10.0
    )


def test_the_trainer_receives_the_recipe_with_its_batch_multiplied(monkeypatch, tmp_path):
    from repro.train import trainer

    received = []

    def fake_unit(spec_id, row, seeds, steps, threads, workdir, profile):
        from repro.train import fit  # as a family's unit reads it

        fit(None, None, _Recipe(48), workdir)
        return {"stages": [{"recipe": "r"}], "unit_wall_s": 0.0}

    monkeypatch.setattr(trainer, "fit", lambda model, dataset, recipe, workdir, **kw: received.append(recipe))
    monkeypatch.setattr(bench_batch, "unit", fake_unit)
    out = bench_batch.scaled_unit("spec", "row", 5, str(tmp_path), 4)
    assert [r.batch_size for r in received] == [192] and out["batches"] == [192]


class _Recipe:
    def __init__(self, batch_size: int):
        self.batch_size = batch_size

    def replace(self, **changes):
        return _Recipe(changes.get("batch_size", self.batch_size))
