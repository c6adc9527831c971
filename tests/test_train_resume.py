"""Checkpoints and resume: an interrupted run continued with resume=True ends where an uninterrupted one does."""

import json
import os
import signal

import pytest
import torch

from repro.errors import ReproError
from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import TrainingInterrupted, checkpoint, fit, predict
from repro.train.checkpoint import load_checkpoint
from repro.train.distributed import use_device
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA

RECIPE = """\
optimizer: {name: adam, betas: [0.9, 0.98], eps: 1.0e-9}
schedule: {name: mcan, base_lr: 0.001, warmup_epochs: 1, decay_epochs: [2], decay_rate: 0.2}
epochs: 3
batch_size: 8
loss: bce-sum
seed: 5
"""


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """The trainer's arithmetic and records on the CPU, wherever these run (tests/test_gpu_runs.py resumes on a GPU)."""
    with use_device("cpu"):
        yield


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    return load_recipe(str(path))


def new_model():
    torch.manual_seed(0)
    return build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=TINY_SIZES)  # dropout 0.1


def read_log(workdir):
    return [json.loads(line) for line in (workdir / "train.jsonl").read_text().splitlines()]


def interrupt_at(stop_step, signum):
    def hook(step):
        if step == stop_step:
            os.kill(os.getpid(), signum)

    return hook


@pytest.mark.slow
@pytest.mark.parametrize("stop_step, signum", [(4, signal.SIGINT), (6, signal.SIGTERM)])
def test_resume_equals_uninterrupted(tmp_path, recipe, stop_step, signum):
    data = TinyVQA(22)  # 3 steps per epoch, the last one short
    full = new_model()
    state = fit(full, data, recipe, tmp_path / "full", progress=False)
    assert state.step == 9 and state.global_batch == 8 and state.world_size == 1 and state.gpu_count == 0

    part = new_model()
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN where the suite runs under nohup
    with pytest.raises(TrainingInterrupted, match="--resume"):
        fit(part, data, recipe, tmp_path / "part", progress=False, on_step=interrupt_at(stop_step, signum))
    saved = load_checkpoint(tmp_path / "part" / "last.pt")
    assert saved["step"] == stop_step
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored

    resumed = new_model()  # fresh weights: everything must come from the checkpoint
    state = fit(resumed, data, recipe, tmp_path / "part", resume=True, progress=False)
    assert state.resumed_from == {"epoch": saved["epoch"], "step": stop_step}
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    log_full, log_part = read_log(tmp_path / "full"), read_log(tmp_path / "part")
    assert [r["step"] for r in log_part] == list(range(1, 10))
    assert [r["loss"] for r in log_part] == [r["loss"] for r in log_full]
    assert [r["lr"] for r in log_full] == pytest.approx([5e-4] * 3 + [1e-3] * 3 + [2e-4] * 3)


@pytest.mark.slow
def test_training_changes_weights_and_lowers_the_loss(tmp_path, recipe):
    data = TinyVQA(16)
    model = new_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fit(model, data, recipe.replace(epochs=6), tmp_path, progress=False)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    losses = [r["loss"] for r in read_log(tmp_path)]
    assert sum(losses[-2:]) < sum(losses[:2])
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["step"] == 12 and state["global_batch"] == 8


def test_resume_of_a_finished_run_trains_nothing_more(tmp_path, recipe):
    data = TinyVQA(8)
    model = new_model()
    fit(model, data, recipe.replace(epochs=1), tmp_path, progress=False)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    first = json.loads((tmp_path / "state.json").read_text())
    state = fit(model, data, recipe.replace(epochs=1), tmp_path, resume=True, progress=False)
    assert state.step == 1 and all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    # what the record keeps of training is the same as the uninterrupted run's, the final loss included
    assert state.summary() == {k: first[k] for k in ("final_loss", "global_batch")} | {"steps": 1, "gpus": 0}
    assert state.final_loss is not None


