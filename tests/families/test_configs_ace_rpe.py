"""The ace-rpe family config (ALBEF backbone) accepts every spec row's `model:` and rejects nonsense."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from repro.families.ace_rpe.config import CONFIGS, ALBEFConfig
from tests.families.spec_models import by_arch, rows_of, same, spec_models

BY_ARCH = by_arch(CONFIGS)
_spec_models = spec_models
_rows = rows_of("ace-rpe")
_same = same


def _build(model: dict):
    return BY_ARCH[model["arch"]].model_validate(model)


def _value(config, key: str):
    """A config's value for a spec key, the key being a field name or its alias (`lambda`)."""
    for name, field in type(config).model_fields.items():
        if key in (name, field.alias):
            return getattr(config, name)
    raise AttributeError(key)


FAMILY_MODELS = [(p, m) for p, _, m in _spec_models() if m.get("arch") in BY_ARCH]


def test_configs_have_distinct_arches():
    assert set(BY_ARCH) == {"albef"} and len(BY_ARCH) == len(CONFIGS)


def test_family_rows_found():
    assert len(FAMILY_MODELS) >= 47


@pytest.mark.parametrize("path,model", FAMILY_MODELS, ids=[f"{p.stem}:{i}" for i, (p, _) in enumerate(FAMILY_MODELS)])
def test_every_spec_model_validates(path, model):
    config = _build(model)
    for key, value in model.items():
        assert _same(_value(config, key), value), (path.name, key)


def test_every_ace_rpe_spec_row_is_of_this_family():
    for path, _, model in _spec_models():
        if path.parent.name == "ace-rpe":
            assert model.get("arch") in BY_ARCH, (path.name, model)


def test_defaults_are_the_full_model():
    config = ALBEFConfig(arch="albef")  # ACE-RPE + L_ace, 4M images
    assert (config.position_embedding, config.anchor_loss, config.pretrain) == ("ace-rpe", True, "4m")
    assert (config.mode, config.shared, config.apply_to) == ("contextual", False, ("query", "key", "value"))
    assert (config.lambda_, config.delta, config.groups, config.bt, config.bp) == (2.0, 0.05, 8, 5, 9)
    assert config.margin == 0.05 and config.task is None


def test_lambda_is_read_and_written_under_its_paper_name():
    config = ALBEFConfig.model_validate({"arch": "albef", "lambda": 3})
    assert config.lambda_ == 3.0 and config.model_dump()["lambda"] == 3.0
    assert ALBEFConfig.model_validate(config.model_dump()) == config


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "albef", "positon_embedding": "ace-rpe"},
        {"arch": "albef", "anchor_los": True},
        {"arch": "albef", "share": True},
        {"arch": "albef", "G": 8},
        {"arch": "albef", "lamda": 2},
        {"arch": "albef", "positional": ["pwa"]},
    ],
)
def test_unknown_keys_rejected(model):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _build(model)


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "albef", "position_embedding": "sinusoidal"},
        {"arch": "albef", "position_embedding": "APE"},
        {"arch": "albef", "mode": "additive"},
        {"arch": "albef", "apply_to": ["query", "output"]},
        {"arch": "albef", "pretrain": "12m"},
        {"arch": "albef", "task": "captioning"},
        {"arch": "albef", "groups": 0},
        {"arch": "albef", "lambda": 0},
        {"arch": "albef", "delta": 1.5},
        {"arch": "albef", "delta": -0.05},
        {"arch": "albef", "bt": 0},
        {"arch": "albef", "shared": "sometimes"},
        {"arch": "vl-bert"},
    ],
)
def test_out_of_range_or_unknown_choice_rejected(model):
    with pytest.raises(ValidationError):
        ALBEFConfig.model_validate(model)


@pytest.mark.parametrize(
    "model,message",
    [
        ({"arch": "albef", "position_embedding": "ape", "anchor_loss": True}, "set anchor_loss: false"),
        ({"arch": "albef", "position_embedding": "none", "mode": "bias"}, "need ace-rpe or uniform"),
        ({"arch": "albef", "position_embedding": "rpe", "shared": True}, "need ace-rpe or uniform"),
        ({"arch": "albef", "position_embedding": "uniform", "delta": 0.1}, "only position_embedding ace-rpe has"),
        ({"arch": "albef", "anchor_loss": False, "lambda": 3}, "anchor_loss is false"),
        ({"arch": "albef", "mode": "bias", "apply_to": ["query"]}, "bias mode"),
        ({"arch": "albef", "apply_to": []}, "position_embedding: none"),
        ({"arch": "albef", "apply_to": ["key", "key"]}, "twice"),
        ({"arch": "albef", "groups": 7}, "not divisible by groups"),
    ],
)
def test_inconsistent_settings_explained(model, message):
    with pytest.raises(ValidationError, match=message):
        _build(model)


def test_uniform_takes_embedding_settings_but_no_anchor_loss():
    config = _build({"arch": "albef", "position_embedding": "uniform", "mode": "bias", "groups": 4})
    assert config.anchor_loss is False and config.mode == "bias"


def test_apply_to_order_does_not_matter():
    a = _build({"arch": "albef", "apply_to": ["value", "query"]})
    assert a.apply_to == ("query", "value") and a == _build({"arch": "albef", "apply_to": ["query", "value"]})


@pytest.mark.parametrize(
    "spec_id",
    [
        "ace-rpe-table1-pe",
        "ace-rpe-table2-pe",
        "ace-rpe-table3-sota",
        "ace-rpe-table4-sota",
        "ace-rpe-table5-grounding",
        "ace-rpe-table6-shared",
        "ace-rpe-table8-mode",
        "ace-rpe-table9-qkv",
    ],
)
def test_rows_of_a_table_differ(spec_id):
    configs = {name: _build(model) for name, model in _rows(spec_id).items()}
    assert len(set(configs.values())) == len(configs), spec_id


def test_table7_only_the_default_setting_repeats():
    configs = {name: _build(model) for name, model in _rows("ace-rpe-table7-hparams").items()}
    default = ALBEFConfig(arch="albef")
    assert {n for n, c in configs.items() if c == default} == {"lambda=2", "delta=0.05", "G=8"}
    assert len(set(configs.values())) == len(configs) - 2
    assert [configs[f"G={g}"].groups for g in (1, 4, 8, 16, 32)] == [1, 4, 8, 16, 32]
    assert [configs[f"lambda={v}"].lambda_ for v in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 4.0]


def test_the_default_model_is_the_same_row_everywhere():
    default = ALBEFConfig(arch="albef")
    assert _build(_rows("ace-rpe-table1-pe")["ACE-RPE+Lace"]) == default
    assert _build(_rows("ace-rpe-table2-pe")["ACE-RPE + Lace"]) == default
    assert _build(_rows("ace-rpe-table6-shared")["Unshared"]) == default
    assert _build(_rows("ace-rpe-table8-mode")["Contextual"]) == default
    assert _build(_rows("ace-rpe-table9-qkv")["query+key+value (✓ ✓ ✓)"]) == default
    assert _build(_rows("ace-rpe-table9-qkv")["none (× × ×)"]) == _build(_rows("ace-rpe-table1-pe")["None"])


def test_table1_switches():
    rows = {name: _build(model) for name, model in _rows("ace-rpe-table1-pe").items()}
    assert [c.position_embedding for c in rows.values()] == [
        "none",
        "ape",
        "rpe",
        "ape+rpe",
        "uniform",
        "ace-rpe",
        "ace-rpe",
        "ace-rpe",
    ]
    assert rows["ACE-RPE+Lace (14M*)"].pretrain == "14m" and not rows["ACE-RPE"].anchor_loss
