"""ALBEF with the Table 1 position embeddings: sizes, objectives, and the equations of ACE-RPE."""

import itertools
import math

import pytest
import torch

from repro.families.ace_rpe import position as P
from repro.families.ace_rpe.build import build_model, describe
from repro.families.ace_rpe.config import ALBEFConfig
from tests.families.ace_rpe.tiny import TINY_SIZES, tiny_batch

ALBEF_RETRIEVAL = 209_560_835  # salesforce/ALBEF models/model_retrieval.py at 384 x 384, trainable


def cfg(**kw):
    return ALBEFConfig(arch="albef", **kw)


def test_none_row_counts_albef_retrieval_parameters():
    info = describe(cfg(position_embedding="none"))[0]
    assert abs(info.trainable_params - ALBEF_RETRIEVAL) / ALBEF_RETRIEVAL < 0.005
    modules = dict(info.modules)
    assert modules["visual_encoder"] == 86_090_496  # ViT-B/16 at 384
    assert modules["text_encoder"] == 66_364_416  # BERT embeddings + layers 0-5
    assert modules["fusion"] == 56_710_656  # layers 6-11 with cross-attention
    assert modules["position_embedding"] == 0


@pytest.mark.parametrize(
    "kw, added",
    [
        ({}, 6 * 8 * 768),  # W of Eq. 8 in each of 6 fusion layers
        ({"shared": True}, 8 * 768),  # one W (Table 6)
        ({"mode": "bias"}, 6 * (8 * 768 + 768)),  # W and W_E of Eq. 9
        ({"groups": 16}, 6 * 16 * 768),  # G (Table 7)
    ],
)
def test_ace_rpe_rows_report_what_they_add(kw, added):
    info = describe(cfg(position_embedding="ace-rpe", **kw))[0]
    assert dict(info.modules)["position_embedding"] == added
    assert info.trainable_params == ALBEF_RETRIEVAL + added


def test_ape_and_rpe_add_per_modality_tables():
    ape = dict(describe(cfg(position_embedding="ape"))[0].modules)["position_embedding"]
    rpe = dict(describe(cfg(position_embedding="rpe"))[0].modules)["position_embedding"]
    assert ape == (512 + 577) * 768
    assert rpe == (1023 + 47 * 47) * 768


TABLE1 = ["none", "ape", "rpe", "ape+rpe", "uniform", "ace-rpe"]


@pytest.mark.parametrize("pe", TABLE1)
def test_every_row_trains_retrieval(pe):
    torch.manual_seed(0)
    model = build_model(cfg(position_embedding=pe), TINY_SIZES)
    loss = model.retrieval_loss(tiny_batch())
    assert torch.isfinite(loss)
    loss.backward()
    position = model.fusion.position
    if position is not None:
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in position.parameters())
    assert all(p.grad is None for p in model.momentum_parameters())


def test_pretraining_objectives_follow_the_switches():
    torch.manual_seed(0)
    model = build_model(cfg(), TINY_SIZES, task="pretrain")
    full = model.pretrain_loss(tiny_batch())
    assert set(full) == {"itc", "itm", "mlm", "mim", "ace"}
    sum(full.values()).backward()
    assert all(p.grad is not None for p in model.fusion.position.parameters())
    assert model.mlm_head.predictions.decoder.weight is model.text_encoder.embeddings.word_embeddings.weight
    base = build_model(cfg(position_embedding="none", mim_loss=False), TINY_SIZES, task="pretrain")
    assert set(base.pretrain_loss(tiny_batch())) == {"itc", "itm", "mlm"}


def test_momentum_update_and_queue():
    torch.manual_seed(0)
    model = build_model(cfg(position_embedding="none"), TINY_SIZES)
    before = model.text_queue.clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.retrieval_loss(tiny_batch()).backward()
    opt.step()
    assert int(model.queue_ptr) == 4 and not torch.equal(before[:, :4], model.text_queue[:, :4])
    assert torch.equal(before[:, 4:], model.text_queue[:, 4:])
    (p, pm) = next(iter(model.parameter_pairs()))
    model.momentum_update()
    assert not torch.equal(p, pm)  # EMA lags the online weights after a step


# --- Eq. 3-7 ---------------------------------------------------------------------------------------


def test_soft_shrink_eq4():
    s = torch.tensor([0.3, 0.05, 0.04, -0.5])
    out = P.soft_shrink(s, delta=0.05, tau=100.0)
    assert torch.allclose(out[:2], s[:2])
    assert math.isclose(float(out[2]), 0.05 * math.exp(100 * -0.01), rel_tol=1e-5)
    assert 0 < float(out[3]) < 1e-20


