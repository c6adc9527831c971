"""Devices without a GPU: every evaluation path feeds the model on the model's device, and no `.numpy()` meets a
tensor that is not on the CPU. The model is moved to the `meta` device after its (stand-in) training, and every
module checks what reaches its forward: a batch left on the CPU fails there; the first call with everything on
the model's device ends the path (meta tensors hold no values to score). `--device` is checked before anything
runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from repro.cli import app
from repro.errors import ReproError
from repro.families.ace_rpe import tasks
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.data import Collate, tokenizer
from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig, generate_tasks
from repro.families.ace_rpe.tasks_data import Refer, TaskCollate, read_dets
from repro.train import distributed as dist_utils
from tests.families.ace_rpe.tiny import TINY_SIZES


class WrongDevice(AssertionError):
    pass


class Reached(Exception):
    """The model's first forward got everything on its device."""


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def device_checked(model: torch.nn.Module) -> torch.nn.Module:
    """`model` on `meta`, every module asserting that the tensors reaching its forward are there too."""

    def check(module, args, kwargs):
        wrong = [t.device for t in _tensors((args, kwargs)) if t.device.type != "meta"]
        if wrong:
            raise WrongDevice(f"{type(module).__name__} on meta got a tensor on {wrong[0]}")
        raise Reached

    model.to("meta")
    for module in model.modules():
        module.register_forward_pre_hook(check, with_kwargs=True)
    return model


class NotOnCPU(torch.Tensor):
    """Stands in for a GPU tensor: `.numpy()` refuses it, as torch does a CUDA tensor's; `.cpu()` brings it back."""

    def numpy(self, *args, **kwargs):
        raise WrongDevice(".numpy() on a tensor that is not on the CPU")

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor)


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    root = generate_tasks(
        tmp_path_factory.mktemp("tasks"),
        TaskGeneratorConfig.from_mapping({"seed": 2, "train_items": 2, "test_items": 2}),
    )
    return root, tokenizer(root / "vocab")


def _ctx(tmp_path: Path):
    config = ALBEFConfig(arch="albef")
    return SimpleNamespace(
        seed=0,
        config=config,
        settings={},
        workdir=tmp_path,
        device=None,
        row=SimpleNamespace(name="row"),
        predictions_file=lambda split: tmp_path / f"{split}.json",
    )


def _trained_elsewhere(ctxs, models, *args, **kwargs):
    """`_fit` as on a GPU node: each seed's model ends on a device that is not the CPU."""
    for model in models:
        device_checked(model)
    return [{"steps": 1, "final_loss": 0.0} for _ in models]


def _weights():
    torch.manual_seed(0)
    return build_model(ALBEFConfig(arch="albef"), TINY_SIZES, task="retrieval").state_dict()


@pytest.mark.parametrize("task", ["snli-ve", "vqa", "grounding"])
def test_ace_rpe_evaluation_feeds_the_model_on_its_device(task, task_files, tmp_path, monkeypatch):
    root, tok = task_files
    monkeypatch.setattr(tasks, "_fit", _trained_elsewhere)
    ctx, size = _ctx(tmp_path), TINY_SIZES["image_size"]
    with pytest.raises(Reached):
        if task == "vqa":  # the heads take a row's seeds: here one
            tasks.vqa([ctx], root, [_weights()], TINY_SIZES, TaskCollate(tok, 16), size, tok)
        elif task == "grounding":
            tasks.grounding([ctx], root, [_weights()], TINY_SIZES, Collate(tok, 16), size)
        else:
            tasks.classify([ctx], task, root, root, [_weights()], TINY_SIZES, TaskCollate(tok, 16), size)


def test_grounding_heat_maps_reach_numpy_on_the_cpu(task_files):
    root, _ = task_files
    refer, dets = Refer(root / "refcoco+"), read_dets(root / "refcoco+" / "dets.json")
    entries = json.loads((root / "refcoco+_val.json").read_text())
    grids = [torch.rand(4, 4).as_subclass(NotOnCPU) for _ in entries]
    result = tasks.score_heatmaps(grids, [e["ref_id"] for e in entries], refer, dets)
    assert "val" in result.aggregate


