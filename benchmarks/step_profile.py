"""What a training step of a unit costs, measured inside the process that trains it (`bench_synthetic`'s children).

`Meter` wraps the trainer's two entry points (`repro.train.fit`, `repro.train.ensemble.fit_ensemble`) while a unit
runs as `repro run` runs it: every training stage it calls (a task's model, a pre-training, a fine-tuning) is
recorded with its CPU seconds (this process's and those of the children it waited for, such as a compiler it ran:
`cpu_seconds`), the steps it ran and the steps its recipe asks for (epochs x steps per epoch: the schedule the
design's stopping rule names). With `profile=True` each stage is first measured on copies of its models, and the
stage then trains as usual:

  flops    FLOPs of one training step of one seed (forward and backward, `torch.utils.flop_counter`; attention
           through the math kernel and oneDNN's LSTM/GRU off, so that their matmuls are counted)
  matmuls  every matmul-family call of a step with its shapes (`aten::mm`, `addmm`, `bmm`, `baddbmm`), replayed
           alone in the same process: the FLOP/s this machine gives the model's own matmul shapes, the baseline
           a step's achieved FLOP/s is a share of
  phases   `torch.profiler` over a few steps after a warm-up: where a step's time goes. data (DataLoader or ready
           tensors), forward (the loss step), backward (the autograd engine's nodes), optimiser (step and
           zero_grad), the rest of the loop (learning rate, moving the batch, clipping, logging); and across
           them, the time spent outside ATen's operators (Python, dispatch, the autograd engine's bookkeeping,
           the profiler's own), against the time inside them
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch

from benchmarks.bench_ensemble import children_cpu

MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
PHASES = ("data", "forward", "backward", "optimiser", "rest of the loop")
WARMUP, ACTIVE = 3, 8  # profiled steps of a stage: after a warm-up


def full_steps(dataset, recipe) -> int:
    """The steps the recipe's schedule trains (one process: no DDP split)."""
    return recipe.epochs * math.ceil(len(dataset) / recipe.batch_size)


class _Matmuls(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the shapes of every matmul-family call."""

    OPS = {
        torch.ops.aten.mm.default,
        torch.ops.aten.addmm.default,
        torch.ops.aten.bmm.default,
        torch.ops.aten.baddbmm.default,
    }

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[Any, list[tuple[int, ...]], torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.OPS:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            self.calls.append((func, [tuple(t.shape) for t in tensors], tensors[-1].dtype))
        return func(*args, **(kwargs or {}))


def matmul_flops(func, shapes) -> int:
    a, b = shapes[-2], shapes[-1]  # addmm/baddbmm: (bias, a, b)
    if func in (torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default):
        return 2 * a[0] * a[1] * a[2] * b[2]
    return 2 * a[0] * a[1] * b[1]


def replay(calls, repeats: int = 5) -> float:
    """FLOP/s of the recorded matmuls run back to back alone (best of `repeats`, CPU seconds of this process)."""
    if not calls:
        return float("nan")
    inputs = [(func, [torch.randn(s, dtype=dtype) for s in shapes]) for func, shapes, dtype in calls]
    flops = sum(matmul_flops(func, shapes) for func, shapes, _ in calls)
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.process_time()
        for func, args in inputs:
            func(*args)
        best = min(best, time.process_time() - start)
    return flops / max(best, 1e-9)


@contextmanager
def _counting():
    """What flop_counter can count: attention through the math kernel, LSTM/GRU without oneDNN (as repro.nn.measure)."""
    import warnings

    from torch.nn.attention import SDPBackend, sdpa_kernel

    with ExitStack() as stack, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
        stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        yield


def classify(prof) -> dict[str, Any]:
    """Per profiled step, milliseconds by phase and inside/outside ATen's operators (see the module's doc)."""
    events = prof.events()
    steps = [e for e in events if e.name.startswith("ProfilerStep")]
    phase_us = dict.fromkeys(PHASES, 0.0)
    inside_us = 0.0
    total_us = sum(e.cpu_time_total for e in steps)

    def phase_of(event) -> str:
        names = []
        while event is not None:
            names.append(event.name)
            event = event.cpu_parent
        for name in reversed(names):
            if name.startswith("enumerate(DataLoader)") or name == "ReadyTensors.batch":
                return "data"
            if name == "forward step":
                return "forward"
            if name.startswith("autograd::engine::evaluate_function"):
                return "backward"
            if name.startswith("Optimizer."):
                return "optimiser"
        return "rest of the loop"

    for event in events:
        if event.name.startswith("ProfilerStep"):
            continue
        if event.cpu_parent is None or event.cpu_parent.name.startswith("ProfilerStep"):
            phase_us[phase_of(event)] += event.cpu_time_total
        if event.name.startswith("aten::"):
            inside_us += event.self_cpu_time_total
    phase_us["rest of the loop"] += sum(e.self_cpu_time_total for e in steps)  # the loop's own Python
    n = max(len(steps), 1)
    return {
        "step_ms": total_us / n / 1e3,
        "phases_ms": {k: v / n / 1e3 for k, v in phase_us.items()},
        "outside_ops_ms": max(total_us - inside_us, 0.0) / n / 1e3,
        "steps": len(steps),
    }


def cpu_seconds() -> float:
    """This process's CPU seconds and those of its children that have ended (a C++ compiler `torch.compile` runs;
    the synthetic scale's DataLoaders start no workers)."""
    return time.process_time() + children_cpu()


