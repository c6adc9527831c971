"""`repro run --ensemble` for PSAC: each task's model of a Table 3 row trained for both seeds together gives each
seed's lone result without dropout (scores of all four tasks)."""

from __future__ import annotations

import pytest

from tests.conftest import copy_spec, lone_and_together

pytestmark = pytest.mark.slow  # over ~10 s: left out by `make test-fast`

RUN = ["run", "psac-table3-vpsa", "--scale", "smoke", "--rows", "w/ 1 VPSA", "--seeds", "0,1"]


def no_dropout(spec):
    # the smoke scale keeps the attention's and the classifier's dropout; with dropout a seed trained together
    # draws other masks than alone
    spec["scales"]["smoke"]["sizes"].update(attention_dropout=0.0, classifier_dropout=0.0)


def test_seeds_trained_together_equal_their_lone_runs(sandbox, runner):
    copy_spec(sandbox, "psac", "psac-table3-vpsa", no_dropout)
    lone, together = lone_and_together(runner, sandbox, RUN, "psac", "psac-table3-vpsa")
    assert sorted(together) == sorted(lone) and len(lone) == 2
    for name in lone:
        a, b = lone[name], together[name]
        assert b["metrics"] == pytest.approx(a["metrics"], abs=0.01), name
        for task, run in a["training"]["per_task"].items():
            joint = b["training"]["per_task"][task]
            assert joint["final_loss"] == pytest.approx(run["final_loss"], rel=1e-4), (name, task)
            assert joint["steps"] == run["steps"]
        assert b["training"]["ensemble"] == [0, 1] and "ensemble" not in a["training"]
