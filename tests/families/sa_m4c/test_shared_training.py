"""Rows that differ only in how they are evaluated share one training per seed (`repro.shared_training`):
Table 1's row 10 is row 8 decoded with beam 5, so at a generated scale it reads row 8's stored network and trains
no step; a row whose network differs trains its own."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from repro import families, shared_training
from repro.cli import app
from repro.families import load_recipe
from repro.families.sa_m4c.config import DATA_EVAL_FIELDS
from tests.conftest import copy_spec

ROWS = {"8 M4C†": "8_M4C-dagger", "10 M4C††": "10_M4C-dagger-dagger", "11 SA-M4C (ours)": "11_SA-M4C_ours"}


def _key(config: dict, seed: int = 0, together=None, weights: float = 0.0):
    ctx = SimpleNamespace(config=config, hooks=SimpleNamespace(evaluation_fields=DATA_EVAL_FIELDS))
    model = torch.nn.Linear(2, 2)
    for parameter in model.parameters():
        torch.nn.init.constant_(parameter, weights)
    return shared_training.key(ctx, model, load_recipe("sa-m4c/textvqa").replace(seed=seed), "data", together)[0]


def test_the_key_leaves_out_the_evaluation_fields_and_nothing_that_trains():
    row8 = {"arch": "m4c", "normal_layers": 6, "ocr": "google", "with_stvqa": False, "beam": 1}
    row10 = {**row8, "with_stvqa": True, "beam": 5}
    assert families.implementation(families.by_paper("sa-m4c")).evaluation_fields == DATA_EVAL_FIELDS
    assert _key(row8) == _key(row10)
    assert _key(row8, seed=1) != _key(row8) and _key(row8, weights=1.0) != _key(row8)
    assert _key({**row8, "normal_layers": 4}) != _key(row8)  # the network's own fields count
    assert _key(row8, together=[0, 1]) != _key(row8)  # seeds trained together round otherwise than alone


@pytest.mark.slow
def test_a_row_decoded_otherwise_reads_the_stored_training_and_trains_no_step(sandbox, runner):
    copy_spec(sandbox, "sa-m4c", "sa-m4c-table1-textvqa")
    rows = ",".join(ROWS)
    words = ["run", "sa-m4c-table1-textvqa", "--scale", "smoke", "--rows", rows, "--seeds", "0,1", "--ensemble"]
    out = runner.invoke(app, [*words, "-j", "1", "--workdir", str(sandbox / "work")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    seeds = sandbox / "results" / "sa-m4c" / "sa-m4c-table1-textvqa" / "seeds"
    training = {
        (row, seed): json.loads((seeds / f"{stem}.smoke.seed{seed}.json").read_text())["training"]
        for row, stem in ROWS.items()
        for seed in (0, 1)
    }
    for seed in (0, 1):
        first, again, other = (training[row, seed] for row in ROWS)
        assert first["reused"] is False and other["reused"] is False and first["steps"] > 0
        assert again["reused"] is True and again["hash"] == first["hash"] != other["hash"]
        assert again["steps"] == first["steps"] and again["final_loss"] == first["final_loss"]
        assert again["trained_by"]["row"] == "8 M4C†" and again["trained_by"]["seed"] == seed
    logs = sorted(str(p.relative_to(sandbox / "work")) for p in (sandbox / "work").rglob("train.jsonl"))
    stems = (ROWS["11 SA-M4C (ours)"], ROWS["8 M4C†"])
    assert logs == [f"sa-m4c-table1-textvqa/smoke/{s}/seed{seed}/train.jsonl" for s in stems for seed in (0, 1)]
    provenance = json.loads(
        (sandbox / "data" / "trained" / training["8 M4C†", 0]["hash"] / "provenance.json").read_text()
    )
    assert provenance["key"]["seeds"] == [0, 1] and provenance["trained_by"]["spec"] == "sa-m4c-table1-textvqa"


def test_rows_that_read_a_stored_training_run_after_the_rows_that_train():
    """With -j 2, row 10 beside row 8 would wait on row 8's lock while row 11 could train: the twins go last."""
    from repro import specs
    from repro.launch.units import groups
    from repro.run import make_plan

    rows = ["8 M4C†", "10 M4C††", "11 SA-M4C (ours)", "13 SA-M4C (ours)"]  # the spec's order
    for scale in ("synthetic", "smoke"):  # rows trained together, and seeds alone
        plan = make_plan(specs.resolve("sa-m4c-table1-textvqa"), scale, row_names=rows, seeds=[0, 1])
        order = [(group[0].row.name, len(group)) for group in groups(plan, list(plan.units))]
        if scale == "synthetic":
            assert order == [("8 M4C†", 2), ("11 SA-M4C (ours)", 2), ("10 M4C††", 2), ("13 SA-M4C (ours)", 2)]
        else:
            assert [name for name, _ in order] == [rows[0]] * 2 + [rows[2]] * 2 + [rows[1]] * 2 + [rows[3]] * 2
