"""The README's share of items that need each mechanism, per column, is the one the generator gives."""

import pytest

from repro.families.dsganet.synthetic import MECHANISMS, TEMPLATES, GeneratorConfig, mechanism_share, template_of
from repro.specs import resolve, scale_settings
from tests.families.mechanism_table import readme_rows, specs_with_claims

README = "repro/families/dsganet/README.md"
# each table with the mechanisms its claims compare
TABLES = {
    "dsganet-table6-relations": ("depth", "2-D relations"),
    "dsganet-table7-ablation": ("depth", "relations"),
    "dsganet-table8-gqa-ablation": ("depth", "relations"),
}
# each positive control with the mechanism its task is built on
CONTROLS = {
    "dsganet-control-daa-depth": "depth",
    "dsganet-control-sga": "relations",
    "dsganet-control-daa-bbox": "2-D relations",
    "dsganet-control-daa-grids": "depth",
    "dsganet-control-sga-over-daa": "relations",
}


def config(ident: str) -> GeneratorConfig:
    return GeneratorConfig.from_mapping(scale_settings(resolve(ident), "synthetic")["generator"])


@pytest.mark.slow
def test_readme_shares_are_the_generators():
    assert set(TABLES) | set(CONTROLS) == specs_with_claims("dsganet")
    shares = {}
    expected = {}
    for ident, mechanisms in TABLES.items():
        spec, cfg = resolve(ident), config(ident)
        if cfg not in shares:
            shares[cfg] = mechanism_share(cfg)
        for column in spec.columns:
            for mechanism in mechanisms:
                expected[f"{spec.table.removeprefix('Table ')}: {column.name}, {mechanism}"] = shares[cfg][column.key][
                    mechanism
                ]
    assert readme_rows(README) == expected


def test_controls_ask_only_their_mechanism():
    for ident, mechanism in CONTROLS.items():
        asked = set(config(ident).asked())
        assert asked and asked <= MECHANISMS[mechanism], ident


def test_templates_are_told_apart_and_counted():
    assert {template_of(q) for q in ("What is the closest object?", "What is right of the red cube?")} == {
        "closest",
        "right_of",
    }
    cfg = GeneratorConfig(train_images=1, val_images=60, templates=tuple(TEMPLATES), min_objects=5)
    shares = mechanism_share(cfg)
    n, depth = shares["overall"]["depth"]
    assert 0 < depth < n
    rel_n, relations = shares["rel"]["relations"]
    assert rel_n == relations == shares["overall"]["relations"][1]  # Rel. is exactly the relation templates here
