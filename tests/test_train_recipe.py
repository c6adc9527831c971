"""Recipes and schedules: the paper's MCAN+PA schedule, validation with file:line errors, one table per kind of name."""

import pytest

from repro.errors import ReproError
from repro.families import load_recipe
from repro.train.schedule import epoch_rates, mcan_lr


def test_mcan_pa_recipe_is_the_papers_schedule():
    r = load_recipe("mcan-pa/vqa2")
    assert r.epochs == 13 and r.batch_size == 64 and r.loss == "bce-sum" and r.grad_clip is None
    assert r.optimizer["name"] == "adam" and r.optimizer["betas"] == [0.9, 0.98]
    expected = [2.5e-5, 5e-5, 7.5e-5] + [1e-4] * 7 + [2e-5, 2e-5, 4e-6]  # §IV-B
    assert epoch_rates(r.schedule, r.epochs) == pytest.approx(expected)
    assert "test" not in " ".join(r.train_splits)


def test_mcan_lr_generalises():
    assert mcan_lr(0, 1.0, warmup_epochs=1, decay_epochs=[2], decay_rate=0.5) == 0.5
    assert mcan_lr(5, 1.0, warmup_epochs=1, decay_epochs=[2, 4], decay_rate=0.5) == 0.25
    assert mcan_lr(1, 1.0, warmup_epochs=1, decay_epochs=[2, 4], decay_rate=0.5) == 1.0


def _write(tmp_path, text):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return str(path)


GOOD = """\
optimizer: {name: adam, betas: [0.9, 0.98]}
schedule: {name: constant, base_lr: 0.001}
epochs: 2
batch_size: 4
loss: bce-sum
"""


def test_replace_validates(tmp_path):
    r = load_recipe(_write(tmp_path, GOOD))
    assert r.replace(epochs=1, batch_size=2).epochs == 1
    with pytest.raises(ReproError, match="epochs"):
        r.replace(epochs=0)
    with pytest.raises(ReproError, match="unknown"):
        r.replace(speed=3)


@pytest.mark.parametrize(
    "change, line, word",
    [
        (GOOD.replace("epochs: 2", "epochs: 0"), 3, "epochs"),
        (GOOD.replace("adam,", "adamm,"), 1, "adamm"),
        (GOOD.replace("loss: bce-sum", "loss: hinge"), 5, "loss"),
        (GOOD + "train_splits: [train, test-dev]\n", 6, "test"),
        (GOOD + "warmup: 3\n", 6, "warmup"),
        (GOOD.replace("base_lr: 0.001", "base_lr: fast"), 2, "base_lr"),
    ],
)
def test_bad_recipes_point_at_their_line(tmp_path, change, line, word):
    path = _write(tmp_path, change)
    with pytest.raises(ReproError, match=rf"r\.yaml:{line}: .*{word}"):
        load_recipe(path)


@pytest.mark.parametrize(
    "change, line, message",
    [
        (GOOD + "epoch: 3\n", 6, "unknown recipe key 'epoch' (did you mean 'epochs'?)"),
        (GOOD.replace("betas:", "betaz:"), 1, "unknown adam optimizer key 'betaz' (did you mean 'betas'?)"),
        (GOOD.replace("epochs: 2", "epochs: true"), 3, "epochs must be an integer, got True"),
        (GOOD.replace("epochs: 2", "epochs: 2.5"), 3, "epochs must be an integer, got 2.5"),
        (GOOD + "grad_clip: '1.5'\n", 6, "grad_clip must be a number or null, got '1.5'"),
        (GOOD + "train_splits: train\n", 6, "train_splits must be a list of split names, got 'train'"),
        (GOOD + "train_splits:\n- train\n- 3\n", 8, "train_splits must be a list of split names, got 3"),
        (GOOD.replace("batch_size: 4\n", ""), 1, "recipe is missing 'batch_size'"),
        (GOOD + "precision: fp8\n", 6, "precision: must be one of auto, fp32, tf32, bf16, fp16, got 'fp8'"),
        (
            GOOD.replace("base_lr: 0.001", "base_lr: [0.001]"),
            2,
            "schedule: base_lr must be a positive number, got [0.001]",
        ),
        (GOOD.replace("base_lr: 0.001", "base_lr: 0"), 2, "schedule: base_lr must be a positive number, got 0"),
    ],
)
def test_recipes_are_validated_by_pydantic_with_one_line_errors(tmp_path, change, line, message):
    with pytest.raises(ReproError) as caught:
        load_recipe(_write(tmp_path, change))
    assert str(caught.value).endswith(f"r.yaml:{line}: {message}")


