"""The psac family config accepts every spec row's `model:` and rejects nonsense."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from repro.families.psac.config import CONFIGS, PSACConfig
from tests.families.spec_models import by_arch, rows_of, same, spec_models

BY_ARCH = by_arch(CONFIGS)
_spec_models = spec_models
_rows = rows_of("psac")
_same = same


def _build(model: dict):
    return BY_ARCH[model["arch"]].model_validate(model)


FAMILY_MODELS = [(p, m) for p, _, m in _spec_models() if m.get("arch") in BY_ARCH]


def test_configs_have_distinct_arches():
    assert set(BY_ARCH) == {"psac"} and len(BY_ARCH) == len(CONFIGS)


def test_family_rows_found():
    assert len(FAMILY_MODELS) >= 15


@pytest.mark.parametrize("path,model", FAMILY_MODELS, ids=[f"{p.stem}:{i}" for i, (p, _) in enumerate(FAMILY_MODELS)])
def test_every_spec_model_validates(path, model):
    config = _build(model)
    for key, value in model.items():
        assert _same(getattr(config, key), value), (path.name, key)


def test_every_psac_spec_row_is_of_this_family():
    for path, _, model in _spec_models():
        if path.parent.name == "psac":
            assert model.get("arch") in BY_ARCH, (path.name, model)


def test_defaults_are_the_full_model():
    config = PSACConfig(arch="psac")  # PSAC(R) of Table 2
    assert (config.video_features, config.video_encoder, config.vpsa_layers) == ("resnet", "vpsa", 1)
    assert config.char_embedding is True and config.co_attention == ("q2v", "v2q")
    assert (config.heads, config.num_frames, config.word_dim, config.char_dim) == (8, 35, 300, 64)
    assert config.task is None


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "psac", "vpsa_layer": 2},
        {"arch": "psac", "char_embeding": False},
        {"arch": "psac", "coattention": ["q2v"]},
        {"arch": "psac", "positional": ["pwa"]},
    ],
)
def test_unknown_keys_rejected(model):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _build(model)


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "psac", "vpsa_layers": -1},
        {"arch": "psac", "video_encoder": "lstm"},
        {"arch": "psac", "video_features": "flow"},
        {"arch": "psac", "co_attention": ["q2v", "both"]},
        {"arch": "psac", "co_attention": "q2v"},
        {"arch": "psac", "task": "counting"},
        {"arch": "psac", "num_frames": 0},
        {"arch": "psac", "heads": 0},
        {"arch": "psac", "dropout": -0.1},
        {"arch": "psac", "char_embedding": "maybe"},
        {"arch": "mcan"},
    ],
)
def test_out_of_range_or_unknown_choice_rejected(model):
    with pytest.raises(ValidationError):
        PSACConfig.model_validate(model)


@pytest.mark.parametrize(
    "model,message",
    [
        ({"arch": "psac", "video_encoder": "vpsa", "vpsa_layers": 0}, "needs vpsa_layers >= 1"),
        ({"arch": "psac", "video_encoder": "none", "vpsa_layers": 2}, "VPSA blocks exist only"),
        ({"arch": "psac", "video_encoder": "bilstm", "vpsa_layers": 1}, "VPSA blocks exist only"),
        ({"arch": "psac", "bilstm_hidden": 512}, "only sizes the Bi-LSTM"),
        ({"arch": "psac", "co_attention": ["q2v", "q2v"]}, "twice"),
        ({"arch": "psac", "char_embedding": False, "char_dim": 32}, "char_embedding is false"),
    ],
)
def test_inconsistent_settings_explained(model, message):
    with pytest.raises(ValidationError, match=message):
        _build(model)


def test_co_attention_order_does_not_matter():
    a = _build({"arch": "psac", "co_attention": ["v2q", "q2v"]})
    b = _build({"arch": "psac", "co_attention": ["q2v", "v2q"]})
    assert a == b and hash(a) == hash(b)


def test_no_encoder_rows_need_not_say_zero_layers():
    config = _build({"arch": "psac", "video_encoder": "bilstm"})
    assert config.vpsa_layers == 0 and config.bilstm_hidden == 1024


def test_task_is_set_per_column():
    row = _rows("psac-table2-sota")["PSAC(R)"]
    tasks = {t: _build({**row, "task": t}) for t in ("action", "transition", "frameqa", "count")}
    assert len(set(tasks.values())) == 4


@pytest.mark.parametrize("spec_id", ["psac-table3-vpsa", "psac-table4-bilstm", "psac-table5-char", "psac-table6-coatt"])
def test_rows_of_a_table_differ(spec_id):
    configs = {name: _build(model) for name, model in _rows(spec_id).items()}
    assert len(set(configs.values())) == len(configs), spec_id


def test_full_model_is_the_same_in_every_table():
    full = _build(_rows("psac-table2-sota")["PSAC(R)"])
    assert full == PSACConfig(arch="psac")
    assert full == _build(_rows("psac-table3-vpsa")["w/ 1 VPSA"])
    assert full == _build(_rows("psac-table4-bilstm")["PSAC"])
    assert full == _build(_rows("psac-table5-char")["PSAC w/ Char."])
    assert full == _build(_rows("psac-table6-coatt")["with QA-Co"])


def test_ablations_are_what_the_paper_says():
    t6 = {name: _build(model) for name, model in _rows("psac-table6-coatt").items()}
    assert [t6[n].co_attention for n in ("without QA-Co", "with Q2V", "with QA-Co")] == [(), ("q2v",), ("q2v", "v2q")]
    t3 = {name: _build(model) for name, model in _rows("psac-table3-vpsa").items()}
    assert [c.vpsa_layers for c in t3.values()] == list(range(7))
    assert t3["w/o VPSA"].video_encoder == "none"
    bilstm = _build(_rows("psac-table4-bilstm")["Bi-LSTM"])
    assert (bilstm.video_encoder, bilstm.bilstm_hidden, bilstm.vpsa_layers) == ("bilstm", 1024, 0)
    assert _build(_rows("psac-table5-char")["PSAC w/o Char."]).char_embedding is False
