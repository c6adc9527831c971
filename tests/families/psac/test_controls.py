"""psac's positive control of VPSA's order signal: Table 3's two claim rows (they differ in VPSA alone) on generated
Count videos whose count only the frames' order tells, at Table 3's sizes, under a design fixed before its runs; no
paper scale."""

from __future__ import annotations

import pytest

from repro.errors import ReproError
from repro.families.psac.build import paper_data
from repro.families.psac.synthetic import GeneratorConfig
from repro.specs import resolve
from tests.families.controls import assert_a_control, keys_that_differ

CONTROL = "psac-control-vpsa-order"
TABLE = "psac-table3-vpsa"


def assert_the_tables_rows_on(spec, table, column: str) -> None:
    """The control's one claim compares two of `table`'s rows (the same models) on the control's one column."""
    (claim,) = spec.claims
    assert [c.name for c in spec.columns] == [column] and claim.column == column
    for name in (claim.row, claim.over):
        assert spec.row(name).model == table.row(name).model


def test_the_control_compares_table_3s_claim_rows_alone_on_count():
    spec = resolve(CONTROL)
    assert_the_tables_rows_on(spec, resolve(TABLE), "Count")
    assert assert_a_control(spec) == {"video_encoder", "vpsa_layers"}  # VPSA and nothing else


def test_the_control_asks_only_order_at_table_3s_sizes_and_has_no_paper_scale():
    spec, table = resolve(CONTROL), resolve(TABLE)
    mine, theirs = spec.scales["synthetic"], table.scales["synthetic"]
    assert mine["sizes"] == theirs["sizes"]
    generator = mine["generator"]
    GeneratorConfig.from_mapping(generator)  # valid settings
    assert generator["count_fixed_frames"] and generator["count_at_start"]  # only the frames' positions tell the count
    changed = keys_that_differ(generator, theirs["generator"])
    assert changed == {"count_fixed_frames", "count_at_start", "test_videos"}
    with pytest.raises(ReproError, match="positive control"):
        paper_data(spec, spec.rows[0])


def test_every_control_a_psac_table_names_is_a_psac_control():
    from repro.specs import load_all

    controls = {s.id for s in load_all() if s.paper == "psac" and s.table.startswith("Control")}
    named = {c.control for s in load_all() if s.paper == "psac" for c in s.claims if c.control}
    assert CONTROL in controls and named <= controls


def test_the_claims_naming_the_control_compare_its_rows_and_it_passed_on_the_committed_records():
    from repro.report.claims import control_status
    from repro.specs import load_all

    spec = resolve(CONTROL)
    (own,) = spec.claims
    naming = [(s, c) for s in load_all() if s.paper == "psac" for c in s.claims if c.control == CONTROL]
    assert naming, "no claim names the control"
    # each credits the mechanism the control showed: its row is the control's mechanism row (Table 3 compares the
    # control's two rows; Table 4 the same VPSA row against the Bi-LSTM, which reads frame order its own way)
    assert all(s.row(c.row).model == spec.row(own.row).model for s, c in naming)
    assert {s.id for s, c in naming if (c.row, c.over) == (own.row, own.over)} == {TABLE}
    assert control_status(CONTROL, "synthetic") == "passed"
    assert control_status(CONTROL, "smoke") == "not run"  # no committed smoke records


def test_the_character_control_compares_table_5s_rows_alone_where_the_word_table_holds_no_action_word():
    spec = resolve("psac-control-char")
    assert_the_tables_rows_on(spec, resolve("psac-table5-char"), "Action")
    assert assert_a_control(spec) == {"char_embedding"}  # the characters and nothing else
    mine, table3 = spec.scales["synthetic"], resolve(TABLE).scales["synthetic"]
    assert mine["sizes"] == table3["sizes"] and mine["recipe"]["epochs"] == table3["task_recipe"]["action"]["epochs"]
    generator = mine["generator"]
    changed = keys_that_differ(generator, table3["generator"])
    assert changed == {"word_forms", "test_videos"} and generator["word_forms"] == 1.0
    with pytest.raises(ReproError, match="positive control"):
        paper_data(spec, spec.rows[0])


COATT = "psac-control-coatt"
TABLE6 = "psac-table6-coatt"


def test_the_co_attention_control_compares_table_6s_first_and_last_rows_alone_on_frameqa_colours():
    spec, table = resolve(COATT), resolve(TABLE6)
    assert_the_tables_rows_on(spec, table, "FrameQA")
    assert assert_a_control(spec) == {"co_attention"}  # the co-attention and nothing else
    mine, theirs = spec.scales["synthetic"], table.scales["synthetic"]
    assert mine["sizes"] == theirs["sizes"]
    generator = mine["generator"]
    GeneratorConfig.from_mapping(generator)  # valid settings
    # every question asks the shirt's colour, and the colour changes at every action: only the named action's frames
    # tell it
    assert generator["color_questions"] == 1.0 and generator["color_change"] == 1.0
    changed = keys_that_differ(generator, theirs["generator"])
    assert changed == {"color_questions", "color_change", "train_videos", "test_videos"}
    with pytest.raises(ReproError, match="positive control"):
        paper_data(spec, spec.rows[0])


def test_the_co_attention_control_passed_on_the_committed_records():
    from repro.report.claims import control_status

    assert control_status(COATT, "synthetic") == "passed"
    assert control_status(COATT, "smoke") == "not run"  # no committed smoke records


def test_the_timing_control_times_table_3s_two_rows_as_table_4_times_its_rows():
    spec, table3, table4 = resolve("psac-control-vpsa-cost"), resolve(TABLE), resolve("psac-table4-bilstm")
    assert not any(r.reported for r in spec.rows) and all(c.control is None for c in spec.claims)
    times = [c for c in table4.columns if c.metric == "time"]
    assert [(c.name, c.key) for c in spec.columns] == [(c.name, c.key) for c in times]
    # one claim a time column: the network without its VPSA block over the same network with it (Table 3's rows)
    assert [(c.row, c.over, c.column) for c in spec.claims] == [("w/o VPSA", "w/ 1 VPSA", c.name) for c in times]
    for name in ("w/o VPSA", "w/ 1 VPSA"):
        assert spec.row(name).model == table3.row(name).model
    assert keys_that_differ(spec.rows[0].model, spec.rows[1].model) == {"video_encoder", "vpsa_layers"}
    assert spec.row("w/ 1 VPSA").model == table4.row("PSAC").model  # the row Table 4's time claims credit
    assert spec.scales["synthetic"]["timing"] == table4.scales["synthetic"]["timing"]  # measured the same way
    design = spec.design
    assert design.alpha == 0.05 and "paper" not in design.seeds and spec.design_hash("synthetic")
    with pytest.raises(ReproError, match="positive control"):
        paper_data(spec, spec.rows[0])


def test_table_4s_time_claims_name_the_timing_control_and_it_passed_on_the_committed_records():
    from repro.report.claims import control_status

    table4 = resolve("psac-table4-bilstm")
    timed = [c for c in table4.claims if table4.column(c.column).metric == "time"]
    assert len(timed) == 4 and all(c.control == "psac-control-vpsa-cost" for c in timed)
    assert control_status("psac-control-vpsa-cost", "synthetic") == "passed"
    assert control_status("psac-control-vpsa-cost", "smoke") == "not run"  # no committed smoke records