def test_a_recipe_is_checked_when_made_and_replaced_and_keeps_its_types(tmp_path):
    from repro.train.recipe import Recipe, RecipeFields

    r = load_recipe(_write(tmp_path, GOOD + "grad_clip: 1\ntrain_splits: [train]\n"))
    assert r.grad_clip == 1.0 and isinstance(r.grad_clip, float) and r.train_splits == ("train",)
    with pytest.raises(ReproError, match="batch_size: must be at least 1, got 0"):
        Recipe(name="x", optimizer=r.optimizer, schedule=r.schedule, epochs=1, batch_size=0, loss="bce-sum")
    with pytest.raises(ReproError, match="train_splits .* names a test split"):
        r.replace(train_splits=("train", "test"))
    assert "epochs" in RecipeFields.model_json_schema()["required"]  # a schema editors can use


def test_model_configs_and_recipes_share_one_did_you_mean():
    from repro.utils import did_you_mean

    assert did_you_mean("epoch", {"epochs", "seed"}) == " (did you mean 'epochs'?)"
    assert did_you_mean("zzz", {"epochs"}) == ""


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(ReproError, match="mcan-pa/vqa2"):
        load_recipe("mcan-pa/vqa3")


def test_cosine_is_albefs_schedule():
    from repro.train.schedule import learning_rate

    r = load_recipe("ace-rpe/pretrain")
    assert learning_rate(r.schedule, 0, 0) == pytest.approx(1e-5)  # warm-up starts at 1e-5
    assert learning_rate(r.schedule, 0, 1000) == pytest.approx(1e-5 + (1e-4 - 1e-5) / 2)
    assert learning_rate(r.schedule, 0, 2000) == pytest.approx(1e-4)
    assert learning_rate(r.schedule, 15, 0) == pytest.approx((1e-4 + 1e-6) / 2)  # half the cosine
    assert epoch_rates(load_recipe("ace-rpe/retrieval-coco").schedule, 5)[0] == pytest.approx(1e-5)


# --- one table per kind of name: adding a schedule, a loss or an optimiser is one entry -------------


