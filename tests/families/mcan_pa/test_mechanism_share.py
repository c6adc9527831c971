"""The README's share of items that need positional attention, per column, is the one the generator gives."""

from itertools import islice

import pytest

from repro.families.mcan_pa.synthetic import NEEDS_POSITION, GeneratorConfig, _draws, mechanism_share, template_of
from repro.specs import resolve, scale_settings
from tests.families.mechanism_table import readme_rows, specs_with_claims

README = "repro/families/mcan_pa/README.md"
TABLES = {"mcan-pa-table5-ablation": "V", "mcan-pa-table4-pretraining": "IV"}
# each positive control with its label in the README's table
CONTROLS = {f"mcan-pa-control-{m}": f"{m.upper()} control" for m in ("pwa", "poa", "pma", "pa")}
CONTROLS |= {f"mcan-pa-control-{m}-contact": f"{m.upper()} contact control" for m in ("pwa", "poa", "pma", "pa")}


def config(ident: str) -> GeneratorConfig:
    return GeneratorConfig.from_mapping(scale_settings(resolve(ident), "synthetic")["generator"])


@pytest.mark.slow
def test_readme_shares_are_the_generators():
    assert set(TABLES) | set(CONTROLS) == specs_with_claims("mcan-pa")
    expected, shares = {}, {}  # shares: one replay of each generator (the contact controls share theirs)
    for ident, table in {**TABLES, **CONTROLS}.items():
        columns = tuple((c.name, c.key) for c in resolve(ident).columns)
        drawn = (config(ident).key(), columns)
        if drawn not in shares:
            shares[drawn] = mechanism_share(config(ident), dict(columns))
        for column, counts in shares[drawn].items():
            expected[f"{table}: {column}"] = counts
    assert readme_rows(README) == expected


def test_controls_ask_only_the_modules_questions():
    for ident in CONTROLS:  # the val split a control is scored on (its train split may be Table V's mix)
        weights = config(ident).weights_for("val")
        assert weights and {name for name, w in weights.items() if w > 0} <= NEEDS_POSITION, ident


def test_contact_controls_train_on_table_five():
    table_v = config("mcan-pa-table5-ablation")
    contacts = [config(f"mcan-pa-control-{m}-contact") for m in ("pwa", "poa", "pma", "pa")]
    assert len({c.key() for c in contacts}) == 1  # one generator
    cfg = contacts[0]
    assert cfg.question_weights is None and cfg.val_question_weights == {"on_top": 1}
    assert cfg.train_images == table_v.train_images
    # the train split is drawn first: the first train_images draws of each, byte for byte the same
    pairs = islice(zip(_draws(cfg), _draws(table_v)), cfg.train_images)
    for (split, _, scene, features, made), (_, _, s, f, m) in pairs:
        assert split == "train" and scene == s and made == m and (features == f).all()


def test_every_generated_question_has_one_template():
    cfg = GeneratorConfig(train_images=0, val_images=200, question_weights={"what_colour": 1, "is_on": 1, "extreme": 1})
    kinds = {template_of(q[0]) for *_, made in _draws(cfg) for q in made}
    assert kinds == {"what_colour", "is_on", "extreme"}
    original = {template_of(q[0]) for *_, made in _draws(GeneratorConfig(train_images=0, val_images=200)) for q in made}
    assert len(original) == 7


def test_share_counts_only_position_templates():
    cfg = GeneratorConfig(train_images=0, val_images=100, question_weights={"what_colour": 1, "how_many": 1})
    assert mechanism_share(cfg, {"All": "overall"})["All"][1] == 0
    cfg = GeneratorConfig(train_images=0, val_images=100, question_weights={"count_near": 1, "left_of": 1})
    n, needing = mechanism_share(cfg, {"All": "overall", "Y/N": "yes/no"})["All"]
    assert n == needing > 0
