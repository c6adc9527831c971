"""M4C and SA-M4C: the official parameter counts, the spatial masks, decoding."""

from __future__ import annotations

import pytest
import torch

from repro.families.sa_m4c.build import build_model, example_batch
from repro.families.sa_m4c.model import BOS, EOS, AttentionMask
from repro.families.sa_m4c.relations import head_relation_sets
from repro.nn.measure import count_parameters
from repro.specs import resolve
from tests.families.sa_m4c.tiny import NUM_ANSWERS, TINY_SIZES

# the released code's counts (V = 5,000): M4C in mmf (4 layers, fc7 layers) and SA-M4C (6 layers, no fc7)
OFFICIAL_M4C, OFFICIAL_SA_M4C = 90_850_184, 96_633_224


def paper_count(spec_id: str, row: str) -> int:
    with torch.device("meta"):
        return count_parameters(build_model(resolve(spec_id).row(row).config))


def test_parameter_counts_are_the_released_codes():
    assert abs(paper_count("sa-m4c-table1-textvqa", "6 M4C†") - OFFICIAL_M4C) <= 0.005 * OFFICIAL_M4C
    sa = paper_count("sa-m4c-table1-textvqa", "13 SA-M4C (ours)")
    assert abs(sa - OFFICIAL_SA_M4C) <= 0.005 * OFFICIAL_SA_M4C
    # Sec. 5.1: the improved M4C (6N) and SA-M4C (2N->4S) have the same number of parameters
    assert paper_count("sa-m4c-table1-textvqa", "10 M4C††") == sa
    assert paper_count("sa-m4c-table2-ablations", "5 M4C-Top-9") == sa
    # ReGAT adds one bias per (head, label) in each of its 4 layers
    assert paper_count("sa-m4c-table2-ablations", "6 M4C-ReGAT") == sa + 4 * 12 * 13


def tiny(config, seed=0):
    torch.manual_seed(seed)
    return build_model(config, NUM_ANSWERS, sizes=TINY_SIZES)


def tiny_batch(n=3):
    batch = example_batch(n, TINY_SIZES)
    batch["obj_mask"][0, 2:] = False
    batch["ocr_mask"][1, 3:] = False
    batch["question_mask"][2, 4:] = False
    return batch


TABLE2 = {row.name: row.config for row in resolve("sa-m4c-table2-ablations").rows if row.config is not None}


@pytest.mark.parametrize("name", list(TABLE2))
def test_every_table2_row_runs_and_trains_its_upper_layers(name):
    model = tiny(TABLE2[name])
    scores = model(tiny_batch())
    assert scores.shape == (3, 3, NUM_ANSWERS + 5) and torch.isfinite(scores).all()
    assert (scores[1, :, NUM_ANSWERS + 3 :] <= -1e3).all()  # padded OCR tokens cannot be copied
    scores.sum().backward()
    top = model.mmt[-1].attention.query.weight.grad
    assert top is not None and top.abs().sum() > 0


def test_spatial_layer_masks_follow_fig_2b():
    model = tiny({"arch": "sa-m4c", "normal_layers": 1, "spatial_layers": 1, "context": 1})
    batch = tiny_batch()
    enc = model.encode(batch)
    masks = model._masks(enc, batch["relations"], steps=3)
    m, normal = masks["spatial"], masks["normal"]
    tq, n = 6, 9
    e = slice(tq, tq + n)
    sets = head_relation_sets(1)
    for b in range(3):
        valid = torch.cat([batch["obj_mask"][b], batch["ocr_mask"][b]])
        expected = sets[:, batch["relations"][b].long()] & valid[None, None, :]
        assert torch.equal(m[b, :, e, e], expected)
    assert not m[:, :, :tq].any()  # question tokens: no key in spatial layers
    assert torch.equal(m[:, :, e, :tq], normal[:, :, e, :tq].expand(-1, 12, -1, -1))  # t_imp in every head
    assert not m[:, :, : tq + n, tq + n :].any()  # the encoder never sees the decoding steps
    dec = m[0, 0, tq + n :, tq + n :]
    assert torch.equal(dec, torch.tril(torch.ones(3, 3, dtype=torch.bool)))  # causal decoding steps


def test_spatial_heads_change_the_output_only_through_related_tokens():
    """With every pair unrelated but self, an object/OCR token cannot see the others in a spatial layer."""
    model = tiny({"arch": "sa-m4c", "normal_layers": 0, "spatial_layers": 1, "context": 1}).eval()
    batch = tiny_batch()
    batch["relations"] = torch.diag_embed(torch.full((3, 9), 12, dtype=torch.int8))
    x = model.encode(batch)
    mask = AttentionMask.of(model._masks(x, batch["relations"], 0)["spatial"], 12)
    base = model.mmt[0](torch.cat([x["txt"], x["obj"], x["ocr"]], 1), mask, None, 6)
    batch["ocr_features"][0, 4] += 5.0
    y = model.encode(batch)
    mask = AttentionMask.of(model._masks(y, batch["relations"], 0)["spatial"], 12)
    moved = model.mmt[0](torch.cat([y["txt"], y["obj"], y["ocr"]], 1), mask, None, 6)
    assert torch.allclose(base[0, :14], moved[0, :14], atol=1e-6) and not torch.allclose(base[0, 14], moved[0, 14])


def _sequence_score(model, batch, seq):
    prev = torch.cat([torch.full_like(seq[:, :1], BOS), seq[:, :-1]], dim=1)
    logp = torch.log_softmax(model(batch, prev), dim=-1)
    step = logp.gather(-1, seq.unsqueeze(-1)).squeeze(-1)
    alive = torch.cumsum((seq == EOS).long(), 1) - (seq == EOS).long() == 0
    return (step * alive).sum(1)


def test_beam_search_finds_at_least_the_greedy_score():
    model = tiny({"arch": "m4c", "normal_layers": 2}).eval()
    batch = tiny_batch()
    greedy = model.decode(batch)
    assert torch.equal(model.decode(batch, beam=1), greedy)
    beam = model.decode(batch, beam=4)
    assert beam.shape == greedy.shape
    with torch.no_grad():
        assert (_sequence_score(model, batch, beam) >= _sequence_score(model, batch, greedy) - 1e-5).all()


def test_bert_and_fc7_train_at_a_tenth_of_the_rate():
    model = tiny({"arch": "m4c", "normal_layers": 1, "det_backbone": "resnet-101"})
    fast, slow = model.lr_groups()
    assert (fast["lr_scale"], slow["lr_scale"]) == (1.0, 0.1)
    slow_ids = {id(p) for p in slow["params"]}
    assert {id(p) for p in model.text_bert.parameters()} | {id(p) for p in model.obj_fc7.parameters()} <= slow_ids
    assert len(fast["params"]) + len(slow["params"]) == len(list(model.parameters()))