def test_anchor_relative_position_is_eq7_by_brute_force():
    torch.manual_seed(0)
    b, n, grid, g, bt, bp = 1, 5, 4, 2, 3, 3
    shrunk = P.soft_shrink(torch.rand(b, n, grid * grid, g) * 0.6 - 0.2, 0.1, 50.0)
    cap = P.max_distance(0.1, bt, bp)
    got = P.anchor_relative_position(shrunk, grid, bt, bp, cap)
    dist = (1 / shrunk).clamp(max=cap)
    for nn_, m, k in itertools.product(range(n), range(grid * grid), range(g)):
        best = cap
        for i, j in itertools.product(range(grid * grid), range(n)):
            dy, dx = i // grid - m // grid, i % grid - m % grid
            if abs(dy) <= bt // 2 and abs(dx) <= bt // 2 and abs(j - nn_) <= bp // 2:
                best = min(best, math.hypot(dx, dy) + float(dist[0, j, i, k]) + abs(j - nn_))
        assert math.isclose(float(got[0, nn_, m, k]), best, rel_tol=1e-5), (nn_, m, k)


def test_anchors_eq5_are_per_group():
    shrunk = torch.tensor([[[[0.2, 0.0], [0.0, 0.0]]]])  # (B=1, N=1, M=2, G=2)
    assert P.anchors(shrunk, 0.05).tolist() == [[[True, False], [False, False]]]


def test_contextual_and_bias_modes_match_the_full_eq9_to_eq12():
    torch.manual_seed(0)
    d, heads = 8, 2
    text, image = torch.randn(2, 3, d), torch.randn(2, 5, d)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    for mode in ("bias", "contextual"):
        m = P.ACERPE(d, heads, 2, groups=4, mode=mode, shared=False, apply_to=("query", "key", "value"), anchored=True)
        inj = m(text, mask, image)
        e = inj.pairs @ m.weight(1)  # E_ace (B, N, M+1, D), Eq. 8
        if mode == "bias":
            assert torch.allclose(m.logit_bias(inj, 1)[:, 0], e @ m.W_E[1], atol=1e-6)  # Eq. 9
            assert m.query_add(inj, 1) is None and m.value_add(inj, 1, None) is None
            continue
        assert torch.allclose(m.query_add(inj, 1), e.mean(2), atol=1e-6)  # Eq. 10, words
        keys = (e * mask[:, :, None, None]).sum(1) / mask.sum(1)[:, None, None]
        assert torch.allclose(m.key_add(inj, 1), keys, atol=1e-6)  # Eq. 10, patches, real words only
        probs = torch.softmax(torch.randn(2, heads, 3, 5), -1)
        per_head = e.reshape(2, 3, 5, heads, d // heads).permute(0, 3, 1, 2, 4)
        want = (probs[..., None] * per_head).sum(3)  # sigma(F) E_ace, Eq. 12
        assert torch.allclose(m.value_add(inj, 1, probs), want, atol=1e-6)
        assert torch.equal(inj.pairs[:, 0], torch.zeros_like(inj.pairs[:, 0]))  # text [CLS]: no position


def test_apply_to_switches_each_projection():
    torch.manual_seed(0)
    text, image, mask = torch.randn(1, 3, 8), torch.randn(1, 5, 8), torch.ones(1, 3)
    m = P.ACERPE(8, 2, 1, groups=4, mode="contextual", shared=True, apply_to=("key",), anchored=False)
    inj = m(text, mask, image)
    assert m.query_add(inj, 0) is None and m.key_add(inj, 0) is not None
    assert m.value_add(inj, 0, torch.ones(1, 2, 3, 5)) is None
    assert torch.equal(inj.pairs[0, 1:, 1:], torch.ones(2, 4, 4))  # Uniform†: one distance everywhere


def test_itm_negatives_in_a_batch_of_one_image():
    torch.manual_seed(0)
    model = build_model(cfg(position_embedding="none"), TINY_SIZES)
    batch = tiny_batch()
    batch["idx"] = torch.zeros(4, dtype=torch.long)  # four captions of one image: no true negative
    assert torch.isfinite(model.retrieval_loss(batch))
    one = {k: v[:1] for k, v in tiny_batch().items()}
    assert torch.isfinite(model.retrieval_loss(one))