def test_generator_states_loaded_onto_a_gpu_are_restored_from_the_cpu(monkeypatch):
    # load_checkpoint(map_location=cuda) moves the saved byte tensors to the GPU; torch's generators take the CPU's
    class OnTheGPU(torch.Tensor):
        def cpu(self, *args, **kwargs):
            return self.as_subclass(torch.Tensor)

    def cpu_only(state):
        if isinstance(state, OnTheGPU):
            raise TypeError("RNG state must be a torch.ByteTensor")  # torch's answer to a CUDA tensor
        real(state)

    real = torch.set_rng_state
    saved = checkpoint.rng_state()
    monkeypatch.setattr(torch, "set_rng_state", cpu_only)
    expected = torch.rand(3)
    checkpoint.set_rng_state({**saved, "torch": saved["torch"].as_subclass(OnTheGPU)})
    assert torch.equal(torch.rand(3), expected)


def test_resume_with_a_different_batch_is_refused(tmp_path, recipe):
    data = TinyVQA(8)
    fit(new_model(), data, recipe.replace(epochs=1), tmp_path, progress=False)
    with pytest.raises(ReproError, match="global batch"):
        fit(new_model(), data, recipe.replace(epochs=2, batch_size=4), tmp_path, resume=True, progress=False)


def test_corrupt_checkpoint_is_a_clear_error(tmp_path, recipe):
    (tmp_path / "last.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ReproError, match="last.pt"):
        fit(new_model(), TinyVQA(8), recipe, tmp_path, resume=True, progress=False)


def test_predict_returns_ids_and_logits_in_order():
    data = TinyVQA(5)
    model = new_model()
    ids, logits = predict(model, data, batch_size=2, progress=False)
    assert ids.tolist() == [1000, 1001, 1002, 1003, 1004] and logits.shape == (5, NUM_ANSWERS)
    model.eval()
    with torch.no_grad():
        assert torch.allclose(logits[:2], model({k: torch.stack([data[i][k] for i in range(2)]) for k in data[0]}))
    ids, top = predict(model, data, batch_size=3, top_k=1, progress=False)
    assert top[:, 0].tolist() == logits.argmax(-1).tolist()


def test_a_signal_during_the_epoch_end_checkpoint_is_honoured(tmp_path, recipe, monkeypatch):
    from repro.train import checkpoint as ckpt

    real = ckpt.save_checkpoint

    def save_then_signal(*args, **kwargs):
        real(*args, **kwargs)
        if kwargs.get("step_in_epoch") == 0 and kwargs.get("epoch") == 1:  # the end of the first epoch
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(ckpt, "save_checkpoint", save_then_signal)
    with pytest.raises(TrainingInterrupted, match="after epoch 1"):
        fit(new_model(), TinyVQA(22), recipe, tmp_path / "run", progress=False)
    assert load_checkpoint(tmp_path / "run" / "last.pt")["epoch"] == 1


def test_max_steps_stops_a_short_run(tmp_path, recipe):
    state = fit(new_model(), TinyVQA(22), recipe.replace(max_steps=4), tmp_path / "short", progress=False)
    assert state.step == 4 and [r["step"] for r in read_log(tmp_path / "short")] == [1, 2, 3, 4]


def test_lr_groups_of_a_model_scale_the_schedules_rate(tmp_path):
    """A model's `lr_groups()` (parameter groups with an `lr_scale`) train at that multiple of the rate."""

    class TwoParts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fast, self.slow = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)

        def forward(self, batch):
            return self.fast(batch["x"]) + self.slow(batch["x"])

        def lr_groups(self):
            return [
                {"params": self.fast.parameters(), "lr_scale": 1.0},
                {"params": self.slow.parameters(), "lr_scale": 0.1},
            ]

    path = tmp_path / "sgd.yaml"
    path.write_text(
        "optimizer: {name: sgd}\nschedule: {name: constant, base_lr: 0.5}\nepochs: 1\nbatch_size: 4\nloss: bce-mean\n"
    )
    data = [{"x": torch.ones(2), "target": torch.ones(1), "question_id": i} for i in range(4)]
    model = TwoParts()
    with torch.no_grad():
        model.slow.weight.copy_(model.fast.weight)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fit(model, data, load_recipe(str(path)), tmp_path / "run", progress=False)
    fast = (model.fast.weight - before["fast.weight"]).abs().sum()
    slow = (model.slow.weight - before["slow.weight"]).abs().sum()
    assert fast > 0 and torch.isclose(slow, 0.1 * fast, rtol=1e-4)
