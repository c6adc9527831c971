"""Seeds trained together (repro.train.ensemble): each seed as its lone run, its own dropout, resumable."""

import os
import signal

import pytest
import torch
from torch.utils.data import default_collate

from repro.errors import ReproError
from repro.families import load_recipe
from repro.families.mcan_pa.build import build_model
from repro.train import TrainingInterrupted, fit
from repro.train.checkpoint import load_checkpoint
from repro.train.distributed import use_device
from repro.train.ensemble import fit_ensemble
from tests.test_train_resume import RECIPE  # the tiny recipe the trainer's resume tests use
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, TinyVQA

NO_DROPOUT = {**TINY_SIZES, "dropout": 0.0}


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """These tests hold seeds trained together to their lone runs' arithmetic on the CPU, wherever they run (on a
    GPU tests/test_gpu_runs.py trains seeds together)."""
    with use_device("cpu"):
        yield


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE)
    return load_recipe(str(path))


def new_model(seed, sizes=TINY_SIZES):
    torch.manual_seed(seed)
    return build_model(TABLE5_CONFIGS["MCAN+PA"], NUM_TOKENS, NUM_ANSWERS, sizes=sizes)


def weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_each_seed_ends_where_its_lone_run_does(tmp_path, recipe):
    # Own initialisation, data order and optimiser state per seed; gradient clipping per seed (0.5 is
    # far below this model's gradient norm, so it acts at every step).
    data = TinyVQA(14)  # 2 steps per epoch, the last one short
    recipes = [recipe.replace(seed=s, grad_clip=0.5, epochs=2) for s in (5, 6)]
    lone = [new_model(r.seed, NO_DROPOUT) for r in recipes]
    states = [fit(m, data, r, tmp_path / f"lone{r.seed}", progress=False) for m, r in zip(lone, recipes)]
    together = [new_model(r.seed, NO_DROPOUT) for r in recipes]
    dirs = [tmp_path / f"seed{r.seed}" for r in recipes]
    out = fit_ensemble(together, data, recipes, dirs, progress=False)

    batch = default_collate([data[i] for i in range(len(data))])
    for alone, joint, state, joint_state in zip(lone, together, states, out):
        assert joint_state.final_loss == pytest.approx(state.final_loss, rel=1e-5)
        assert joint_state.step == state.step == 4
        # The batched kernels sum in another order; Adam (eps 1e-9) turns a last-bit difference in a
        # near-zero gradient into a step of up to the learning rate, so weights agree to ~1e-3, outputs closer.
        assert (weights(joint) - weights(alone)).abs().max() < 1e-2
        with torch.no_grad():
            assert torch.allclose(joint.eval()(batch), alone.eval()(batch), atol=1e-3)
    assert not torch.allclose(weights(together[0]), weights(together[1]))
    saved = load_checkpoint(dirs[1] / "last.pt")  # a lone run's checkpoint: `fit(..., resume=True)` reads it
    assert saved["epoch"] == 2 and saved["optimizer"]["state"][0]["exp_avg"].shape == next(lone[1].parameters()).shape
    assert len((dirs[1] / "train.jsonl").read_text().splitlines()) == 4


def test_the_stateless_copy_never_packs_its_lstm_weights(tmp_path, recipe, monkeypatch):
    # On a GPU nn.LSTM packs its weights for cuDNN whenever they change, reading their data pointers, and vmap's
    # stacked weights have none: "Cannot access data pointer of Tensor that doesn't have storage". A CPU returns
    # before reading them, so here packing reads them on every device, as it does on a GPU.
    models = [new_model(s) for s in (1, 2)]

    def packing(self):
        for weight in self._flat_weights:
            weight.data_ptr()

    monkeypatch.setattr(torch.nn.RNNBase, "flatten_parameters", packing)
    recipes = [recipe.replace(seed=s, epochs=1) for s in (1, 2)]
    out = fit_ensemble(models, TinyVQA(8), recipes, [tmp_path / "a", tmp_path / "b"], progress=False)
    assert [state.step for state in out] == [1, 1]


def test_each_seed_draws_its_own_dropout_masks(tmp_path, recipe):
    # One batch of the same 8 samples for both seeds (the summed loss does not see their order) and the same
    # initial weights: the two seeds differ only in their dropout masks.
    data = TinyVQA(8)
    models = [new_model(0), new_model(0)]
    fit_ensemble(
        models, data, [recipe.replace(seed=s) for s in (5, 6)], [tmp_path / "a", tmp_path / "b"], progress=False
    )
    assert (weights(models[0]) - weights(models[1])).abs().max() > 1e-4


