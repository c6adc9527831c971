"""MCAN and the Table V variants: configs, sizes, masks, gradients."""

import pytest
import torch

from repro.errors import ReproError
from repro.families.mcan_pa.build import build_model
from repro.nn.measure import count_parameters
from tests.tiny_vqa import NUM_ANSWERS, NUM_TOKENS, TABLE5_CONFIGS, TINY_SIZES, tiny_batch


def tiny(config, seed=0):
    torch.manual_seed(seed)
    return build_model(config, NUM_TOKENS, NUM_ANSWERS, sizes=TINY_SIZES)


def lin(a, b):
    return a * b + b


def test_mcan_has_57_8m_parameters_at_paper_sizes():
    mcan = build_model({"arch": "mcan"}, 20572, 3129)
    assert count_parameters(mcan) == 57_812_491  # MILVLG/mcan-vqa, GloVe table counted
    pa = build_model({"arch": "mcan", "positional": ["pwa", "poa", "pma"]}, 20572, 3129)
    # PA adds W_G^query, W_G^key in each of 6 PWA and 6 PMA layers (§IV-E), the 14x512 word positions,
    # PMA's Lin(5, 512) and POA's W^G (512 -> 8 heads, no bias) in 6 layers.
    extra = 6 * 4 * lin(512, 512) + 14 * 512 + lin(5, 512) + 6 * 512 * 8
    assert count_parameters(pa) == 57_812_491 + extra


@pytest.mark.parametrize("name", list(TABLE5_CONFIGS))
def test_every_table5_row_builds_runs_and_trains_its_positional_parameters(name):
    model = tiny(TABLE5_CONFIGS[name])
    batch = tiny_batch(3)
    logits = model(batch)
    assert logits.shape == (3, NUM_ANSWERS) and torch.isfinite(logits).all()
    logits.sum().backward()
    params = dict(model.named_parameters())
    names = [
        p for p in ("word_pos", "box_proj.weight", "pwa.0.q.weight", "pma.0.k.weight", "poa.w_g.weight") if p in params
    ]
    trained = [p for p in names if params[p].grad is not None and params[p].grad.abs().sum() > 0]
    if TABLE5_CONFIGS[name].get("fusion") == "relation-network":
        # ReLU(A_pos) switches off the pairs (and their gradient) where the positional score is negative
        assert trained, f"{name}: no positional parameter gets a gradient"
    else:
        assert trained == names, f"{name}: {sorted(set(names) - set(trained))} get no gradient"


def test_rows_differ_in_their_modules():
    names = {n: {k.split(".")[0] for k, _ in tiny(c).named_parameters()} for n, c in TABLE5_CONFIGS.items()}
    assert "pwa" in names["MCAN+PWA"] and "poa" not in names["MCAN+PWA"]
    assert {"pwa", "poa", "pma"} <= names["MCAN+PA"]
    assert names["MCAN"].isdisjoint({"pwa", "poa", "pma", "word_pos", "box_proj"})
    assert {"word_pos", "box_proj"} <= names["MCAN+PE"]
    # same weights, different fusion: PA and PA* give different outputs
    pa, star = tiny(TABLE5_CONFIGS["MCAN+PA"]).eval(), tiny(TABLE5_CONFIGS["MCAN+PA*"]).eval()
    star.load_state_dict(pa.state_dict())
    batch = tiny_batch(2)
    assert not torch.allclose(pa(batch), star(batch), atol=1e-4)


@pytest.mark.parametrize("name", ["MCAN", "MCAN+PA", "MCAN+PA*", "MCAN+PE"])
def test_padding_regions_and_tokens_changes_nothing(name):
    model = tiny(TABLE5_CONFIGS[name]).eval()
    batch = tiny_batch(2, seed=3)
    # drop the last region and token of every sample, then pad them back with zeros
    short = {k: v.clone() for k, v in batch.items()}
    short["features"][:, -1] = 0
    short["boxes"][:, -1] = 0
    short["tokens"][:, -1] = 0
    longer = {k: v.clone() for k, v in short.items()}
    longer["features"] = torch.cat([short["features"], torch.zeros(2, 2, TINY_SIZES["feature_dim"])], 1)
    longer["boxes"] = torch.cat([short["boxes"], torch.zeros(2, 2, 4)], 1)
    with torch.no_grad():
        assert torch.allclose(model(short), model(longer), atol=1e-5)
        assert not torch.allclose(model(short), model(batch), atol=1e-4)  # the region did count


def test_bad_configs_name_the_problem():
    for config, word in [
        ({"arch": "mcan", "heads": 4}, "heads"),
        ({"arch": "vit"}, "vit"),
        ({"arch": "mcan", "positional": ["pwa", "xyz"]}, "xyz"),
        ({"arch": "mcan", "fusion": "eq8"}, "fusion"),
        ({"arch": "mcan", "positional": ["poa"], "fusion": "sum"}, "sum"),
        ({"arch": "mcan", "position_embedding": "rope"}, "rope"),
        ({}, "arch"),
    ]:
        with pytest.raises(ReproError, match=word):
            build_model(config, NUM_TOKENS, NUM_ANSWERS, sizes=TINY_SIZES)
    with pytest.raises(ReproError, match="depth"):
        build_model({"arch": "mcan"}, NUM_TOKENS, NUM_ANSWERS, sizes={"depth": 2})


def test_glove_embeddings_are_loaded_and_checked():
    table = torch.randn(NUM_TOKENS, TINY_SIZES["embed_dim"])
    model = build_model({"arch": "mcan"}, NUM_TOKENS, NUM_ANSWERS, embeddings=table, sizes=TINY_SIZES)
    assert torch.equal(model.embedding.weight.detach(), table) and model.embedding.weight.requires_grad
    with pytest.raises(ReproError, match="shape"):
        build_model({"arch": "mcan"}, NUM_TOKENS, NUM_ANSWERS, embeddings=table[:, :3], sizes=TINY_SIZES)


def test_too_long_questions_are_a_clear_error():
    model = tiny({"arch": "mcan"})
    batch = tiny_batch(1)
    batch["tokens"] = torch.ones(1, TINY_SIZES["max_tokens"] + 1, dtype=torch.long)
    with pytest.raises(ReproError, match="at most"):
        model(batch)
