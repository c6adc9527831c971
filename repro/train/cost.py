"""What a GPU-hour estimate assumes where a paper states no training time: a row's FLOPs over the sustained rate of
one GPU at the precision its recipe trains in.

The GPU is an NVIDIA A100 (SXM4 or PCIe, 40 or 80 GB), what ace-rpe's paper pre-trains on (Sec. 4.1) and the
common data-centre GPU of the papers' time. Its dense peaks by precision (NVIDIA A100 datasheet):
  fp32   19.5 TFLOP/s  CUDA cores: the trainer keeps TF32 off in fp32 (`trainer.matmul_precision`)
  tf32    156 TFLOP/s  tensor cores (`recipe.precision=tf32`)
  bf16    312 TFLOP/s  tensor cores under autocast (fp16 the same)
A run sustains a share of the peak, UTILISATION: 0.3, what `benchmarks/bench_train.py` measured for MCAN in fp32
(27.9 % of an H100's fp32 peak at the paper's batch; benchmarks/README.md). Small models at small batches sustain
far less in bf16 (1.9 % there: launch-bound), so a bf16 estimate is a lower bound for them.

Where a paper states its training time (mcan-pa Table VI's seconds per epoch, psac Table 4's), the family uses it
instead; `check` compares the FLOP model with those times (tests/test_cost_model.py, docs/cluster.md: Costs).
"""

from __future__ import annotations

A100_PEAK_TFLOPS = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}
UTILISATION = 0.3
GPU = "A100"


def precision_of(precision: str | None) -> str:
    """A recipe's precision as the peak table names it: `auto` (and None, a recipe's own) is fp32."""
    return "fp32" if precision in (None, "auto") else precision


def sustained(precision: str | None) -> float:
    """FLOP/s one GPU sustains training at `precision`."""
    return A100_PEAK_TFLOPS[precision_of(precision)] * 1e12 * UTILISATION


def gpu_hours(flops: float, precision: str | None) -> float:
    """GPU-hours of `flops` (forward and backward, every step) at `precision`."""
    return flops / sustained(precision) / 3600


def assumption(precision: str | None) -> str:
    """One line: what the FLOP-based estimates assume."""
    p = precision_of(precision)
    return (
        f"GPU-hours from FLOPs (where the paper states no training time) assume one {GPU} sustaining "
        f"{UTILISATION:.0%} of its dense {p} peak ({A100_PEAK_TFLOPS[p]:g} TFLOP/s, so "
        f"{sustained(p) / 1e12:.1f} TFLOP/s)"
    )
