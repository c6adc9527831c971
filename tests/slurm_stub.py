"""A stand-in for Slurm's commands, for tests on a machine without a cluster.

`python tests/slurm_stub.py COMMAND ARGS...` acts as `sbatch`, `srun`, `sacct`, `squeue`, `scancel` or
`scontrol`; `install(bin_dir, state_dir)` writes one executable per command into `bin_dir` (put it first
on PATH). What they print is what submitit reads from the real ones:
  sbatch FILE      "Submitted batch job N" (or Slurm's error for a partition not in SLURM_STUB_PARTITIONS,
                   default "debug"); runs the script's tasks (`#SBATCH --array=0-K%P`) in a
                   detached process, SLURM_STUB_PARALLEL (default 2) at a time, with the SLURM_* variables
                   a task sees (SLURM_RESTART_COUNT after a requeue) and its output in `--output`/`--error`;
                   with `--dependency=afterok:ID[:ID...]` once those jobs completed (cancelled if one failed)
  srun ... CMD     runs CMD with `--output`/`--error` (%j: the job id as submitit writes it, N_i for an
                   array task; %t: 0) and passes SIGTERM, SIGUSR2, SIGINT and SIGCONT on to it
  sacct -o JobID,State,NodeList --parsable2 -j N ...     one line per task: N_i|STATE|node
  squeue           the tasks that are pending or running
  scancel ID [--signal SIG]   cancels a job or task, or sends it a signal
  scontrol requeue ID          the task runs again once its current run has ended
Preemption: SLURM_STUB_PREEMPT="N_i:PATH" preempts task N_i once, as soon as PATH exists and is not empty,
the way Slurm does with `send_user_signal`: SIGTERM to the job step, then the job's signal (USR2).
SLURM_STUB_FAIL="N_i,..." fails those tasks at once, without running their script.
State lives in SLURM_STUB_STATE: one JSON file per task (its state and the history of its states).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

COMMANDS = ("sbatch", "srun", "sacct", "squeue", "scancel", "scontrol")
FIRST_JOB_ID = 1000


def install(bin_dir: Path, state_dir: Path) -> dict[str, str]:
    """Write the executables; returns the environment variables that make them the ones found."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" {name} "$@"\n')
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "SLURM_STUB_STATE": str(state_dir)}


def kill_all(state: Path) -> None:
    """End every daemon and job process group the stub started under `state` (a test's clean-up)."""
    groups = [int(p.read_text()) for p in state.glob("*.daemon.pid")]
    groups += [json.loads(p.read_text()).get("job_pgid") for p in state.glob("tasks/*.json")]
    for group in filter(None, groups):
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def state_dir() -> Path:
    return Path(os.environ["SLURM_STUB_STATE"])


@contextmanager
def locked():
    with open(state_dir() / "lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def task_path(task: str) -> Path:
    return state_dir() / "tasks" / f"{task}.json"


def read_task(task: str) -> dict:
    return json.loads(task_path(task).read_text())


def update_task(task: str, **changes) -> dict:
    with locked():
        data = read_task(task) if task_path(task).exists() else {"history": []}
        if "state" in changes and changes["state"] != data.get("state"):
            data["history"].append(changes["state"])
        data.update(changes)
        tmp = task_path(task).with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, task_path(task))
        return data


def job_tasks(job: str) -> list[str]:
    main = job.split("_")[0]
    found = sorted(
        (p.stem for p in (state_dir() / "tasks").glob(f"{main}*.json")),
        key=lambda t: int(t.split("_")[1]) if "_" in t else -1,
    )
    found = [t for t in found if t == main or t.startswith(f"{main}_")]
    return [t for t in found if t == job] if "_" in job else found


# --- sbatch and the tasks it runs ---------------------------------------------------------------------


