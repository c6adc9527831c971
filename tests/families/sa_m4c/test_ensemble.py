"""`repro run --ensemble` for M4C and SA-M4C: a Table 2 row's seeds trained together give each seed's lone result
(BERT at a tenth of the rate, `lr_groups`), with each seed's test answers written as a lone run writes them."""

from __future__ import annotations

import pytest

from tests.conftest import copy_spec, lone_and_together

pytestmark = pytest.mark.slow  # over ~10 s: left out by `make test-fast`

# M4C's layers; SA-M4C's spatial layers with a random graph
RUN = ["run", "sa-m4c-table2-ablations", "--scale", "smoke", "--rows", "1 M4C†,4 M4C-Random", "--seeds", "0,1"]


def test_seeds_trained_together_equal_their_lone_runs(sandbox, runner):
    copy_spec(sandbox, "sa-m4c", "sa-m4c-table2-ablations")
    lone, together = lone_and_together(runner, sandbox, RUN, "sa-m4c", "sa-m4c-table2-ablations")
    assert sorted(together) == sorted(lone) and len(lone) == 4  # two rows, two seeds
    for name in lone:
        a, b = lone[name], together[name]
        assert b["metrics"] == pytest.approx(a["metrics"], abs=0.01), name  # no dropout at this scale
        assert b["training"]["final_loss"] == pytest.approx(a["training"]["final_loss"], rel=1e-4), name
        assert b["training"]["ensemble"] == [0, 1] and "ensemble" not in a["training"]
    answers = sandbox / "results-together" / "sa-m4c-table2-ablations" / "predictions"
    assert len(list(answers.glob("*.test.json"))) == 4  # each seed's test answers, ready for the server
