"""The README's share of items that need frame order (VPSA) and characters, per column, is the one the generator
gives."""

import pytest

from repro.families.psac.synthetic import GeneratorConfig, mechanism_share, possible_counts
from repro.specs import resolve, scale_settings
from tests.families.mechanism_table import readme_rows, specs_with_claims

README = "repro/families/psac/README.md"
# the README's tables: its label -> the specs it stands for and the mechanism counted
LABELS = {
    "3": (("psac-table3-vpsa",), "order"),
    "4": (("psac-table4-bilstm",), "order"),
    "5": (("psac-table5-char",), "characters"),
}
# co-attention: every item needs it, nothing to count (Table 6, and its control's colour questions); the timing
# control times steps on random inputs: it asks no generated item
COUNTED_IN_TEXT = {"psac-table6-coatt", "psac-control-coatt", "psac-control-vpsa-cost"}
CONTROLS = {  # each positive control: its one column and mechanism
    "psac-control-vpsa-order": ("count", "order"),
    "psac-control-char": ("action", "characters"),
}
TASKS = {"Action": "action", "Trans": "transition", "FrameQA": "frameqa", "Count": "count"}


def config(ident: str) -> GeneratorConfig:
    return GeneratorConfig.from_mapping(scale_settings(resolve(ident), "synthetic")["generator"])


@pytest.mark.slow
def test_readme_shares_are_the_generators():
    covered = {ident for idents, _ in LABELS.values() for ident in idents}
    assert covered | COUNTED_IN_TEXT | set(CONTROLS) == specs_with_claims("psac")
    # Table 6 is described in the text with Table 4's items: the same generator since its run under its design
    assert config("psac-table6-coatt") == config("psac-table4-bilstm")
    expected = {}
    for label, (idents, mechanism) in LABELS.items():
        assert len({config(ident) for ident in idents}) == 1  # one generator a label: one set of shares
        shares = mechanism_share(config(idents[0]))
        for ident in idents:
            assert [c.name for c in resolve(ident).columns][:4] == list(TASKS)
        for column, task in TASKS.items():
            expected[f"{label}: {column}"] = shares[task][mechanism]
    assert readme_rows(README) == expected


@pytest.mark.slow
def test_controls_ask_only_their_mechanism():
    for ident, (task, mechanism) in CONTROLS.items():
        assert [c.key for c in resolve(ident).columns] == [task]
        n, needing = mechanism_share(config(ident))[task][mechanism]
        assert n == config(ident).test_videos and needing == n, ident  # every Test item needs it


def test_possible_counts():
    cfg = GeneratorConfig(rep_frames=2, max_count=3)
    assert possible_counts(cfg, 1) == [1]
    assert possible_counts(cfg, 3) == [1, 2, 3]
    assert possible_counts(cfg, 9) == [3]
    fixed = GeneratorConfig(rep_frames=2, max_count=3, count_fixed_frames=True)
    assert possible_counts(fixed, 6) == [1, 2, 3]


def test_shares_follow_the_settings():
    small = {"train_videos": 60, "test_videos": 40, "frames": 20, "max_count": 3, "rep_frames": 2}
    plain = mechanism_share(GeneratorConfig(**small))
    assert plain["transition"]["order"] == (40, 40) and plain["action"]["order"][1] == 0
    assert 0 < plain["count"]["order"][1] < 40
    fixed = mechanism_share(GeneratorConfig(**small, count_fixed_frames=True))
    assert fixed["count"]["order"] == (40, 40)
    forms = mechanism_share(GeneratorConfig(**small, word_forms=1.0))
    assert all(forms[task]["characters"] == (40, 40) for task in ("transition", "count"))