def sbatch(args: list[str]) -> int:
    script = Path(args[-1]).read_text()
    options = dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(.*))?$", script, flags=re.M))
    partitions = os.environ.get("SLURM_STUB_PARTITIONS", "debug").split(",")
    if options.get("partition") and options["partition"] not in partitions:
        print("sbatch: error: Batch job submission failed: Invalid partition name specified", file=sys.stderr)
        return 1
    (state_dir() / "tasks").mkdir(exist_ok=True)
    with locked():
        counter = state_dir() / "next_id"
        job = int(counter.read_text()) if counter.exists() else FIRST_JOB_ID
        counter.write_text(str(job + 1))
    (state_dir() / f"{job}.sh").write_text(script)
    array = options.get("array")
    if array:
        span, _, _ = array.partition("%")
        first, _, last = span.partition("-")
        tasks = [f"{job}_{i}" for i in range(int(first), int(last or first) + 1)]
    else:
        tasks = [str(job)]
    for task in tasks:
        update_task(task, state="PENDING", restarts=0, exit=None, requeue=False, cancelled=False, step_pid=None)
    daemon = subprocess.Popen(
        [sys.executable, __file__, "_run", str(job)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(state_dir() / f"{job}.daemon.log", "a"),
    )
    (state_dir() / f"{job}.daemon.pid").write_text(str(daemon.pid))
    print(f"Submitted batch job {job}")
    return 0


def expand(pattern: str, task: str) -> str:
    main, _, index = task.partition("_")
    return pattern.replace("%A", main).replace("%a", index).replace("%j", task).replace("%t", "0")


def dependency_met(dependency: str) -> bool:
    """Wait until every job of `afterok:ID[:ID...]` (clauses joined by commas) has completed: True; False as soon
    as one failed or was cancelled (Slurm then never starts the dependent job)."""
    ids = [i for clause in dependency.split(",") if clause.startswith("afterok:") for i in clause[8:].split(":")]
    while True:
        states = [read_task(t)["state"] for i in ids for t in job_tasks(i)]
        if any(state in ("FAILED", "CANCELLED", "TIMEOUT") for state in states):
            return False
        if all(state == "COMPLETED" for state in states):
            return True
        time.sleep(0.2)


def run_job(job: str) -> int:
    script = state_dir() / f"{job}.sh"
    options = dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(.*))?$", script.read_text(), flags=re.M))
    tasks = job_tasks(job)
    if options.get("dependency") and not dependency_met(options["dependency"]):
        for task in tasks:  # DependencyNeverSatisfied: the tasks never run
            update_task(task, state="CANCELLED", cancelled=True)
        return 0
    slots = threading.Semaphore(int(os.environ.get("SLURM_STUB_PARALLEL", "2")))

    def one(task: str) -> None:
        with slots:
            run_task(task, script, options)

    threads = [threading.Thread(target=one, args=(t,)) for t in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return 0


def run_task(task: str, script: Path, options: dict) -> None:
    main, _, index = task.partition("_")
    while True:
        data = read_task(task)
        if data["cancelled"]:
            return
        env = {
            **os.environ,
            "SLURM_JOB_ID": str(int(main) * 1000 + int(index)) if index else main,  # an array task: an id of its own
            "SLURM_NTASKS": "1",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_NODEID": "0",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_JOB_NODELIST": "stubnode",
            "SLURM_STUB_TASK": task,
        }
        if index:
            env.update(SLURM_ARRAY_JOB_ID=main, SLURM_ARRAY_TASK_ID=index)
        if options.get("cpus-per-task"):
            env["SLURM_CPUS_PER_TASK"] = options["cpus-per-task"]
        if data["restarts"]:
            env["SLURM_RESTART_COUNT"] = str(data["restarts"])
        for key in ("output", "error"):
            if options.get(key):
                Path(expand(options[key], task)).parent.mkdir(parents=True, exist_ok=True)
        out = open(expand(options["output"], task), "a") if options.get("output") else subprocess.DEVNULL
        err = open(expand(options["error"], task), "a") if options.get("error") else subprocess.STDOUT
        update_task(task, state="RUNNING", requeue=False)
        command = ["bash", str(script)]
        if task in os.environ.get("SLURM_STUB_FAIL", "").split(","):  # a node that fails the task at once
            command = ["bash", "-c", "echo 'slurmstepd: error: *** JOB CANCELLED: NODE FAILURE ***' >&2; exit 1"]
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=err, start_new_session=True)
        update_task(task, job_pgid=proc.pid)
        preempt = os.environ.get("SLURM_STUB_PREEMPT", "")
        watcher = None
        if preempt.partition(":")[0] == task and not data.get("preempted"):
            watcher = threading.Thread(target=preempt_when, args=(task, Path(preempt.partition(":")[2]), proc))
            watcher.start()
        code = proc.wait()
        if watcher is not None:
            watcher.join()
        data = read_task(task)
        if data["cancelled"]:
            update_task(task, state="CANCELLED", exit=code)
            return
        if data["requeue"]:
            update_task(task, state="REQUEUED", restarts=data["restarts"] + 1, step_pid=None)
            time.sleep(0.2)
            update_task(task, state="PENDING")
            continue
        update_task(task, state="COMPLETED" if code == 0 else "FAILED", exit=code, step_pid=None)
        return


