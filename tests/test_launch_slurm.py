"""`repro run --launcher slurm` end to end on stub Slurm commands (tests/slurm_stub.py): submission as a job
array through submitit, a preempted job that is requeued and resumes from its checkpoint, records written
by the jobs, `--status`; and the launcher's parts that need no job."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest

from repro.cli import app
from repro.errors import ReproError
from repro.launch import slurm
from repro.paths import REPO_DIR
from repro.specs import row_slug
from tests import slurm_stub

SPEC = "mcan-pa-table5-ablation"
ROWS = ("MCAN", "MCAN+PA (ours)")


@pytest.fixture
def cluster(sandbox, monkeypatch):
    """The table's spec in the sandbox and the stub Slurm commands first on PATH; ends what it started."""
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{SPEC}.yaml", folder)
    state = sandbox / "slurm-state"
    for key, value in slurm_stub.install(sandbox / "bin", state).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_DIR), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield sandbox
    slurm_stub.kill_all(state)  # jobs a failed test left running


def unit_folder(sandbox: Path, row: str, seed: int = 0) -> Path:
    return sandbox / "data" / "runs" / SPEC / "smoke" / row_slug(row) / f"seed{seed}"


@pytest.mark.slow
def test_smoke_table_on_slurm_survives_a_requeue_and_fills_the_table(cluster, runner, monkeypatch):
    trigger = unit_folder(cluster, ROWS[0]) / "train.jsonl"
    monkeypatch.setenv("SLURM_STUB_PREEMPT", f"1000_0:{trigger}")  # the first unit, once it has trained a step
    options = ["--partition", "debug", "--account", "proj", "--qos", "high"]
    options += ["--slurm-opt", "constraint=cpu", "--slurm-opt", "time=00:30:00"]
    result = runner.invoke(
        app,
        ["run", "table5-ablation", "--scale", "smoke", "--rows", ",".join(ROWS), "--launcher", "slurm", *options]
        + ["--wait"],
    )
    assert result.exit_code == 0, result.output
    assert "submitted MCAN seed 0: job 1000_0" in result.output

    # one job array, with the family's resources and the options passed through
    script = (cluster / "slurm-state" / "1000.sh").read_text()
    for line in ("--array=0-1%2", "--partition=debug", "--account=proj", "--qos=high", "--constraint=cpu"):
        assert f"#SBATCH {line}\n" in script
    assert "#SBATCH --time=30\n" in script and "#SBATCH --cpus-per-task=2\n" in script
    assert "#SBATCH --mem=4GB\n" in script and "gpus" not in script  # CPUs at the smoke scale

    # the first unit was preempted mid-training, requeued once, and resumed from its checkpoint
    tasks = {t: json.loads((cluster / "slurm-state" / "tasks" / f"{t}.json").read_text()) for t in ("1000_0", "1000_1")}
    assert tasks["1000_0"]["history"] == ["PENDING", "RUNNING", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"]
    assert tasks["1000_1"]["history"] == ["PENDING", "RUNNING", "COMPLETED"]
    state = json.loads((unit_folder(cluster, ROWS[0]) / "state.json").read_text())
    assert state["resumed_from"] is not None and state["step"] == 6  # 96 questions, batch 16, one epoch
    log = (cluster / "data" / "runs" / "slurm" / SPEC / "smoke" / "1000_0" / "1000_0_0_log.out").read_text()
    assert "attempt 2, resuming from its checkpoint" in log

    # each job wrote its unit's record and its row's record
    results = cluster / "results" / "mcan-pa" / SPEC
    for row in ROWS:
        record = json.loads((results / f"{row_slug(row)}.smoke.json").read_text())
        assert record["seeds"] == [0] and set(record["metrics"]) == {"Y/N", "Num", "Other", "All"}
        seed = json.loads((results / "seeds" / f"{row_slug(row)}.smoke.seed0.json").read_text())
        assert seed["training"]["steps"] == 6

    # the unit resumed mid-epoch ends as the same unit trained here without an interruption (in a data folder of
    # its own: in the cluster's, the run would read the training the job stored, repro.shared_training)
    monkeypatch.setenv("REPRO_RESULTS", str(cluster / "results-local"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(cluster / "data-local"))
    local = runner.invoke(
        app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--workdir", str(cluster / "local")]
    )
    assert local.exit_code == 0, local.output
    alone = json.loads((cluster / "results-local" / "mcan-pa" / SPEC / "seeds" / "MCAN.smoke.seed0.json").read_text())
    resumed = json.loads((results / "seeds" / "MCAN.smoke.seed0.json").read_text())
    assert alone["training"]["reused"] is False and alone["training"]["hash"] == resumed["training"]["hash"]
    own = ("reused", "trained_by")  # who trained it and when: the store's account of the training
    assert resumed["metrics"] == alone["metrics"]
    assert {k: v for k, v in resumed["training"].items() if k not in own} == {
        k: v for k, v in alone["training"].items() if k not in own
    }
    monkeypatch.setenv("REPRO_RESULTS", str(cluster / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(cluster / "data"))

    status = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--status"])
    assert status.exit_code == 0, status.output
    assert status.output.count("done (COMPLETED)") == 2 and "2 done" in status.output

    # submitting the same units again is refused while they have results
    again = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--launcher", "slurm"])
    assert again.exit_code == 2 and "already has results" in again.output


@pytest.mark.slow
def test_section_6s_sa_m4c_unit_waits_for_its_m4c_unit_and_reads_its_scores(cluster, runner):
    """sa-m4c Section 6: SA-M4C's gains over M4C read the val scores the M4C unit of its seed stores; its job is
    submitted after M4C's with `afterok` on it (the stub starts it once M4C's completed), and does not retrain M4C."""
    folder = cluster / "experiments" / "sa-m4c"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "sa-m4c" / "sa-m4c-sec6-spatial.yaml", folder)
    words = ["run", "sa-m4c-sec6-spatial", "--scale", "smoke", "--rows", "M4C,SA-M4C (ours)", "--launcher", "slurm"]
    result = runner.invoke(app, [*words, "--wait"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "submitted M4C seed 0: job 1000 " in result.output
    assert "submitted SA-M4C (ours) seed 0: job 1001 " in result.output
    assert "SA-M4C (ours) seed 0: job 1001 pending" in result.output  # while M4C's job ran
    assert "#SBATCH --dependency=afterok:1000\n" in (cluster / "slurm-state" / "1001.sh").read_text()
    assert "dependency" not in (cluster / "slurm-state" / "1000.sh").read_text()
    runs = cluster / "data" / "runs" / "sa-m4c-sec6-spatial" / "smoke"
    assert (runs / "M4C" / "seed0" / "val_scores.json").is_file()
    assert not (runs / row_slug("SA-M4C (ours)") / "seed0" / "baseline").exists()  # M4C not trained again
    record = json.loads((cluster / "results" / "sa-m4c" / "sa-m4c-sec6-spatial" / "SA-M4C_ours.smoke.json").read_text())
    assert {"D_spa gain", "D_spa+ocr gain"} <= set(record["metrics"])


@pytest.mark.slow
def test_psacs_tasks_are_jobs_of_their_own_at_paper_scale_and_the_units_job_scores_them(cluster, runner):
    """psac at paper scale: each TGIF-QA task of a unit trains in a job of its own (its task's GPU-hours), storing
    its score; the unit's own job waits for the four (afterok) and writes the record from what they stored."""
    from tests.families.psac.paper_fixtures import write_psac_paper_fixtures
    from tests.families.psac.test_paper_run import QUICK

    folder = cluster / "experiments" / "psac"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "psac" / "psac-table2-sota.yaml", folder)
    write_psac_paper_fixtures(cluster / "data", train=4, test=2)
    assert runner.invoke(app, ["prepare", "tgif-qa"]).exit_code == 0
    words = ["run", "psac-table2-sota", "--rows", "PSAC(R)", "--limit", "2", *QUICK, "--launcher", "slurm"]
    dry = runner.invoke(app, [*words, "--dry-run"], env={"COLUMNS": "400"})
    assert dry.exit_code == 0, dry.output
    assert "slurm: PSAC(R): per seed, action: 1 GPU(s)" in dry.output and "then one job that scores" in dry.output
    result = runner.invoke(app, [*words, "--wait"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    tasks = ("action", "transition", "frameqa", "count")
    for job, task in zip(range(1000, 1004), tasks):
        assert f"submitted PSAC(R) seed 0, {task}: job {job} " in result.output
    assert "submitted PSAC(R) seed 0: job 1004 " in result.output
    script = (cluster / "slurm-state" / "1004.sh").read_text()
    assert "#SBATCH --dependency=afterok:1000:1001:1002:1003\n" in script and "#SBATCH --time=60\n" in script
    [unit] = (cluster / "data" / "runs").rglob("PSAC_R/seed0")
    assert all((unit / task / "result.json").is_file() for task in tasks)
    [record] = (cluster / "results").rglob("PSAC_R.seed0.json")
    training = json.loads(record.read_text())["training"]
    assert set(training["per_task"]) == set(tasks) and all(t["steps"] == 1 for t in training["per_task"].values())
    [units] = (cluster / "data" / "runs" / "slurm").rglob("units.json")
    [entry] = json.loads(units.read_text())["units"]
    assert entry["job_id"] == "1004" and entry["parts"] == dict(zip(tasks, ["1000", "1001", "1002", "1003"]))


@pytest.mark.parametrize(
    "ident, row",
    [
        ("mcan-pa-table5-ablation", "MCAN"),
        ("psac-table2-sota", "PSAC(R)"),
        ("sa-m4c-table1-textvqa", "6 M4C†"),
        ("dsganet-table7-ablation", "5"),
        ("ace-rpe-table1-pe", "ACE-RPE"),
    ],
)
def test_a_paper_scale_unit_reaches_its_job(sandbox, ident, row):
    """A Slurm job receives its units pickled: every family's paper-scale unit pickles, its data needs without their
    on-disk checks (closures, which a job does not use)."""
    from repro.run import make_plan
    from repro.specs import resolve

    [unit] = make_plan(resolve(ident, REPO_DIR / "experiments"), "paper", [row]).units
    back = pickle.loads(pickle.dumps(unit))
    assert back.row == unit.row and back.config_hash == unit.config_hash
    assert [n.dataset for n in back.needs] == [n.dataset for n in unit.needs] and back.missing == unit.missing


def test_a_dependent_job_whose_prerequisite_failed_never_starts(cluster, monkeypatch):
    """The stub honours afterok as Slurm does: a job waiting on a failed one is cancelled, never run."""
    import subprocess

    state = cluster / "slurm-state"
    scripts = {name: cluster / f"{name}.sh" for name in ("first", "second")}
    scripts["first"].write_text("#!/bin/bash\nexit 3\n")
    scripts["second"].write_text(f"#!/bin/bash\n#SBATCH --dependency=afterok:1000\ntouch {cluster / 'ran'}\n")
    env = {**os.environ, "SLURM_STUB_STATE": str(state)}
    for name in ("first", "second"):
        done = subprocess.run([sys.executable, slurm_stub.__file__, "sbatch", str(scripts[name])], env=env)
        assert done.returncode == 0
    deadline = __import__("time").monotonic() + 30
    while json.loads((state / "tasks" / "1001.json").read_text())["state"] != "CANCELLED":
        assert __import__("time").monotonic() < deadline
        __import__("time").sleep(0.2)
    assert json.loads((state / "tasks" / "1000.json").read_text())["state"] == "FAILED"
    assert not (cluster / "ran").exists()


@pytest.mark.slow
def test_a_rows_seeds_trained_together_are_one_job_that_resumes_after_a_requeue(cluster, runner, monkeypatch):
    """`ensemble: true`: one job for the row's two seeds, preempted mid-training, requeued, resumed from both
    seeds' checkpoints; each seed its own record, equal to the same ensemble trained here without a stop."""
    import yaml

    spec_path = cluster / "experiments" / "mcan-pa" / f"{SPEC}.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["scales"]["smoke"].update(seeds=[0, 1], ensemble=True)
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    row = ROWS[1]
    trigger = unit_folder(cluster, row, 1) / "train.jsonl"
    monkeypatch.setenv("SLURM_STUB_PREEMPT", f"1000:{trigger}")  # one job (not an array), once it trained a step
    words = ["run", "table5-ablation", "--scale", "smoke", "--rows", row]
    result = runner.invoke(app, [*words, "--launcher", "slurm", "--wait"])
    assert result.exit_code == 0, result.output
    assert f"submitted {row} seeds 0,1 together: job 1000 " in " ".join(result.output.split())
    task = json.loads((cluster / "slurm-state" / "tasks" / "1000.json").read_text())
    assert task["history"] == ["PENDING", "RUNNING", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"]
    log = (cluster / "data" / "runs" / "slurm" / SPEC / "smoke" / "1000" / "1000_0_log.out").read_text()
    assert f"{row} seeds 0,1 together, attempt 2, resuming from its checkpoint" in log
    results = cluster / "results" / "mcan-pa" / SPEC
    resumed = {}
    for seed in (0, 1):
        state = json.loads((unit_folder(cluster, row, seed) / "state.json").read_text())
        assert state["resumed_from"] is not None and state["step"] == 6 and state["final_loss"] is not None
        resumed[seed] = json.loads((results / "seeds" / f"{row_slug(row)}.smoke.seed{seed}.json").read_text())
        assert resumed[seed]["training"]["ensemble"] == [0, 1]
    assert json.loads((results / f"{row_slug(row)}.smoke.json").read_text())["seeds"] == [0, 1]

    # the same two seeds trained together here, without a stop, end the same
    monkeypatch.setenv("REPRO_RESULTS", str(cluster / "results-local"))
    local = runner.invoke(app, [*words, "--workdir", str(cluster / "local")])
    assert local.exit_code == 0, local.output
    for seed in (0, 1):
        name = f"{row_slug(row)}.smoke.seed{seed}.json"
        alone = json.loads((cluster / "results-local" / "mcan-pa" / SPEC / "seeds" / name).read_text())
        assert resumed[seed]["metrics"] == alone["metrics"]
        assert resumed[seed]["training"]["final_loss"] == pytest.approx(alone["training"]["final_loss"], rel=1e-6)
    monkeypatch.setenv("REPRO_RESULTS", str(cluster / "results"))

    status = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--status"])
    assert status.exit_code == 0, status.output
    assert status.output.count("done (COMPLETED)") == 2 and "2 done" in status.output
    status = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--status", "--format", "json"])
    assert status.exit_code == 0, status.output
    units = json.loads(status.output)["units"]
    assert [(u["seed"], u["job_id"], u["state"], u["together"]) for u in units] == [
        (0, "1000", "done", [0, 1]),
        (1, "1000", "done", [0, 1]),
    ]
    assert all(Path(u["record"]).is_file() and Path(u["stdout"]).is_file() for u in units)


def test_status_shows_pending_running_failed_and_done_with_logs(cluster, runner):
    """--status reads sacct (the stub's task files here) and the results store, without running a job."""
    root = cluster / "data" / "runs" / "slurm" / SPEC / "smoke"
    (cluster / "slurm-state" / "tasks").mkdir()
    rows = ["MCAN", "MCAN+PE", "MCAN+PWA", "MCAN+POA"]
    states = ["PENDING", "RUNNING", "FAILED", "COMPLETED"]
    units = []
    for i, (row, state) in enumerate(zip(rows, states)):
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
    failed = root / "1000_2"
    failed.mkdir(parents=True)
    with open(failed / "1000_2_0_result.pkl", "wb") as handle:
        pickle.dump(("error", "Traceback ...\nReproError: MCAN+PWA seed 0 failed: out of data"), handle)
    (root / "units.json").write_text(json.dumps({"units": units}))
    result = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--status"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "pending (PENDING)" in text and "running (RUNNING)" in text and "failed (FAILED)" in text
    assert "out of data" in result.output.replace("\n", "").replace("│", "").replace(" ", " ")
    # COMPLETED without a record in the results store is no success
    assert "failed (COMPLETED)" in text and "2 failed, 1 pending, 1 running" in text
    assert "1000_0_0_log.out" in result.output.replace("\n", "").replace(" ", "").replace("│", "")

    # the same as JSON, one object per unit with every key (docs/cluster.md)
    result = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--status", "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["spec"], out["scale"], out["variant"]) == (SPEC, "smoke", None)
    keys = ["row", "seed", "state", "slurm_state", "job_id", "stdout", "stderr", "record", "error", "together"]
    assert all(list(u) == keys for u in out["units"])
    got = [(u["row"], u["seed"], u["job_id"], u["state"], u["slurm_state"]) for u in out["units"]]
    assert got == [
        ("MCAN", 0, "1000_0", "pending", "PENDING"),
        ("MCAN+PE", 0, "1000_1", "running", "RUNNING"),
        ("MCAN+PWA", 0, "1000_2", "failed", "FAILED"),
        ("MCAN+POA", 0, "1000_3", "failed", "COMPLETED"),
    ]
    assert out["units"][2]["error"] == "ReproError: MCAN+PWA seed 0 failed: out of data"
    assert out["units"][0]["stdout"] == str(root / "1000_0" / "1000_0_0_log.out") and out["units"][0]["record"] is None
    result = runner.invoke(
        app, ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN+PMA", "--status", "-f", "json"]
    )
    assert result.exit_code == 0 and json.loads(result.output)["units"] == []
    result = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", "--format", "json"])
    assert result.exit_code == 2 and "only with --status" in result.output


def test_options_and_their_errors(cluster, runner):
    assert slurm.slurm_minutes("90") == 90 and slurm.slurm_minutes("1:30:00") == 90
    assert slurm.slurm_minutes("2-00:00:00") == 2880 and slurm.slurm_minutes("1-12") == 2160
    options = slurm.SlurmOptions.parse("gpu", None, None, ["constraint=a100", "exclusive", "mail-type=END"])
    assert options.extra == {"constraint": "a100", "exclusive": True, "mail_type": "END"}
    assert slurm.SlurmOptions.parse(options=["gpus-per-node=4"]).extra == {"gpus_per_node": "4"}
    for bad in (["array=0-3"], ["output=x"], ["time=soon"], ["=1"], ["gpus_per_node=all"]):
        with pytest.raises(ReproError):
            slurm.SlurmOptions.parse(options=bad)
    for words, message in (
        (["--partition", "gpu"], "only with --launcher slurm"),
        (["--launcher", "slurm", "-j", "2"], "--jobs is for --launcher local"),
        (["--launcher", "slurm", "--slurm-opt", "array=1"], "set by the launcher itself"),
        (["--launcher", "pbs"], "unknown launcher"),
    ):
        result = runner.invoke(app, ["run", "table5-ablation", "--scale", "smoke", *words])
        assert result.exit_code == 2 and message in result.output, result.output


def test_wait_ends_with_exit_1_when_a_job_fails(cluster, runner, monkeypatch):
    monkeypatch.setenv("SLURM_STUB_FAIL", "1000")  # one unit: a plain job, not an array
    words = ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--launcher", "slurm", "--wait"]
    result = runner.invoke(app, words)
    assert result.exit_code == 1, result.output
    assert "1 unit(s) did not finish: MCAN seed 0" in result.output and "failed (FAILED)" in result.output
    log = cluster / "data" / "runs" / "slurm" / SPEC / "smoke" / "1000" / "1000_0_log.err"
    assert "NODE FAILURE" in log.read_text()


def test_a_refused_submission_or_no_slurm_is_one_line(cluster, runner, monkeypatch):
    words = ["run", "table5-ablation", "--scale", "smoke", "--rows", "MCAN", "--launcher", "slurm"]
    result = runner.invoke(app, [*words, "--partition", "nosuch"])
    assert result.exit_code == 2 and "sbatch refused the jobs of 1 unit(s)" in result.output, result.output
    assert "Invalid partition name" in result.output and "Traceback" not in result.output
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = runner.invoke(app, words)
    assert result.exit_code == 2 and "needs Slurm's commands" in result.output, result.output


def test_resources_dry_run_and_torchrun(cluster, runner):
    from repro import families
    from repro.families.base import Resources

    mcan = families.implementation(families.by_paper("mcan-pa"))
    ace = families.implementation(families.by_paper("ace-rpe"))
    paper = mcan.unit_resources({"arch": "mcan"}, "paper")
    assert paper.gpus == 1 and paper.hours >= mcan.gpu_hours({"arch": "mcan"})
    assert mcan.unit_resources({"arch": "mcan"}, "smoke") == Resources(gpus=0, cpus=2, mem_gb=4, hours=1.0)
    assert ace.unit_resources({"arch": "albef"}, "paper").gpus == 8  # Sec. 4.1: 8 A100s

    # a unit on several GPUs trains under torchrun, one process per GPU
    command = slurm.unit_command(8, Path("in.pkl"), Path("out.pkl"))
    assert command[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert "--nproc-per-node=8" in command and command[-4:] == ["-m", "repro.launch.unit", "in.pkl", "out.pkl"]
    assert slurm.unit_command(1, Path("i"), Path("o")) == [sys.executable, "-m", "repro.launch.unit", "i", "o"]

    result = runner.invoke(app, ["run", "table5-ablation", "--launcher", "slurm", "--rows", "MCAN", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "slurm: MCAN: one job per seed, 1 GPU(s), 8 CPUs, 64 GB" in result.output
    assert not (cluster / "slurm-state" / "next_id").exists()  # nothing submitted


def test_jobs_finishing_at_once_rebuild_the_row_record_in_turn(toy_family, tmp_path):
    """store_unit with a lock: while another job holds it, a finished unit neither writes its seed nor
    rebuilds the row's record; once released, the record holds both jobs' seeds."""
    import threading

    from filelock import FileLock

    from repro.families.base import RowRun
    from repro.launch.units import store_unit
    from repro.run import make_plan
    from repro.specs import resolve
    from repro.utils import now_iso

    units = {u.seed: u for u in make_plan(resolve("toy-table1"), "smoke", ["Sighted"], [0, 1]).units}
    lock = tmp_path / "records.lock"
    results = toy_family / "results" / "toy" / "toy-table1"

    def finish(seed: int, acc: float) -> None:
        outcome = (RowRun(metrics={"Acc": acc}, split="val"), now_iso(), now_iso(), 1.0, 1.0)
        store_unit(units[seed], outcome, lock=lock)

    held = FileLock(str(lock))
    held.acquire()
    second = threading.Thread(target=finish, args=(1, 80.0))
    second.start()
    second.join(timeout=1.0)
    assert second.is_alive() and not (results / "seeds").exists()  # waiting for the lock
    held.release()
    second.join(timeout=30)
    finish(0, 60.0)
    record = json.loads((results / "Sighted.smoke.json").read_text())
    assert record["seeds"] == [0, 1] and record["metrics"]["Acc"] == 70.0