def test_a_new_schedule_is_one_entry_of_the_schedule_table(tmp_path, monkeypatch):
    from repro.train import schedule

    def halving_lr(epoch: int, base_lr: float, every: int = 2) -> float:
        return base_lr * 0.5 ** (epoch // every)

    monkeypatch.setitem(schedule.SCHEDULES, "halving", schedule.Schedule(halving_lr))
    r = load_recipe(_write(tmp_path, GOOD.replace("{name: constant, base_lr: 0.001}", "{name: halving, base_lr: 1.0}")))
    assert schedule.epoch_rates(r.schedule, 5) == [1.0, 1.0, 0.5, 0.5, 0.25]
    bad = GOOD.replace("{name: constant, base_lr: 0.001}", "{name: halving, base_lr: 1.0, evry: 3}")
    with pytest.raises(ReproError, match=r"r\.yaml:2: .*evry"):  # its keys are its rate's parameters
        load_recipe(_write(tmp_path, bad))


def test_a_new_loss_is_one_entry_of_the_loss_table(tmp_path, monkeypatch):
    import torch

    from repro.train import losses
    from repro.train.trainer import recipe_loss_step

    monkeypatch.setitem(losses.LOSSES, "l1-sum", losses.Loss(lambda x, y: (x - y).abs().sum(), summed=True))
    r = load_recipe(_write(tmp_path, GOOD.replace("loss: bce-sum", "loss: l1-sum")))
    step = recipe_loss_step(r.loss)
    batch = {"x": torch.tensor([1.0, -2.0]), "target": torch.tensor([0.0, 0.0])}
    assert step(lambda b: b["x"], batch).item() == 3.0 and losses.is_summed("l1-sum")


def test_a_new_optimiser_is_one_entry_of_the_optimiser_table(tmp_path, monkeypatch):
    import torch

    from repro.train import optimizers
    from repro.train.trainer import build_optimizer

    monkeypatch.setitem(optimizers.OPTIMIZERS, "rmsprop", optimizers.Optimizer("RMSprop", frozenset({"alpha"})))
    r = load_recipe(_write(tmp_path, GOOD.replace("{name: adam, betas: [0.9, 0.98]}", "{name: rmsprop, alpha: 0.9}")))
    optimizer = build_optimizer(r, [torch.nn.Parameter(torch.zeros(2))])
    assert isinstance(optimizer, torch.optim.RMSprop) and optimizer.defaults["alpha"] == 0.9
    assert optimizer.defaults["lr"] == 0.001  # from the schedule


def test_the_shared_losses_are_the_old_formulas():
    import torch
    import torch.nn.functional as F

    from repro.train.losses import compute_loss

    logits, soft = torch.tensor([[0.3, -1.2], [2.0, 0.1]]), torch.tensor([[1.0, 0.3], [0.0, 0.6]])
    assert torch.equal(
        compute_loss("bce-sum", logits, soft), F.binary_cross_entropy_with_logits(logits, soft, reduction="sum")
    )
    assert torch.equal(compute_loss("bce-mean", logits, soft), F.binary_cross_entropy_with_logits(logits, soft))
    labels = torch.tensor([1, 0])
    assert torch.equal(compute_loss("cross-entropy", logits, labels), F.cross_entropy(logits, labels))
    with pytest.raises(ReproError, match="family's loss step"):
        compute_loss("per-task", logits, labels)


def test_bf16_on_a_cpu_without_recurrent_kernels_is_refused_in_one_line(monkeypatch):
    """oneDNN builds bf16 LSTM/GRU kernels only where the CPU supports them; elsewhere autocast failed deep
    inside the first step. The refusal names the way out; models without recurrence keep bf16."""
    import torch
    from torch import nn

    from repro.train import trainer

    monkeypatch.setattr(trainer, "_cpu_has_bf16_recurrence", lambda: False)
    cpu = torch.device("cpu")
    with pytest.raises(ReproError, match=r"recipe.precision=fp32"):
        trainer.resolve_precision("bf16", cpu, nn.Sequential(nn.Linear(2, 2), nn.GRU(2, 2)))
    assert trainer.resolve_precision("bf16", cpu, nn.Linear(2, 2)) == "bf16"
    assert trainer.resolve_precision("bf16", torch.device("cuda"), nn.LSTM(2, 2)) == "bf16"
    monkeypatch.setattr(trainer, "_cpu_has_bf16_recurrence", lambda: True)
    assert trainer.resolve_precision("bf16", cpu, nn.LSTM(2, 2)) == "bf16"


def test_auto_precision_is_fp32_on_every_device_as_the_papers_official_code_trains():
    """`auto` never silently means bf16 on a GPU: fp32 unless the recipe or an override asks otherwise."""
    import torch

    from repro.train.trainer import matmul_precision, resolve_precision

    assert resolve_precision("auto", torch.device("cuda")) == "fp32"
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert resolve_precision("tf32", torch.device("cuda")) == "tf32"
    assert resolve_precision("tf32", torch.device("cpu")) == "fp32"
    assert resolve_precision("bf16", torch.device("cuda")) == "bf16"
    before = torch.backends.cuda.matmul.allow_tf32
    with matmul_precision("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32
    with matmul_precision("fp32"):
        assert not torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == before


@pytest.mark.slow
def test_the_plan_prints_the_precision(runner):
    from repro.cli import app

    out = runner.invoke(app, ["run", "mcan-pa-table5-ablation", "--dry-run"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "precision: fp32 (recipe mcan-pa/vqa2: what the official code trains with" in out.output
    out = runner.invoke(app, ["run", "mcan-pa-table5-ablation", "--dry-run", "recipe.precision=bf16"])
    assert "precision: bf16 (an override; recipe mcan-pa/vqa2 says fp32" in " ".join(out.output.split())


# --- precision: each paper's recipe says what its official code trains with ------------------------


def test_every_recipe_states_the_precision_its_official_code_trains_with():
    """All five papers' official code trains in fp32 (no autocast or apex: ALBEF's Pretrain.py calls
    loss.backward() and optimizer.step() on fp32 tensors, and so do the others), so every recipe says fp32."""
    from repro.families import available_recipes
    from repro.families import load_recipe as by_name
    from repro.utils import read_yaml

    names = available_recipes()
    assert len(names) >= 16
    for name in names:
        recipe = by_name(name)
        data, _ = read_yaml(recipe.path, "recipe")
        assert data.get("precision") == "fp32", name
        assert recipe.precision == "fp32" and recipe.replace(precision="auto").precision == "fp32", name


def test_auto_means_the_recipes_own_precision(tmp_path):
    r = load_recipe(_write(tmp_path, GOOD + "precision: bf16\n"))
    assert r.replace(precision="auto").precision == "bf16" and r.replace(precision="fp32").precision == "fp32"
    assert load_recipe(_write(tmp_path, GOOD)).precision == "auto"  # a file that says nothing: fp32 when trained


def test_the_plan_prints_the_recipes_precision(monkeypatch):
    import repro.families as families
    from repro.report.plan import precision_line
    from repro.run import make_plan
    from repro.specs import resolve
    from repro.variants import load
    from repro.variants import resolve as resolved

    def plan_of(*overrides):
        spec, variant = load("mcan-pa-table5-ablation", list(overrides), None)
        return make_plan(resolved(spec, "synthetic", None, variant), "synthetic", variant=variant)

    assert precision_line(plan_of()).startswith("precision: fp32 (recipe mcan-pa/vqa2: what the official code trains")
    assert precision_line(plan_of("recipe.precision=bf16")).startswith(
        "precision: bf16 (an override; recipe mcan-pa/vqa2 says fp32"
    )
    assert precision_line(plan_of("recipe.precision=auto")).startswith("precision: fp32 (recipe mcan-pa/vqa2")
    real = families.load_recipe
    monkeypatch.setattr(families, "load_recipe", lambda name: real(name).replace(precision="tf32"))
    assert precision_line(make_plan(resolve("mcan-pa-table5-ablation"), "synthetic")).startswith(
        "precision: tf32 (recipe mcan-pa/vqa2: what the official code"
    )


def test_lr_batch_scales_every_rate_linearly_with_the_batch(tmp_path):
    # The linear scaling rule: the schedule's rates are stated for lr_batch; at 4x the batch every rate is 4x.
    import json

    from repro.train import fit
    from tests.test_train_ensemble import new_model
    from tests.test_train_resume import RECIPE
    from tests.tiny_vqa import TinyVQA

    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    stated = load_recipe(str(path)).replace(epochs=2)
    assert stated.lr_factor == 1.0 and "lr_batch" not in stated.to_json()  # as before: the config hash is unchanged
    scaled = stated.replace(batch_size=32, lr_batch=8)
    assert scaled.lr_factor == 4.0 and scaled.to_json()["lr_batch"] == 8
    assert scaled.replace(batch_size=8).lr_factor == 1.0
    rates = {}
    for name, recipe in (("stated", stated.replace(batch_size=32)), ("scaled", scaled)):
        fit(new_model(0), TinyVQA(64), recipe, tmp_path / name, progress=False)
        lines = (tmp_path / name / "train.jsonl").read_text().splitlines()
        rates[name] = [json.loads(line)["lr"] for line in lines]
    assert len(rates["scaled"]) == 4 and rates["scaled"] == [4 * r for r in rates["stated"]]
    assert rates["stated"] == [r for r in epoch_rates(stated.schedule, 2) for _ in range(2)]
    with pytest.raises(ReproError, match="lr_batch: must be a positive integer or null"):
        stated.replace(lr_batch=0)
