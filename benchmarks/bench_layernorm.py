"""MCAN's layer normalisation, `repro.nn.attention.LayerNorm`, whose unbiased std comes from the centred values' sum
of squares (`unbiased_std`, as in PSAC's), against the same formula with `torch.std`, forward and backward.

    python -m benchmarks.bench_layernorm                  # the synthetic scale's and the paper's shapes, 1 thread
    python -m benchmarks.bench_layernorm --threads 2 --reps 50

Both sides are the same formula, a·(x − mean)/(std + eps) + b, with the module's a, b and eps, on the same tensor,
interleaved, best of `--rounds` rounds of `--reps` forward-and-backward passes each; the ratio is the baseline's
time over ours. Shapes: [batch, tokens, width] of the synthetic models (MCAN+PA's 64-wide encoder and decoder at
batch 64, ten seeds stacked as an ensemble trains them) and of the paper (MCAN's 512 at batch 64, 100 regions).
"""

from __future__ import annotations

import argparse
import time

import torch

from repro.nn.attention import LayerNorm

SHAPES = {
    "synthetic, questions (64, 14, 64)": (64, 14, 64),
    "synthetic, regions (64, 36, 64)": (64, 36, 64),
    "synthetic, 10 seeds (10, 64, 36, 64)": (10, 64, 36, 64),
    "paper, regions (64, 100, 512)": (64, 100, 512),
}


def with_torch_std(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The formula as it was written before: `x.std(-1)`, the baseline."""
    mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias


def best_seconds(norm, x, reps: int, rounds: int) -> float:
    grad = torch.randn_like(x)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            x.grad = None
            norm(x).backward(grad)
        best = min(best, (time.perf_counter() - start) / reps)
    return best


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_layernorm", description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=20, help="passes a round (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the best taken (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1: what -j 2 gives a unit)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out: dict[str, dict[str, float]] = {}
    print(f"forward + backward, ms (best of {args.rounds} x {args.reps}), {args.threads} thread(s):")
    for name, shape in SHAPES.items():
        x = torch.randn(shape, requires_grad=True)
        norm = LayerNorm(shape[-1])  # ours: the module the models use

        def baseline(x, norm=norm):
            return with_torch_std(x, norm.weight, norm.bias, norm.eps)

        base = ours = float("inf")
        for _ in range(2):  # interleaved, so that the machine's other work falls on both sides alike
            base = min(base, best_seconds(baseline, x, args.reps, args.rounds))
            ours = min(ours, best_seconds(norm, x, args.reps, args.rounds))
        out[name] = {"torch_std_ms": base * 1e3, "unbiased_std_ms": ours * 1e3, "ratio": base / ours}
        print(f"  {name:40s} torch.std {base * 1e3:8.2f}   LayerNorm {ours * 1e3:8.2f}   {base / ours:5.2f}x")
    return out


if __name__ == "__main__":
    main()
