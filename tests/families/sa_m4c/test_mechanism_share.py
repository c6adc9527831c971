"""The README's share of items that need the spatial relations, per column, is the one the generator gives."""

import pytest

from repro.families.sa_m4c.synthetic import GeneratorConfig, mechanism_share
from repro.specs import resolve, scale_settings
from tests.families.mechanism_table import readme_rows, specs_with_claims

README = "repro/families/sa_m4c/README.md"
TABLES = ("sa-m4c-table2-ablations", "sa-m4c-table1-textvqa", "sa-m4c-table3-stvqa", "sa-m4c-control-spatial")


@pytest.mark.slow
def test_readme_shares_are_the_generators():
    assert set(TABLES) == specs_with_claims("sa-m4c")
    configs = {}
    expected = {}
    for ident in TABLES:
        spec = resolve(ident)
        cfg = GeneratorConfig.from_mapping(scale_settings(spec, "synthetic")["generator"])
        if cfg not in configs:
            configs[cfg] = mechanism_share(cfg)
        table = spec.table.removeprefix("Table ")
        for column in spec.columns:
            if column.split != "test":  # the generated test split has no answers
                expected[f"{table}: {column.name}"] = configs[cfg]
    assert readme_rows(README) == expected


def test_share_follows_the_control_share():
    assert mechanism_share(GeneratorConfig(train_images=2, val_images=40, test_images=1, control_share=1.0))[1] == 0
    n, spatial = mechanism_share(GeneratorConfig(train_images=2, val_images=40, test_images=1, control_share=0.0))
    assert n == spatial > 0