def test_psac_times_its_epoch_on_the_units_device(monkeypatch):
    from repro import specs
    from repro.families.psac import tasks as psac_tasks
    from repro.nn import measure

    seen = {}

    def timed(model, batch, loss_fn, optimizer, **kwargs):
        seen["model"] = dist_utils.model_device(model).type
        seen["batch"] = {t.device.type for t in batch.values()}
        return 0.5

    monkeypatch.setattr(measure, "train_step_time", timed)
    spec = specs.resolve("psac-table4-bilstm")
    row = next(r for r in spec.rows if r.config is not None)
    settings = spec.scales["smoke"]
    ctx = SimpleNamespace(
        config=row.config,
        scale="smoke",
        seed=0,
        device=torch.device("meta"),
        settings=settings,
        recipe=lambda overrides: _psac_recipe(spec),
    )
    out = psac_tasks.epoch_seconds(ctx, "action")
    assert seen == {"model": "meta", "batch": {"meta"}} and out["seconds_per_step"] == 0.5


def _psac_recipe(spec):
    from repro.families import load_recipe

    return load_recipe(spec.recipe)


def test_depth_estimation_runs_on_the_models_device():
    from repro.datasets.depth_estimation import estimate

    class GLPN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1, device="meta"))

        def forward(self, pixel_values):
            if pixel_values.device != self.w.device:
                raise WrongDevice(f"pixel values on {pixel_values.device}, the model on {self.w.device}")
            return SimpleNamespace(predicted_depth=torch.ones(1, 4, 4).as_subclass(NotOnCPU))

    processor = lambda images, return_tensors: {"pixel_values": torch.zeros(1, 3, 4, 4)}  # noqa: E731
    from PIL import Image

    depth = estimate(GLPN(), processor, Image.new("RGB", (6, 5)))
    assert depth.shape == (5, 6) and depth.dtype.name == "float32"


def test_device_values_are_checked():
    assert dist_utils.parse_device("cuda:1") == "cuda:1" and dist_utils.parse_device("auto") == "auto"
    for bad in ("gpu", "cuda:", "cuda:x", "cpu:0", ""):
        with pytest.raises(ReproError, match="not a device; use auto, cpu, cuda or cuda:N"):
            dist_utils.parse_device(bad)
    assert dist_utils.device_for(dist_utils.DistEnv(), "cpu") == torch.device("cpu")


def test_cuda_without_a_gpu_is_one_line_naming_the_device(monkeypatch, runner, sandbox):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ReproError, match="--device cuda:1: no CUDA GPU on this machine"):
        dist_utils.device_for(dist_utils.DistEnv(), "cuda:1")
    for command in (["run", "mcan-pa-table5-ablation"], ["train", "mcan-pa-table5-ablation", "--row", "x"]):
        out = runner.invoke(app, [*command, "--scale", "smoke", "--device", "cuda"])
        assert out.exit_code != 0 and "--device cuda: no CUDA GPU on this machine" in out.output, out.output
        assert "Traceback" not in out.output
        out = runner.invoke(app, [*command, "--scale", "smoke", "--device", "tpu"])
        assert out.exit_code != 0 and "--device tpu: not a device" in out.output, out.output


def test_the_units_device_is_the_default_of_every_trainer_it_calls(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with dist_utils.use_device("cpu"):  # what `run_unit` sets from `ctx.device` around a family's run
        assert dist_utils.device_for(dist_utils.DistEnv()) == torch.device("cpu")
    assert dist_utils.device_for(dist_utils.DistEnv(local_rank=1)) == torch.device("cuda", 1)
    with pytest.raises(ReproError, match="use --device cuda"):
        dist_utils.device_for(dist_utils.DistEnv(rank=0, world_size=2), "cuda:1")


def test_a_node_with_fewer_gpus_than_processes_is_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert dist_utils.device_for(dist_utils.DistEnv(rank=0, world_size=2, local_rank=0)) == torch.device("cuda", 0)
    for device in (None, "auto", "cuda"):
        with pytest.raises(ReproError, match=r"process 1 of this node has no GPU: the node has 1; .*-per-node 1"):
            dist_utils.device_for(dist_utils.DistEnv(rank=1, world_size=2, local_rank=1), device)
    assert dist_utils.device_for(dist_utils.DistEnv(rank=1, world_size=2, local_rank=1), "cpu") == torch.device("cpu")


@pytest.mark.parametrize(("device", "backend"), [(None, "nccl"), ("cuda", "nccl"), ("cpu", "gloo")])
def test_torchrun_ranks_join_by_the_backend_of_the_device_they_train_on(monkeypatch, device, backend):
    # --device cpu on a GPU machine trains on the CPU, which nccl cannot reduce over
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    joined, chosen = [], []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(dist_utils.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist_utils.dist, "init_process_group", lambda backend: joined.append(backend))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    env = dist_utils.init_from_env(device=device)
    assert joined == [backend] and env.backend == backend and env.local_rank == 1
    assert chosen == ([torch.device("cuda", 1)] if backend == "nccl" else [])
