"""`repro run --ensemble` for M4C and SA-M4C: a Table 2 row's seeds trained together give each seed's lone result (BERT
at a tenth of the rate, `lr_groups`), with each seed's test answers written as a lone run writes them."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from repro import specs
from repro.cli import app
from repro.paths import REPO_DIR

ROWS = "1 M4C†,4 M4C-Random"  # M4C's layers; SA-M4C's spatial layers with a random graph


@pytest.fixture
def table2(sandbox):
    text = (REPO_DIR / "experiments" / "sa-m4c" / "sa-m4c-table2-ablations.yaml").read_text()
    spec = yaml.safe_load(text)
    path = sandbox / "experiments" / "sa-m4c" / "sa-m4c-table2-ablations.yaml"
    path.parent.mkdir(parents=True)

    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    specs._load_all.cache_clear()
    return sandbox


def stored(sandbox):
    folder = sandbox / "results" / "sa-m4c" / "sa-m4c-table2-ablations"
    seeds = {p.name: json.loads(p.read_text()) for p in (folder / "seeds").glob("*.json")}
    answers = {p.name: json.loads(p.read_text()) for p in (folder / "predictions").glob("*.json")}
    return seeds, answers


def test_seeds_trained_together_equal_their_lone_runs(table2, runner):
    sandbox = table2
    args = ["run", "sa-m4c-table2-ablations", "--scale", "smoke", "--rows", ROWS, "--seeds", "0,1"]
    out = runner.invoke(app, [*args, "--workdir", str(sandbox / "lone")])
    assert out.exit_code == 0, out.output
    lone, lone_answers = stored(sandbox)
    shutil.rmtree(sandbox / "results" / "sa-m4c")

    out = runner.invoke(app, [*args, "--ensemble", "--workdir", str(sandbox / "together")])
    assert out.exit_code == 0, out.output
    together, answers = stored(sandbox)
    assert sorted(together) == sorted(lone) and len(lone) == 4  # two rows, two seeds
    for name in lone:
        a, b = lone[name], together[name]
        assert b["metrics"] == pytest.approx(a["metrics"], abs=0.01), name  # no dropout at this scale
        assert b["training"]["final_loss"] == pytest.approx(a["training"]["final_loss"], rel=1e-4), name
        assert b["training"]["ensemble"] == [0, 1] and "ensemble" not in a["training"]
    assert sorted(answers) == sorted(lone_answers) and len(answers) == 4
    assert runner.invoke(app, ["check", "sa-m4c-table2-ablations"]).exit_code == 0
