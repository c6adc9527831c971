"""Training speed of MCAN and MCAN+PA at the paper's sizes, its FLOP utilisation and MFU.

    python -m benchmarks.bench_train                      # batch 64 (the paper's), on the GPU if there is one
    python -m benchmarks.bench_train --device cuda --compile     # bf16, SDPA's choice of kernel, + torch.compile
    python -m benchmarks.bench_train --device cuda --attention efficient --peak-tflops 989.4
    python -m benchmarks.bench_train --quick              # batch 8, 2 timed steps
    python -m benchmarks.bench_train --tiny --compile     # a tiny model: checks the script, measures nothing

A training step is forward + backward + Adam on a random batch in the data interface's format (14
tokens, 100 regions), under autocast in the run's precision; its FLOPs are counted with
torch.utils.flop_counter (attention through the math kernel, whose matmuls it counts: the FLOPs are
the model's whichever kernel runs). Two ratios of the achieved FLOP/s: utilisation, against a dense
square matmul measured in the same run on the same device and dtype (the in-run baseline), and MFU,
against the device's nominal dense peak for the precision (`benchmarks/peaks.py`, or --peak-tflops).
The attention kernels that ran are read from a profile of one step (the aten op SDPA dispatched to).
With --compile, `torch.compile(model)` is timed in the same run: its first step (compiling) apart
from the steps after it.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import repro.nn.attention
from benchmarks.peaks import matmul_kind, nominal_peak
from repro.errors import ReproError
from repro.families import load_recipe
from repro.families.mcan_pa.build import PAPER_NUM_ANSWERS, PAPER_NUM_TOKENS, build_model, example_batch
from repro.nn.measure import count_flops
from repro.train.losses import compute_loss
from repro.train.trainer import _autocast, build_optimizer, matmul_precision, resolve_precision

MODELS = {
    "MCAN": {"arch": "mcan"},
    "MCAN+PA": {"arch": "mcan", "positional": ["pwa", "poa", "pma"], "fusion": "eq8"},
}
# --tiny: (sizes, tokens, answers) small enough to run and compile in seconds on a CPU
TINY_SIZES = {
    "d_model": 32,
    "layers": 1,
    "heads": 2,
    "ffn": 64,
    "flat_out": 64,
    "flat_mlp": 32,
    "embed_dim": 16,
    "feature_dim": 32,
    "geometry_dim": 16,
    "max_boxes": 20,
}
TINY = (TINY_SIZES, 100, 10)
PAPER = (None, PAPER_NUM_TOKENS, PAPER_NUM_ANSWERS)

ATTENTION_BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
# The aten op each SDPA backend runs as; a profile of a step shows which ran.
SDPA_OPS = {
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def resolve_device(name: str | None) -> torch.device:
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ReproError(f"unknown device {name!r}; use cpu or cuda") from None
    if device.type not in ("cpu", "cuda"):
        raise ReproError(f"device {name!r} is not supported here; use cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ReproError(
            f"--device {name}: CUDA is not available (torch {torch.__version__}); "
            "run on a machine with a GPU and a CUDA build of torch, or use --device cpu"
        )
    return device


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"CPU ({threads} thread{'s' if threads > 1 else ''})"


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, repeats: int = 5) -> float:
    """FLOP/s of a size x size matmul (best of `repeats`)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def attention_context(choice: str):
    """`auto` leaves the choice to SDPA; otherwise only the named backend may run."""
    return nullcontext() if choice == "auto" else sdpa_kernel([ATTENTION_BACKENDS[choice]])


def setup(name: str, scale: tuple, batch_size: int, device: torch.device):
    """A fresh model (same initialisation every call), its Adam, and a random batch with BCE targets."""
    sizes, num_tokens, num_answers = scale
    torch.manual_seed(0)
    model = build_model(MODELS[name], num_tokens, num_answers, sizes=sizes).to(device)
    batch = example_batch(batch_size, sizes, num_tokens=num_tokens, device=device)
    batch["target"] = (torch.rand(batch_size, num_answers, device=device) > 0.999).float()
    optimizer = build_optimizer(load_recipe("mcan-pa/vqa2"), model.parameters())
    model.train()
    return model, optimizer, batch