@pytest.mark.slow
def test_an_interrupted_ensemble_resumes_to_the_same_weights(tmp_path, recipe):
    data = TinyVQA(14)
    recipes = [recipe.replace(seed=s, epochs=2) for s in (5, 6)]
    full = [new_model(r.seed) for r in recipes]
    fit_ensemble(full, data, recipes, [tmp_path / "full" / str(r.seed) for r in recipes], progress=False)

    def stop(step):
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    part = [new_model(r.seed) for r in recipes]
    dirs = [tmp_path / "part" / str(r.seed) for r in recipes]
    with pytest.raises(TrainingInterrupted, match="--resume"):
        fit_ensemble(part, data, recipes, dirs, progress=False, on_step=stop)
    resumed = [new_model(r.seed) for r in recipes]
    states = fit_ensemble(resumed, data, recipes, dirs, progress=False, resume=True)
    assert states[0].resumed_from == {"epoch": 1, "step": 3}
    for a, b in zip(full, resumed):
        assert torch.equal(weights(a), weights(b))


def test_recipes_that_differ_beyond_the_seed_are_refused(tmp_path, recipe):
    models = [new_model(0), new_model(1)]
    with pytest.raises(ReproError, match="only in their seed"):
        fit_ensemble(models, TinyVQA(8), [recipe, recipe.replace(seed=6, epochs=1)], [tmp_path, tmp_path])