def steady_rate(marks: list[float]) -> float | None:
    """CPU seconds a step over the second half of a stage's steps (`marks`: CPU seconds after each step): the rate
    once the first steps' one-time work (allocations, kernels' first calls, caches) is done; None under 4 steps."""
    if len(marks) < 4:
        return None
    half = len(marks) // 2
    return (marks[-1] - marks[half - 1]) / (len(marks) - half)


class Meter:
    """Wraps `repro.train.fit` and `repro.train.ensemble.fit_ensemble` for the life of the `with` block."""

    def __init__(self, profile: bool = False):
        self.profile = profile
        self.stages: list[dict[str, Any]] = []

    def __enter__(self) -> Meter:
        import repro.train
        import repro.train.ensemble
        from repro.train import trainer

        self._saved = (trainer.fit, repro.train.ensemble.fit_ensemble)
        repro.train.fit = trainer.fit = self._wrap(trainer.fit, together=False)
        repro.train.ensemble.fit_ensemble = self._wrap(repro.train.ensemble.fit_ensemble, together=True)
        return self

    def __exit__(self, *exc) -> None:
        import repro.train
        import repro.train.ensemble
        from repro.train import trainer

        trainer.fit, repro.train.ensemble.fit_ensemble = self._saved
        del repro.train.fit  # the package's lazy attribute again

    def _wrap(self, train, together: bool):
        def metered(models, dataset, recipes, workdirs, **kwargs):
            recipe = recipes[0] if together else recipes
            stage: dict[str, Any] = {"recipe": recipe.name, "full_steps": full_steps(dataset, recipe)}
            stage["seeds"] = len(models) if together else 1
            if self.profile:
                stage.update(self._measure(train, together, models, dataset, recipes, kwargs))
            marks: list[float] = []  # this process's CPU seconds after each step
            chained = kwargs.get("on_step")

            def on_step(step: int) -> None:
                marks.append(cpu_seconds())
                if chained is not None:
                    chained(step)

            start = cpu_seconds()
            out = train(models, dataset, recipes, workdirs, **{**kwargs, "on_step": on_step})
            stage["cpu_s"] = cpu_seconds() - start
            stage["steps"] = (out[0] if together else out).step
            stage["steady_cpu_s_per_step"] = steady_rate(marks)
            self.stages.append(stage)
            return out

        return metered

    def _measure(self, train, together: bool, models, dataset, recipes, kwargs) -> dict[str, Any]:
        """FLOPs, matmul shapes and a profile of this stage, on copies of its models (the stage itself trains after)."""
        from torch.profiler import ProfilerActivity, profile, record_function, schedule

        from repro.train.trainer import recipe_loss_step

        base = kwargs.get("loss_step") or recipe_loss_step((recipes[0] if together else recipes).loss)

        def labelled(model, batch):
            with record_function("forward step"):
                return base(model, batch)

        quiet = {**kwargs, "progress": False, "resume": False, "on_step": None, "loss_step": labelled}
        one = (lambda r: [x.replace(max_steps=1) for x in r]) if together else (lambda r: r.replace(max_steps=1))
        out: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as tmp:
            dirs = [Path(tmp) / f"c{k}" for k in range(len(models))] if together else Path(tmp) / "c"
            if not together:  # FLOPs of one seed's step (a seed in the ensemble does the same work)
                from torch.utils.flop_counter import FlopCounterMode

                counter = FlopCounterMode(display=False)
                with _counting(), counter:
                    train(copy.deepcopy(models), dataset, one(recipes), dirs, **quiet)
                out["flops_per_step"] = int(counter.get_total_flops())
            recorder = _Matmuls()
            with recorder:
                train(copy.deepcopy(models), dataset, one(recipes), dirs, **quiet)
            out["matmul_flops_per_s"] = replay(recorder.calls)
            out["matmul_calls"] = len(recorder.calls)
            steps = WARMUP + ACTIVE
            many = [x.replace(max_steps=steps) for x in recipes] if together else recipes.replace(max_steps=steps)
            with profile(
                activities=[ProfilerActivity.CPU],
                schedule=schedule(wait=0, warmup=WARMUP, active=ACTIVE, repeat=1),
                acc_events=True,
            ) as prof:
                train(copy.deepcopy(models), dataset, many, dirs, **{**quiet, "on_step": lambda s: prof.step()})
            out["profile"] = classify(prof)
        return out
