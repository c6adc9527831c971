"""Nominal dense peak FLOP/s of the GPUs a user is likely to train on, for model FLOP utilisation (MFU).

The vendors' datasheets list tensor-core numbers "with sparsity" (2:4 structured sparsity), twice the
dense rate a training step can reach; the numbers here are the dense ones. Keys are the precision a
step's matmuls run in: "bf16" and "fp16" (tensor cores, FP32 accumulation), "tf32" (tensor cores),
"fp32" (CUDA cores, no tensor cores).

Sources (TFLOP/s, dense = the sparse number / 2):
- H100 SXM5, PCIe, NVL: NVIDIA H100 Tensor Core GPU datasheet (BF16/FP16 1,979 / 1,513 / 1,671 sparse;
  TF32 989 / 756 / 835 sparse; FP32 67 / 51 / 60). SXM5 dense values as in the Hopper whitepaper.
- H200 SXM, NVL: NVIDIA H200 Tensor Core GPU datasheet (same tensor rates as H100 SXM and H100 NVL).
- A100 (SXM4 and PCIe, 40 and 80 GB): NVIDIA A100 datasheet (BF16/FP16 312, TF32 156, FP32 19.5).
- L40S: NVIDIA L40S datasheet (BF16/FP16 733 sparse, TF32 366 sparse, FP32 91.6).
- A10: NVIDIA A10 datasheet (BF16/FP16 250 sparse, TF32 125 sparse, FP32 31.2).
- GeForce RTX 4090: NVIDIA Ada Lovelace architecture whitepaper, appendix table (FP16/BF16 tensor with
  FP32 accumulate 165.2 dense, TF32 82.6, FP32 82.6).
- GeForce RTX 3090: NVIDIA Ampere GA102 architecture whitepaper (FP16/BF16 tensor with FP32 accumulate
  71 dense, TF32 35.6, FP32 35.6).
"""

from __future__ import annotations

import re

import torch

# (pattern searched in torch.cuda.get_device_name, label, dense TFLOP/s per precision); first match wins,
# so the more specific names come first ("H100 NVL" before "H100", "A100" never matches "A10").
NOMINAL_PEAKS: list[tuple[str, str, dict[str, float]]] = [
    (r"H100.*NVL", "H100 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    (r"H100.*PCIe", "H100 PCIe", {"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.0}),
    (r"H100", "H100 SXM", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"H200.*NVL", "H200 NVL", {"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    (r"H200", "H200 SXM", {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9}),
    (r"A100", "A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    (r"L40S", "L40S", {"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6}),
    (r"\bA10$", "A10", {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}),
    (r"RTX 4090$", "GeForce RTX 4090", {"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6}),
    (r"RTX 3090$", "GeForce RTX 3090", {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6}),
]


def matmul_kind(precision: str) -> str:
    """The peak a step in `precision` is held to: fp32 counts as tf32 when torch lets matmuls use TF32."""
    if precision != "fp32":
        return precision
    return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def nominal_peak(device_name: str, kind: str, given_tflops: float | None = None) -> tuple[float | None, str]:
    """(peak FLOP/s, where it comes from) for `device_name` at `kind`; (None, why not) when unknown."""
    if given_tflops is not None:
        return given_tflops * 1e12, f"--peak-tflops {given_tflops:g}"
    for pattern, label, peaks in NOMINAL_PEAKS:
        if re.search(pattern, device_name.strip()):
            return peaks[kind] * 1e12, f"{label} datasheet, {kind} dense {peaks[kind]:g} TFLOP/s"
    return None, f"no nominal {kind} peak known for {device_name}"