class TwoParts(torch.nn.Module):
    """A model whose `lr_groups()` trains one part at a tenth of the rate (as M4C trains BERT)."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.fast, self.slow = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)

    def forward(self, batch):
        return self.fast(batch["x"]) + self.slow(batch["x"])

    def lr_groups(self):
        return [
            {"params": list(self.fast.parameters()), "lr_scale": 1.0},
            {"params": list(self.slow.parameters()), "lr_scale": 0.1},
        ]


def test_parameter_groups_train_at_their_own_rates_as_alone(tmp_path):
    path = tmp_path / "adam.yaml"
    path.write_text(
        "optimizer: {name: adam}\nschedule: {name: constant, base_lr: 0.05}\nepochs: 3\nbatch_size: 4\nloss: bce-mean\n"
    )
    recipes = [load_recipe(str(path)).replace(seed=s) for s in (1, 2)]
    g = torch.Generator().manual_seed(0)
    data = [
        {"x": torch.randn(3, generator=g), "target": torch.rand(2, generator=g), "question_id": i} for i in range(8)
    ]
    lone = [TwoParts(r.seed) for r in recipes]
    for m, r in zip(lone, recipes):
        fit(m, data, r, tmp_path / f"lone{r.seed}", progress=False)
    start = [TwoParts(r.seed) for r in recipes]
    together = [TwoParts(r.seed) for r in recipes]
    fit_ensemble(together, data, recipes, [tmp_path / f"seed{r.seed}" for r in recipes], progress=False)
    for alone, joint, first in zip(lone, together, start):
        assert torch.allclose(weights(joint), weights(alone), atol=1e-6)
        # Adam's first steps move every weight by about the rate: the slow part by a tenth of the fast part's
        moved = {n: (p - dict(first.named_parameters())[n]).abs().mean() for n, p in joint.named_parameters()}
        assert moved["slow.weight"] < 0.2 * moved["fast.weight"]
    saved = load_checkpoint(tmp_path / "seed2" / "last.pt")
    assert [grp["lr_scale"] for grp in saved["optimizer"]["param_groups"]] == [1.0, 0.1]


@pytest.mark.slow
def test_frozen_parameters_stay_frozen(tmp_path, recipe):
    models = [new_model(s, NO_DROPOUT) for s in (5, 6)]
    for m in models:
        m.embedding.weight.requires_grad_(False)  # as fixed word vectors (PSAC's GloVe)
    before = [m.embedding.weight.detach().clone() for m in models]
    recipes = [recipe.replace(seed=s) for s in (5, 6)]
    fit_ensemble(models, TinyVQA(14), recipes, [tmp_path / str(s) for s in (5, 6)], progress=False)
    for m, b in zip(models, before):
        assert torch.equal(m.embedding.weight, b) and not m.embedding.weight.requires_grad
    assert not torch.equal(models[0].classifier.weight, new_model(5, NO_DROPOUT).classifier.weight)


def test_an_op_without_a_batching_rule_runs_per_seed_without_torchs_note(tmp_path):
    # PSAC's hinge loss (F.multi_margin_loss) has no vmap rule: torch runs it per seed and says it would like an issue
    import warnings

    from repro.train.ensemble import _batched_kernels

    scores, target = torch.randn(2, 4, 5), torch.randint(0, 5, (2, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _batched_kernels():
            loss = torch.func.vmap(torch.nn.functional.multi_margin_loss)(scores, target)
    assert torch.allclose(
        loss, torch.stack([torch.nn.functional.multi_margin_loss(s, t) for s, t in zip(scores, target)])
    )
    assert not [w for w in caught if "performance drop" in str(w.message)]


class WeightNormed(torch.nn.Module):
    """A layer weight-normed with one scale for the whole matrix (`dim=None`, as PSAC's official classifier): a
    0-dim parameter, one number per seed once the seeds are stacked."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.proj = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2), dim=None)

    def forward(self, batch):
        return self.proj(batch["x"])


def test_gradient_clipping_per_seed_takes_a_scalar_parameter(tmp_path):
    path = tmp_path / "clip.yaml"
    path.write_text(
        "optimizer: {name: sgd}\nschedule: {name: constant, base_lr: 0.5}\nepochs: 2\nbatch_size: 4\n"
        "loss: bce-mean\ngrad_clip: 0.01\n"
    )
    recipes = [load_recipe(str(path)).replace(seed=s) for s in (1, 2)]
    g = torch.Generator().manual_seed(0)
    data = [
        {"x": torch.randn(3, generator=g), "target": torch.rand(2, generator=g), "question_id": i} for i in range(8)
    ]
    lone = [WeightNormed(r.seed) for r in recipes]
    for m, r in zip(lone, recipes):
        fit(m, data, r, tmp_path / f"lone{r.seed}", progress=False)
    together = [WeightNormed(r.seed) for r in recipes]
    fit_ensemble(together, data, recipes, [tmp_path / f"seed{r.seed}" for r in recipes], progress=False)
    for alone, joint in zip(lone, together):
        assert torch.allclose(weights(joint), weights(alone), atol=1e-6)


@pytest.mark.parametrize(
    "mask",
    [
        None,
        "per-seed",  # a learned bias: its gradient too (the CPU's flash kernel cannot give it; SDPA picks math)
        "per-seed-broadcast",  # [seeds, 1, 1, 1, L]
        "per-seed-2d",  # [seeds, L, L]
        "shared-per-sample",  # [B, 1, 1, L]: the same for every seed
        "shared",  # [1, H, L, L]
        "shared-bool",
    ],
)
def test_attention_takes_the_seeds_as_more_of_its_batch_and_computes_each_as_alone(mask):
    import torch.nn.functional as F
    from torch.func import vmap

    from repro.train.ensemble import _batched_kernels

    torch.manual_seed(0)
    seeds, b, h, n, e = 3, 4, 2, 5, 6
    q, k, v = (torch.randn(seeds, b, h, n, e, requires_grad=True) for _ in range(3))
    masks = {
        "per-seed": torch.randn(seeds, b, h, n, n),
        "per-seed-broadcast": torch.randn(seeds, 1, 1, 1, n),
        "per-seed-2d": torch.randn(seeds, n, n),
        "shared-per-sample": torch.randn(b, 1, 1, n),
        "shared": torch.randn(1, h, n, n),
        "shared-bool": torch.rand(b, 1, 1, n) > 0.3,
    }
    m = masks.get(mask)
    per_seed = mask is not None and mask.startswith("per-seed")
    if per_seed:
        m.requires_grad_(True)
    inputs = [q, k, v, *([m] if per_seed else [])]

    def attend(q, k, v, m=m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    alone = torch.stack([attend(q[s], k[s], v[s], *([m[s]] if per_seed else [])) for s in range(seeds)])
    grads_alone = torch.autograd.grad(alone.sum(), inputs)
    with _batched_kernels():
        together = vmap(attend, in_dims=(0, 0, 0, 0) if per_seed else (0, 0, 0))(*inputs)
    grads = torch.autograd.grad(together.sum(), inputs)
    assert torch.equal(together, alone)  # each (seed, sample) through the kernel its lone run takes
    for a, b_ in zip(grads, grads_alone):
        assert torch.allclose(a, b_, atol=1e-5)


def test_attention_dropout_draws_each_seeds_own_mask_at_the_rate():
    import torch.nn.functional as F
    from torch.func import vmap

    from repro.train.ensemble import _batched_kernels

    torch.manual_seed(0)
    x = torch.ones(4, 2, 2, 8, 16)
    with _batched_kernels():
        out = vmap(lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.25), randomness="different")(x)
    assert not torch.equal(out[0], out[1])
    # v is all ones: each output entry is (kept share of a uniform map) / (1 - p), 1 on average
    assert out.mean().item() == pytest.approx(1.0, abs=0.05)
