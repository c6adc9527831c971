"""The sa-m4c family configs (M4C, SA-M4C) accept every spec row's `model:` and reject nonsense."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from repro.families.sa_m4c.config import CONFIGS, DATA_EVAL_FIELDS, M4CConfig, SAM4CConfig
from tests.families.spec_models import EXPERIMENTS, by_arch, rows_of, same, spec_models

BY_ARCH = by_arch(CONFIGS)
_spec_models = spec_models
_rows = rows_of("sa-m4c")
_same = same


def _build(model: dict):
    return BY_ARCH[model["arch"]].model_validate(model)


FAMILY_MODELS = [(p, m) for p, _, m in _spec_models() if m.get("arch") in BY_ARCH]


def test_configs_have_distinct_arches():
    assert set(BY_ARCH) == {"m4c", "sa-m4c"} and len(BY_ARCH) == len(CONFIGS)


def test_family_rows_found():
    assert len(FAMILY_MODELS) >= 20


@pytest.mark.parametrize("path,model", FAMILY_MODELS, ids=[f"{p.stem}:{i}" for i, (p, _) in enumerate(FAMILY_MODELS)])
def test_every_spec_model_validates(path, model):
    config = _build(model)
    assert config.arch == model["arch"]
    for key, value in model.items():
        assert getattr(config, key) == value, (path.name, key)


def test_every_sa_m4c_spec_row_is_of_this_family():
    for path, _, model in _spec_models():
        if path.parent.name == "sa-m4c":
            assert model.get("arch") in BY_ARCH, (path.name, model)


def test_defaults_are_the_papers_models():
    sa = SAM4CConfig(arch="sa-m4c")
    # Table 1 row 13: 2N->4S, c = 2, Google OCR, ResNeXt-152, with ST-VQA, beam 5.
    assert (sa.normal_layers, sa.spatial_layers, sa.context, sa.graph) == (2, 4, 2, "spatial")
    assert (sa.ocr, sa.det_backbone, sa.with_stvqa, sa.beam) == ("google", "resnext-152", True, 5)
    assert sa.heads == 12 and sa.hidden_size == 768 and sa.relation_bias is False
    m4c = M4CConfig(arch="m4c")
    # Table 1 row 4: 4N, Rosetta-en, ResNet, no ST-VQA, beam 1.
    assert (m4c.normal_layers, m4c.topk_layers, m4c.regat_layers) == (4, 0, 0)
    assert (m4c.ocr, m4c.det_backbone, m4c.with_stvqa, m4c.beam) == ("rosetta-en", "resnet-101", False, 1)
    assert DATA_EVAL_FIELDS <= set(M4CConfig.model_fields) & set(SAM4CConfig.model_fields)


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "sa-m4c", "spatal_layers": 4},
        {"arch": "sa-m4c", "seeds": 5},
        {"arch": "m4c", "normal_layer": 6},
        {"arch": "m4c", "context": 2},  # a SA-M4C setting on M4C
        {"arch": "m4c", "graph": "random"},
    ],
)
def test_unknown_keys_rejected(model):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _build(model)


@pytest.mark.parametrize(
    "model",
    [
        {"arch": "sa-m4c", "context": 0},
        {"arch": "sa-m4c", "context": 14},
        {"arch": "sa-m4c", "spatial_layers": 0},
        {"arch": "sa-m4c", "graph": "semantic"},
        {"arch": "sa-m4c", "heads": 8},
        {"arch": "sa-m4c", "ocr": "tesseract"},
        {"arch": "m4c", "det_backbone": "resnet-50"},
        {"arch": "m4c", "beam": 0},
        {"arch": "m4c", "normal_layers": -1},
        {"arch": "m4c", "top_k": 0, "topk_layers": 4},
        {"arch": "m4c", "with_stvqa": "sometimes"},
        {"arch": "m4c", "dropout": 1.0},
        {"arch": "m4c", "hidden_size": 768, "heads": 7},
    ],
)
def test_out_of_range_or_unknown_choice_rejected(model):
    with pytest.raises(ValidationError):
        _build(model)


def test_arch_must_match_the_class():
    with pytest.raises(ValidationError):
        SAM4CConfig.model_validate({"arch": "m4c"})
    with pytest.raises(ValidationError):
        M4CConfig.model_validate({"arch": "mcan"})


@pytest.mark.parametrize(
    "model,message",
    [
        ({"arch": "m4c", "normal_layers": 2, "topk_layers": 4, "regat_layers": 4}, "at most one"),
        ({"arch": "m4c", "normal_layers": 0}, "at least one layer"),
        ({"arch": "m4c", "top_k": 9}, "top_k is set but topk_layers is 0"),
        ({"arch": "sa-m4c", "heads": 16, "hidden_size": 768}, "one head per spatial relation"),
    ],
)
def test_inconsistent_settings_explained(model, message):
    with pytest.raises(ValidationError, match=message):
        _build(model)


def test_configs_are_frozen():
    config = SAM4CConfig(arch="sa-m4c")
    with pytest.raises(ValidationError):
        config.context = 3
    assert hash(config) == hash(SAM4CConfig(arch="sa-m4c"))


@pytest.mark.parametrize("spec_id", ["sa-m4c-table1-textvqa", "sa-m4c-table2-ablations", "sa-m4c-table3-stvqa"])
def test_rows_of_a_table_differ(spec_id):
    configs = {name: _build(model) for name, model in _rows(spec_id).items()}
    assert len(set(configs.values())) == len(configs), spec_id


def test_same_setting_in_two_tables_is_the_same_config():
    t1, t2 = _rows("sa-m4c-table1-textvqa"), _rows("sa-m4c-table2-ablations")
    assert _build(t1["8 M4C†"]) == _build(t2["1 M4C†"])
    assert _build(t1["11 SA-M4C (ours)"]) == _build(t2["7 SA-M4C (ours)"])
    sec6 = yaml.safe_load((EXPERIMENTS / "sa-m4c" / "sa-m4c-sec6-spatial.yaml").read_text())
    sec6_rows = {row["name"]: row["model"] for row in sec6["rows"] if "model" in row}
    assert _build(sec6_rows["M4C"]) == _build(t1["10 M4C††"])
    assert _build(sec6_rows["SA-M4C (ours)"]) == _build(t1["13 SA-M4C (ours)"])


def test_table2_variants_are_what_the_paper_says():
    rows = {name: _build(model) for name, model in _rows("sa-m4c-table2-ablations").items()}
    random, topk, regat = rows["4 M4C-Random"], rows["5 M4C-Top-9"], rows["6 M4C-ReGAT"]
    assert random.graph == "random" and random.context == 1
    assert (topk.normal_layers, topk.topk_layers, topk.top_k) == (2, 4, 9)
    assert (regat.normal_layers, regat.regat_layers, regat.topk_layers) == (2, 4, 0)
    assert rows["2 SA-M4C (ours)"].normal_layers + rows["2 SA-M4C (ours)"].spatial_layers == 6
