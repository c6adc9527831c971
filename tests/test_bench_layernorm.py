"""`python -m benchmarks.bench_layernorm` compares like with like: both sides compute the same normalisation; no speed
is asserted."""

from __future__ import annotations

import torch

from benchmarks import bench_layernorm
from repro.nn.attention import LayerNorm


def test_the_baseline_computes_what_the_module_does():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    norm = LayerNorm(16).double()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-1, 1)
    baseline = bench_layernorm.with_torch_std(x, norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(baseline, norm(x), rtol=1e-12, atol=1e-12)


def test_every_shape_is_measured_on_both_sides(monkeypatch, capsys):
    monkeypatch.setattr(bench_layernorm, "SHAPES", {"tiny": (2, 3, 8), "wider": (2, 3, 32)})
    threads = torch.get_num_threads()
    try:
        out = bench_layernorm.main(["--reps", "1", "--rounds", "1"])
    finally:
        torch.set_num_threads(threads)
    assert set(out) == {"tiny", "wider"}
    assert all(r["torch_std_ms"] > 0 and r["unbiased_std_ms"] > 0 and r["ratio"] > 0 for r in out.values())
    assert "tiny" in capsys.readouterr().out