def train_step(model, optimizer, batch, precision: str, device: torch.device) -> None:
    with matmul_precision(precision), _autocast(precision, device):
        logits = model(batch)
    loss = compute_loss("bce-sum", logits, batch["target"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def timed_steps(step, n: int, device: torch.device, tick) -> list[float]:
    times = []
    for _ in range(n):
        _sync(device)
        start = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
        tick()
    return times


def attention_ops(step) -> list[str]:
    """The SDPA backends one call of `step` ran, read from a profile of its aten ops."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return sorted({SDPA_OPS[e.key] for e in prof.key_averages() if e.key in SDPA_OPS})


def sdpa_refusal(error: RuntimeError, caught: list) -> str:
    """One line: why SDPA ran no kernel, with its own reasons (it gives them as warnings)."""
    attention_file = Path(repro.nn.attention.__file__).resolve()
    reasons = ""
    for w in caught:
        text = str(w.message).split(" (Triggered internally")[0].strip()
        if Path(w.filename).resolve() != attention_file or not text or text in reasons:
            continue
        reasons += (" " if reasons.endswith(":") else "; " if reasons else "") + text
    return first_line(error) + (f" ({reasons})" if reasons else "")


def step_numbers(times: list[float], batch_size: int, flops: int) -> dict:
    step_s = sorted(times)[len(times) // 2]
    return {
        "steps_per_s": 1 / step_s,
        "samples_per_s": batch_size / step_s,
        "flops_per_step": flops,
        "achieved_flops": flops / step_s,
    }


def bench_eager(name: str, args, scale, device, precision: str, tick) -> dict:
    """Median step time of the eager model and the attention backends it ran."""
    row = {"model": name, "mode": "eager", "batch": args.batch}
    model, optimizer, batch = setup(name, scale, args.batch, device)
    row["flops_per_step"] = count_flops(model, batch, backward=True)

    def step():
        train_step(model, optimizer, batch, precision, device)

    with warnings.catch_warnings(record=True) as caught, attention_context(args.attention):
        warnings.simplefilter("always")
        try:
            times = timed_steps(step, args.warmup + args.steps, device, tick)[args.warmup :]
            row["attention_backends"] = attention_ops(step)
        except RuntimeError as error:
            if "kernel" not in str(error) and "backend" not in str(error):
                raise
            row["error"] = f"--attention {args.attention} cannot run {name}: {sdpa_refusal(error, caught)}"
            return row
    return row | step_numbers(times, args.batch, row["flops_per_step"])


def reset_dynamo() -> None:
    """Forget earlier compiles and dynamo's counters (its reset keeps the counters)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


def dynamo_notes() -> dict:
    """What dynamo did not compile since reset_dynamo(): graph breaks and the constructs it left to eager
    (first lines of its messages, e.g. nn.LSTM's "Attempted to wrap RNN, GRU, or LSTM")."""
    from torch._dynamo.utils import counters

    unsupported = sorted({reason.strip().splitlines()[0] for reason in counters.get("unimplemented", {})})
    return {"graph_breaks": sum(counters.get("graph_break", {}).values()), "dynamo_unsupported": unsupported}


def bench_compiled(name: str, args, scale, device, precision: str, flops: int, tick) -> dict:
    """torch.compile(model): its first step (compiling) apart from the median of the steps after it."""
    row = {"model": name, "mode": "compiled", "batch": args.batch, "compile_mode": args.compile_mode}
    model, optimizer, batch = setup(name, scale, args.batch, device)
    try:
        reset_dynamo()
        compiled = torch.compile(model, mode=args.compile_mode)

        def step():
            train_step(compiled, optimizer, batch, precision, device)

        with attention_context(args.attention):
            first, *rest = timed_steps(step, 1 + args.warmup + args.steps, device, tick)
            row["attention_backends"] = attention_ops(step)
    except Exception as error:  # dynamo and inductor fail in many exception types
        row["error"] = f"torch.compile failed for {name}: {first_line(error)}"
        return row
    row |= {"compile_s": first} | dynamo_notes()
    return row | step_numbers(rest[args.warmup :], args.batch, flops)


def add_ratios(rows: list[dict], matmul_flops: float, peak_flops: float | None) -> None:
    """Utilisation (of the in-run matmul), MFU (of the nominal peak) and speed relative to the first row."""
    measured = [r for r in rows if "steps_per_s" in r]
    for r in measured:
        r["utilisation"] = r["achieved_flops"] / matmul_flops
        r["mfu"] = None if peak_flops is None else r["achieved_flops"] / peak_flops
        r["relative_speed"] = r["steps_per_s"] / measured[0]["steps_per_s"]


def render(console, rows: list[dict], title: str) -> None:
    from rich.table import Table

    measured = [r for r in rows if "steps_per_s" in r]
    table = Table(title=title)
    if not measured:
        console.print(title + ": nothing measured", highlight=False, soft_wrap=True)
    first = measured[0]["model"] + " " + measured[0]["mode"] if measured else "first"
    columns = ["model", "mode", "batch", "steps/s", "samples/s", "GFLOP/step", "GFLOP/s", "of matmul", "MFU"]
    for col in columns + ["attention", "compile s", f"× {first}"]:
        table.add_column(col, justify="left" if col in ("model", "mode", "attention") else "right")
    for r in measured:
        table.add_row(
            r["model"],
            r["mode"],
            str(r["batch"]),
            f"{r['steps_per_s']:.3f}",
            f"{r['samples_per_s']:.1f}",
            f"{r['flops_per_step'] / 1e9:.1f}",
            f"{r['achieved_flops'] / 1e9:.1f}",
            f"{r['utilisation']:.1%}",
            "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}",
            ", ".join(r.get("attention_backends", [])) or ("in graph" if r["mode"] == "compiled" else "-"),
            f"{r['compile_s']:.1f}" if "compile_s" in r else "-",
            f"{r['relative_speed']:.2f}",
        )
    if measured:
        console.print(table)
    for r in rows:
        if "error" in r:
            console.print(r["error"], markup=False, highlight=False, soft_wrap=True)
        elif r["mode"] == "compiled":
            left = "; ".join(r.get("dynamo_unsupported", [])) or "nothing"
            line = f"{r['model']} compiled: {r.get('graph_breaks', 'n/a')} graph break(s); left to eager: {left}"
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_train", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="the paper's batch size by default")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per model (median reported)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "tf32", "bf16", "fp16"])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated: {', '.join(MODELS)}")
    parser.add_argument(
        "--attention",
        default="auto",
        choices=["auto", *ATTENTION_BACKENDS],
        help="SDPA backend allowed in the timed steps (auto: SDPA chooses)",
    )
    parser.add_argument("--compile", action="store_true", help="also time torch.compile(model)")
    parser.add_argument("--compile-mode", default=None, help="torch.compile mode (default, reduce-overhead, ...)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's dense peak, for MFU")
    parser.add_argument("--quick", action="store_true", help="batch 8, 2 timed steps")
    parser.add_argument("--tiny", action="store_true", help="a tiny model, to check the script (not a measurement)")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.steps = 8, 2
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    for option in ("batch", "steps", "threads"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1")
    if args.peak_tflops is not None and args.peak_tflops <= 0:
        parser.error("--peak-tflops must be positive")
    return args


def run(args: argparse.Namespace, console) -> dict:
    from rich.progress import Progress

    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    precision = resolve_precision(args.precision, device)
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    where, kind = device_name(device), matmul_kind(precision)
    peak, peak_source = nominal_peak(where, kind, args.peak_tflops)
    matmul = matmul_peak(device, dtype, 4096 if device.type == "cuda" else 1024)
    scale = TINY if args.tiny else PAPER
    rows = []
    per_model = (1 + args.compile) * (args.warmup + args.steps) + args.compile
    with Progress(console=console, transient=True) as progress:
        for name in args.models:
            task = progress.add_task(f"{name} batch {args.batch}", total=per_model)

            def tick(task=task):
                progress.advance(task)

            rows.append(bench_eager(name, args, scale, device, precision, tick))
            if args.compile and "error" not in rows[-1]:
                flops = rows[-1]["flops_per_step"]
                rows.append(bench_compiled(name, args, scale, device, precision, flops, tick))
    add_ratios(rows, matmul, peak)
    report = {
        "device": where,
        "device_type": device.type,
        "precision": precision,
        "matmul_precision": kind,
        "attention": args.attention,
        "matmul_peak_flops": matmul,
        "peak_flops": peak,
        "peak_source": peak_source,
        "compile": {"tried": args.compile, "mode": args.compile_mode},
        "scale": "tiny" if args.tiny else "paper",
        "torch": torch.__version__,
        "rows": rows,
    }
    title = f"training steps on {where}, {precision}, attention {args.attention}; matmul {matmul / 1e9:.1f} GFLOP/s"
    render(console, rows, title)
    if peak is None:
        hint = f"MFU n/a: {peak_source}; give its dense {kind} TFLOP/s with --peak-tflops X"
        console.print(hint, highlight=False, soft_wrap=True)
    else:
        console.print(f"MFU against {peak / 1e12:g} TFLOP/s ({peak_source})", highlight=False)
    return report


def main(argv: list[str] | None = None) -> list[dict]:
    from rich.console import Console

    args = parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=140)
    try:
        report = run(args, console)
    except ReproError as error:  # a setting it cannot run with: one line, non-zero exit
        sys.exit(f"error: {error}")
    except torch.OutOfMemoryError as error:
        sys.exit(f"error: out of memory at batch {args.batch} ({first_line(error)}); try a smaller --batch")
    if args.json:
        from repro.utils import write_json_atomic

        write_json_atomic(args.json, report)
    return report["rows"]


if __name__ == "__main__":
    main()
