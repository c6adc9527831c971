"""The dsganet family config accepts every spec row's `model:` and rejects nonsense."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from repro.families.dsganet.config import CONFIGS, DSGANetConfig
from tests.families.spec_models import by_arch, rows_of, same, spec_models

BY_ARCH = by_arch(CONFIGS)
_spec_models = spec_models
_rows = rows_of("dsganet")
_same = same


def _build(model: dict):
    return BY_ARCH[model["arch"]].model_validate(model)


FAMILY_MODELS = [(p, m) for p, _, m in _spec_models() if m.get("arch") in BY_ARCH]


def test_configs_have_distinct_arches():
    assert set(BY_ARCH) == {"dsganet"} and len(BY_ARCH) == len(CONFIGS)


def test_family_rows_found():
    assert len(FAMILY_MODELS) >= 19


@pytest.mark.parametrize("path,model", FAMILY_MODELS, ids=[f"{p.stem}:{i}" for i, (p, _) in enumerate(FAMILY_MODELS)])
def test_every_spec_model_validates(path, model):
    config = _build(model)
    for key, value in model.items():
        assert _same(getattr(config, key), value), (path.name, key)


def test_every_dsganet_spec_row_is_of_this_family():
    for path, _, model in _spec_models():
        if path.parent.name == "dsganet":
            assert model.get("arch") in BY_ARCH, (path.name, model)


def test_defaults_are_the_full_object_model():
    config = DSGANetConfig(arch="dsganet")  # DSGANet-O
    assert (config.features, config.question_encoder, config.daa, config.sga) == (
        "objects",
        "bert",
        ("bbox", "depth"),
        True,
    )
    assert (config.layers, config.hidden_size, config.spatial_dim, config.depth_bins) == (6, 768, 160, 16)
    assert config.grid_alpha == pytest.approx(1 / 3)


def test_grid_rows_default_to_no_sga():
    config = _build({"arch": "dsganet", "features": "grids"})
    assert config.sga is False and config == _build(_rows("dsganet-table4-vqa2")["DSGANet-G"])


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "dsganet", "dda": ["bbox"]},
        {"arch": "dsganet", "sag": True},
        {"arch": "dsganet", "question_encoders": "bert"},
        {"arch": "dsganet", "alpha": 0.5},
    ],
)
def test_unknown_keys_rejected(model):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _build(model)


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "dsganet", "features": "pixels"},
        {"arch": "dsganet", "question_encoder": "lstm"},
        {"arch": "dsganet", "daa": ["bbox", "semantic"]},
        {"arch": "dsganet", "daa": "bbox"},
        {"arch": "dsganet", "sga": None},
        {"arch": "dsganet", "features": "grids", "grid_alpha": 0},
        {"arch": "dsganet", "layers": 0},
        {"arch": "dsganet", "depth_bins": 0},
        {"arch": "dsganet", "depth_value": "median"},
        {"arch": "dsganet", "log_eps": 0},
        {"arch": "mcan"},
    ],
)
def test_out_of_range_or_unknown_choice_rejected(model):
    with pytest.raises(ValidationError):
        DSGANetConfig.model_validate(model)


@pytest.mark.parametrize(
    "model,message",
    [
        ({"arch": "dsganet", "features": "grids", "sga": True}, "SGA is defined on the object graph only"),
        ({"arch": "dsganet", "features": "objects", "grid_alpha": 0.5}, "grid_alpha is set with object features"),
        ({"arch": "dsganet", "daa": ["bbox", "bbox"]}, "twice"),
        ({"arch": "dsganet", "heads": 7}, "not divisible"),
    ],
)
def test_inconsistent_settings_explained(model, message):
    with pytest.raises(ValidationError, match=message):
        _build(model)


def test_relation_order_does_not_matter():
    swapped = _build({"arch": "dsganet", "daa": ["depth", "bbox"]})
    assert swapped == _build({"arch": "dsganet", "daa": ["bbox", "depth"]})


@pytest.mark.parametrize(
    "spec_id",
    ["dsganet-table4-vqa2", "dsganet-table6-relations", "dsganet-table7-ablation", "dsganet-table8-gqa-ablation"],
)
def test_rows_of_a_table_differ(spec_id):
    configs = {name: _build(model) for name, model in _rows(spec_id).items()}
    assert len(set(configs.values())) == len(configs), spec_id


def test_rows_the_paper_equates_are_equal():
    t6, t7 = _rows("dsganet-table6-relations"), _rows("dsganet-table7-ablation")
    assert _build(t6["1"]) == _build(t7["2"]) and _build(t6["4"]) == _build(t7["3"])
    full_o = _build(_rows("dsganet-table4-vqa2")["DSGANet-O"])
    assert full_o == DSGANetConfig(arch="dsganet") == _build(t7["5"])
    assert full_o == _build(_rows("dsganet-table8-gqa-ablation")["4"])
    assert full_o == _build(_rows("dsganet-table5-gqa")["DSGANet-O"])
    assert _build(_rows("dsganet-table4-vqa2")["DSGANet-G"]) == _build(t7["8"])


def test_table6_switches_are_the_relation_types():
    rows = {name: _build(model) for name, model in _rows("dsganet-table6-relations").items()}
    assert [rows[n].daa for n in "1234"] == [(), ("bbox",), ("depth",), ("bbox", "depth")]
    assert not any(c.sga for c in rows.values())
