"""mcan-pa's positive controls: Table V's rows, the mechanism's against MCAN, differing in the module alone, at Table
V's sizes and schedule, under designs fixed before their runs."""

from __future__ import annotations

import pytest

from repro.specs import resolve
from tests.families.controls import assert_a_control

TABLE = "mcan-pa-table5-ablation"
MODULES = {  # control -> the positional modules its mechanism row adds to MCAN
    "mcan-pa-control-pwa": ["pwa"],
    "mcan-pa-control-poa": ["poa"],
    "mcan-pa-control-pma": ["pma"],
    "mcan-pa-control-pa": ["pwa", "poa", "pma"],
    "mcan-pa-control-poa-contact": ["poa"],
    "mcan-pa-control-pa-contact": ["pwa", "poa", "pma"],
    "mcan-pa-control-pwa-contact": ["pwa"],
    "mcan-pa-control-pma-contact": ["pma"],
}


@pytest.mark.parametrize("ident", sorted(MODULES))
def test_a_control_is_table_fives_rows_differing_in_the_modules_alone(ident):
    spec, table = resolve(ident), resolve(TABLE)
    (claim,) = spec.claims
    row, over = spec.row(claim.row), spec.row(claim.over)
    assert over.model == table.row("MCAN").model and row.model == table.row(claim.row).model
    assert row.model["positional"] == MODULES[ident]
    assert assert_a_control(spec) <= {"positional", "fusion"}
    mine, theirs = spec.scales["synthetic"], table.scales["synthetic"]
    assert mine["sizes"] == theirs["sizes"] and mine["recipe"]["epochs"] == 56
