"""`python -m benchmarks.bench_train`: peaks and MFU, the attention backend report, the torch.compile
report and its failure, bad devices. Runs the tiny model on one CPU thread (the numbers are not checked,
only that each is reported)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from benchmarks import bench_train
from benchmarks.peaks import matmul_kind, nominal_peak

TINY = ["--tiny", "--device", "cpu", "--threads", "1", "--batch", "2", "--steps", "1", "--warmup", "0"]


@pytest.fixture(autouse=True)
def _keep_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _run(tmp_path, *extra: str) -> dict:
    out = tmp_path / "bench.json"
    bench_train.main([*TINY, "--json", str(out), *extra])
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    ("name", "kind", "tflops", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4, "H100 SXM"),
        ("NVIDIA H100 PCIe", "bf16", 756.5, "H100 PCIe"),
        ("NVIDIA H100 NVL", "tf32", 417.5, "H100 NVL"),
        ("NVIDIA H200", "fp16", 989.4, "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0, "A100"),
        ("NVIDIA A10", "bf16", 125.0, "A10"),
        ("NVIDIA L40S", "fp32", 91.6, "L40S"),
        ("NVIDIA GeForce RTX 4090", "bf16", 165.2, "RTX 4090"),
        ("NVIDIA GeForce RTX 3090", "tf32", 35.6, "RTX 3090"),
    ],
)
def test_nominal_peak_matches_the_device_name(name, kind, tflops, label):
    peak, source = nominal_peak(name, kind)
    assert peak == pytest.approx(tflops * 1e12)
    assert label in source and kind in source


def test_nominal_peak_unknown_device_and_given_by_hand():
    assert nominal_peak("NVIDIA A10G", "bf16")[0] is None  # not the A10's datasheet
    assert nominal_peak("NVIDIA GeForce RTX 3090 Ti", "bf16")[0] is None
    assert nominal_peak("CPU (2 threads)", "fp32") == (None, "no nominal fp32 peak known for CPU (2 threads)")
    assert nominal_peak("NVIDIA A100-SXM4-80GB", "bf16", given_tflops=250.0) == (250e12, "--peak-tflops 250")


def test_fp32_is_held_to_the_tf32_peak_when_torch_allows_tf32():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert matmul_kind("fp32") == "fp32"
        torch.set_float32_matmul_precision("high")
        assert matmul_kind("fp32") == "tf32"
        assert matmul_kind("bf16") == "bf16"
    finally:
        torch.set_float32_matmul_precision(before)


def test_reports_steps_attention_backend_and_mfu(tmp_path, capsys):
    report = _run(tmp_path, "--peak-tflops", "0.5", "--models", "MCAN+PA")
    (row,) = report["rows"]
    assert report["device_type"] == "cpu" and report["precision"] == "fp32" and report["attention"] == "auto"
    assert report["peak_flops"] == 0.5e12 and report["peak_source"] == "--peak-tflops 0.5"
    assert row["mode"] == "eager" and row["steps_per_s"] > 0 and row["flops_per_step"] > 0
    assert row["mfu"] == pytest.approx(row["achieved_flops"] / 0.5e12)
    assert row["utilisation"] == pytest.approx(row["achieved_flops"] / report["matmul_peak_flops"])
    # on a CPU with dropout in training, SDPA runs the math kernel (its fused CPU kernel takes no dropout)
    assert row["attention_backends"] == ["math"]
    assert "MFU against 0.5 TFLOP/s (--peak-tflops 0.5)" in capsys.readouterr().out


def test_mfu_is_na_without_a_peak(tmp_path, capsys):
    report = _run(tmp_path, "--models", "MCAN")
    assert report["peak_flops"] is None and report["rows"][0]["mfu"] is None
    out = capsys.readouterr().out
    assert "n/a" in out and "give its dense fp32 TFLOP/s with --peak-tflops X" in out


def test_a_backend_that_cannot_run_the_model_is_one_line(tmp_path, capsys):
    report = _run(tmp_path, "--attention", "flash", "--models", "MCAN+PA", "--compile")
    (row,) = report["rows"]  # no compiled row after the eager one failed
    assert "steps_per_s" not in row
    assert row["error"].startswith("--attention flash cannot run MCAN+PA: RuntimeError:")
    out = capsys.readouterr().out
    assert row["error"] in out and "Traceback" not in out


def test_compile_failure_keeps_the_eager_numbers(tmp_path, monkeypatch, capsys):
    def refuse(model, **kwargs):
        raise RuntimeError("Attempted to wrap RNN, GRU, or LSTM\n  from user code: ...")

    monkeypatch.setattr(torch, "compile", refuse)
    report = _run(tmp_path, "--compile", "--models", "MCAN")
    eager, compiled = report["rows"]
    assert eager["mode"] == "eager" and eager["steps_per_s"] > 0
    assert compiled == {
        "model": "MCAN",
        "mode": "compiled",
        "batch": 2,
        "compile_mode": None,
        "error": "torch.compile failed for MCAN: RuntimeError: Attempted to wrap RNN, GRU, or LSTM",
    }
    assert report["compile"] == {"tried": True, "mode": None}
    assert compiled["error"] + "\n" in capsys.readouterr().out


def test_compiled_steps_are_timed_apart_from_the_first(tmp_path, monkeypatch):
    calls = []

    def passthrough(model, mode=None):  # stands in for a compiler: the steps run the model as given
        calls.append(mode)
        return model

    monkeypatch.setattr(torch, "compile", passthrough)
    report = _run(tmp_path, "--compile", "--compile-mode", "reduce-overhead", "--models", "MCAN")
    eager, compiled = report["rows"]
    assert calls == ["reduce-overhead"]
    assert compiled["mode"] == "compiled" and compiled["compile_mode"] == "reduce-overhead"
    assert compiled["compile_s"] > 0 and compiled["steps_per_s"] > 0
    assert compiled["flops_per_step"] == eager["flops_per_step"]
    assert compiled["relative_speed"] == pytest.approx(compiled["steps_per_s"] / eager["steps_per_s"])
    assert compiled["attention_backends"] == ["math"]
    assert compiled["graph_breaks"] == 0 and compiled["dynamo_unsupported"] == []


def test_dynamo_notes_name_what_was_left_to_eager():
    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 4, batch_first=True)

        def forward(self, x):
            return self.lstm(x)[0].sum()

    bench_train.reset_dynamo()
    torch.compile(Recurrent(), backend="eager")(torch.randn(2, 3, 4))
    notes = bench_train.dynamo_notes()
    bench_train.reset_dynamo()
    assert notes["dynamo_unsupported"] == ["Attempted to wrap RNN, GRU, or LSTM"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where there is no GPU")
def test_cuda_without_a_gpu_is_one_line_and_non_zero():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_train", "--device", "cuda"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: --device cuda: CUDA is not available (torch {torch.__version__}); "
        "run on a machine with a GPU and a CUDA build of torch, or use --device cpu"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "tpu"], "error: unknown device 'tpu'; use cpu or cuda"),
        (["--device", "cpu", "--precision", "fp16"], "error: precision fp16 needs a GPU; use fp32 or bf16 on a CPU"),
    ],
)
def test_bad_device_or_precision_exits_with_one_line(argv, message):
    with pytest.raises(SystemExit) as exit_:
        bench_train.main(argv)
    assert exit_.value.code == message


def test_options_are_checked(capsys):
    for argv in (["--attention", "sparse"], ["--peak-tflops", "0"], ["--models", "VQA"], ["--threads", "0"]):
        with pytest.raises(SystemExit) as exit_:
            bench_train.parse_args(argv)
        assert exit_.value.code == 2
    args = bench_train.parse_args(["--quick", "--attention", "efficient", "--compile", "--peak-tflops", "989.4"])
    assert (args.batch, args.steps, args.attention, args.compile, args.peak_tflops) == (8, 2, "efficient", True, 989.4)


def test_step_flops_count_attention_whichever_kernel_would_run():
    """count_flops runs SDPA through the math kernel, so q·kᵀ and the map times v are counted (2 FLOPs a MAC)."""
    from repro.nn.attention import MultiHeadAttention
    from repro.nn.measure import count_flops

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = MultiHeadAttention(64, heads=4)

        def forward(self, batch):
            x = batch["x"]
            return self.attention(x, x, x, bias=batch["bias"])

    b, n, d = 2, 10, 64
    batch = {"x": torch.randn(b, n, d), "bias": torch.randn(1, 4, n, n, requires_grad=True)}
    linears, attention = 4 * 2 * b * n * d * d, 2 * 2 * b * n * n * d
    assert count_flops(Wrapped(), batch) == linears + attention
