"""`repro submit` sends a real server only predictions of a full paper-scale run: a file made at the smoke or
synthetic scale, by a --limit run (.partial) or by a variant is refused before any request, --yes or not."""

from __future__ import annotations

import pytest

from tests.test_submit import home, one_line, stub, submit, vqa_predictions, vqa_questions  # noqa: F401

PREDICTIONS = "results/mcan-pa/mcan-pa-table3-vqa2/predictions"


@pytest.mark.parametrize(
    ("where", "fragment"),
    [
        (f"{PREDICTIONS}/mcan-pa.smoke.seed0.test-dev.json", "the smoke scale"),
        (f"{PREDICTIONS}/mcan-pa.synthetic.seed1.test-dev.json", "the synthetic scale"),
        (f"{PREDICTIONS}/mcan-pa.seed0.test-dev.partial.json", "--limit (.partial)"),
        ("results/variants/v1/mcan-pa/mcan-pa-table3-vqa2/predictions/mcan-pa.seed0.test-dev.json", "a variant"),
    ],
)
def test_predictions_not_from_a_paper_scale_run_are_refused_whatever_the_answer(
    runner,
    sandbox,
    stub,  # noqa: F811
    where,
    fragment,
):
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / where)
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 2
    line = one_line(result)
    assert fragment in line and "nothing sent" in line
    assert stub.calls("POST", "/api/jobs/challenge/") == []
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), input="y\n")
    assert result.exit_code == 2 and stub.calls("POST", "/api/jobs/challenge/") == []


def test_a_paper_scale_file_passes(runner, sandbox, stub):  # noqa: F811
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / PREDICTIONS / "mcan-pa.seed0.test-dev.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--yes")
    assert result.exit_code == 0, result.output


def test_a_dry_run_checks_such_a_file_and_says_it_would_be_refused(runner, sandbox, stub):  # noqa: F811
    vqa_questions(sandbox)
    preds = vqa_predictions(sandbox / PREDICTIONS / "mcan-pa.smoke.seed0.test-dev.json")
    result = submit(runner, "vqa2-test-dev", "-p", str(preds), "--dry-run")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert (
        "passed every check" in text
        and "made by the smoke scale (generated data): a submission of it is refused" in text
    )
