"""`python -m benchmarks.bench_gpu_ensemble` on a tiny model on the CPU: both sides train through the trainers a run
uses, the ratio is the ratio of their seed-steps per second, and bad arguments stop with one line (the numbers
themselves are measured on a GPU, not here)."""

import json

import pytest
import torch

from benchmarks import bench_gpu_ensemble


def test_a_tiny_run_compares_seeds_together_with_one_at_a_time(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "gpu.json"
    result = bench_gpu_ensemble.main(
        ["--tiny", "--device", "cpu", "--models", "MCAN", "--together", "2", "--steps", "2", "--warmup", "1",
         "--batch", "2", "--json", str(out)]
    )  # fmt: skip
    (row,) = result["rows"]
    alone, together = row["alone"], row["together"]
    assert row["model"] == "MCAN" and row["seeds"] == 2
    assert alone["seed_steps_per_s"] == pytest.approx(2 / alone["step_s"])
    assert row["ratio"] == pytest.approx(together["seed_steps_per_s"] / alone["seed_steps_per_s"])
    assert json.loads(out.read_text())["rows"][0]["ratio"] == pytest.approx(row["ratio"])
    assert "tiny model: not a measurement" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--together", "1"], "at least 2"),
        (["--together", "two"], "comma-separated whole numbers"),
        (["--models", "VL-BERT"], "--models"),
    ],
)
def test_bad_arguments_stop_with_one_line(argv, words, capsys):
    with pytest.raises(SystemExit) as stop:
        bench_gpu_ensemble.main(["--tiny", "--device", "cpu", *argv])
    assert stop.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_without_cuda_it_says_so(capsys):
    with pytest.raises(SystemExit) as stop:
        bench_gpu_ensemble.main(["--device", "cuda"])
    assert stop.value.code == 2 and "no CUDA device here" in capsys.readouterr().out