def preempt_when(task: str, trigger: Path, proc: subprocess.Popen) -> None:
    while proc.poll() is None:
        if trigger.exists() and trigger.stat().st_size > 0:
            step = read_task(task).get("step_pid")
            if step:
                update_task(task, preempted=True)
                os.kill(step, signal.SIGTERM)
                os.kill(step, signal.SIGUSR2)
                return
        time.sleep(0.01)


# --- the other commands --------------------------------------------------------------------------


def srun(args: list[str]) -> int:
    task = os.environ.get("SLURM_STUB_TASK", "")
    paths = {"--output": None, "--error": None}
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag in paths:
            paths[flag] = expand(args.pop(0), task)
    out = open(paths["--output"], "a") if paths["--output"] else None
    err = open(paths["--error"], "a") if paths["--error"] else None
    child = subprocess.Popen(args, stdout=out, stderr=err)
    for signum in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT, signal.SIGCONT):
        signal.signal(signum, lambda s, f: child.send_signal(s))
    if task:
        update_task(task, step_pid=os.getpid())
    code = child.wait()
    return code if code >= 0 else 128 - code


def sacct(args: list[str]) -> int:
    jobs = [args[i + 1] for i, a in enumerate(args) if a == "-j"]
    print("JobID|State|NodeList")
    for job in jobs:
        for task in job_tasks(job):
            state = read_task(task)["state"]
            print(f"{task}|{state}|{'None assigned' if state == 'PENDING' else 'stubnode'}")
    return 0


def squeue(args: list[str]) -> int:
    print(f"{'JOBID':>12} {'ST':>3}")
    for path in sorted((state_dir() / "tasks").glob("*.json")):
        state = json.loads(path.read_text())["state"]
        if state in ("PENDING", "RUNNING"):
            print(f"{path.stem:>12} {state[:2]:>3}")
    return 0


def scancel(args: list[str]) -> int:
    ids = [a for a in args if not a.startswith("-") and not a.startswith("SIG") and not a.isupper()]
    sig = args[args.index("--signal") + 1] if "--signal" in args else None
    for job in ids:
        for task in job_tasks(job):
            step = read_task(task).get("step_pid")
            if sig is None:
                update_task(task, cancelled=True)
            if step:
                name = sig or "SIGTERM"
                os.kill(step, getattr(signal, name if name.startswith("SIG") else f"SIG{name}"))
    return 0


def scontrol(args: list[str]) -> int:
    if args[:1] != ["requeue"]:
        print(f"scontrol stub: {' '.join(args)} is not supported", file=sys.stderr)
        return 1
    for task in job_tasks(args[1]):
        update_task(task, requeue=True)
    return 0


def main(argv: list[str]) -> int:
    command, args = argv[0], argv[1:]
    if command == "_run":
        return run_job(args[0])
    return {"sbatch": sbatch, "srun": srun, "sacct": sacct, "squeue": squeue, "scancel": scancel}.get(
        command, scontrol
    )(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
