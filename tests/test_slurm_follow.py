"""Jobs submitted earlier can be followed: `repro run ID --wait` (without --launcher) waits for them and
`--status` shows them; a resubmission of units still pending or running is refused."""

from __future__ import annotations

import json

from repro.cli import app
from tests import slurm_stub
from tests.test_launch_slurm import SPEC, cluster  # noqa: F401 - the fixture

WORDS = ["run", "table5-ablation", "--scale", "smoke"]


def earlier_units(sandbox, states: dict[str, str]) -> None:
    """units.json as an earlier `--launcher slurm` left it, each (row -> Slurm state) a task of job 1000."""
    root = sandbox / "data" / "runs" / "slurm" / SPEC / "smoke"
    (sandbox / "slurm-state" / "tasks").mkdir(parents=True, exist_ok=True)
    units = []
    for i, (row, state) in enumerate(states.items()):
        slurm_stub.update_task(f"1000_{i}", state=state, restarts=0, cancelled=False, requeue=False, exit=None)
        folder = root / f"1000_{i}"
        units.append(
            {
                "row": row,
                "seed": 0,
                "job_id": f"1000_{i}",
                "stdout": str(folder / f"1000_{i}_0_log.out"),
                "stderr": str(folder / f"1000_{i}_0_log.err"),
                "submitted": "2020-01-01T00:00:00+00:00",
                "resources": {},
            }
        )
    root.mkdir(parents=True, exist_ok=True)
    (root / "units.json").write_text(json.dumps({"units": units}))


def test_wait_alone_follows_the_jobs_an_earlier_run_submitted(cluster, runner):  # noqa: F811
    earlier_units(cluster, {"MCAN": "FAILED", "MCAN+PE": "FAILED"})
    result = runner.invoke(app, [*WORDS, "--rows", "MCAN,MCAN+PE", "--wait"])
    assert "only with --launcher slurm" not in result.output
    assert result.exit_code == 1, result.output  # they ended, and not with a record: failed
    text = " ".join(result.output.split())
    assert "failed (FAILED)" in text and "2 unit(s) did not finish: MCAN seed 0, MCAN+PE seed 0" in text
    status = runner.invoke(app, [*WORDS, "--status"])
    assert status.exit_code == 0 and "2 failed" in " ".join(status.output.split())


def test_wait_alone_with_nothing_submitted_is_one_line(cluster, runner):  # noqa: F811
    result = runner.invoke(app, [*WORDS, "--rows", "MCAN", "--wait"])
    assert result.exit_code == 2
    assert "was submitted to Slurm" in result.output and "nothing to wait for" in result.output


def test_units_still_pending_or_running_are_not_submitted_again(cluster, runner):  # noqa: F811
    earlier_units(cluster, {"MCAN": "RUNNING", "MCAN+PE": "PENDING"})
    for row in ("MCAN", "MCAN+PE"):
        result = runner.invoke(app, [*WORDS, "--rows", row, "--launcher", "slurm"])
        assert result.exit_code == 2, result.output
        assert "already submitted and not finished" in result.output and "job 1000_" in result.output
    assert not list((cluster / "slurm-state").glob("*.sh"))  # no job array submitted
