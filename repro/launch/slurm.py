"""`repro run ID --launcher slurm`: each (row, seed) unit of a plan becomes one job of a Slurm job array,
submitted through submitit, with the resources the row's family declares (`repro.families.base.Resources`).
With `ensemble: true` in the scale's settings a row's seeds are one job instead, which trains them together
(`repro.launch.units.groups`, `repro.train.ensemble`) and writes each seed's record as a lone unit would.

Files, under the run's workdir (`$REPRO_DATA_DIR/runs` by default; `<jobs>` is
`slurm/[variants/<name>/]<spec>/<scale>`):
  <jobs>/<job id>/       submitit's files of one job: the pickled unit, `<job id>_0_log.out` and
                         `<job id>_0_log.err` (everything the unit prints), its result pickle
  <jobs>/units.json      which job runs which unit, for `repro run ID --status`
  <jobs>/records.lock    taken while a job writes its unit's record and rebuilds the row's record
  <spec>/<scale>/<row>/seed<N>/   the unit's checkpoints and train.jsonl, as in a local run

A job trains its unit in a child process (`repro.launch.unit`; under torchrun, one process per GPU, when
the unit has several) and writes the unit's record into the results store as soon as it finishes. On
preemption or at its time limit Slurm signals the job (USR2, sbatch `--signal`); submitit calls
`UnitJob.checkpoint`, which stops the child (the trainer saves last.pt at its next step) and requeues the
job, which then resumes from last.pt. A SIGTERM from Slurm (preemption, scancel) is passed on to the child
too, so its checkpoint is saved whichever signal comes first. An ensemble job resumes the same way: the
ensemble trainer saves every seed's last.pt at the same step and continues from them, with every seed of
the job (those whose records were written before the stop are scored and written again, identically).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from submitit.core.utils import FailedJobError, FailedSubmissionError
from submitit.helpers import Checkpointable, DelayedSubmission

from repro.errors import ReproError
from repro.families.base import Resources, RunContext
from repro.launch.unit import read_outcome
from repro.names import inside
from repro.run import Plan, Unit
from repro.terminal import printable
from repro.utils import load_plain_pickle, now_iso, write_bytes_atomic, write_json_atomic

MAX_JOB_HOURS = 24.0  # one job's time limit unless --slurm-opt time=... says otherwise; longer units requeue
STOP_GRACE_S = 60  # how long a stopped unit may take to save its checkpoint (USR2 comes 90 s before the limit)
REQUEUE_WAIT_S = 60  # after a SIGTERM stopped the unit: how long the job waits for Slurm's USR2 or requeue
# sbatch options that submitit sets itself: the array, the log files and the requeue signal
RESERVED = {"array", "output", "error", "open_mode", "signal", "wrap"}
PENDING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESIZING", "SUSPENDED", "PREEMPTED"}
RUNNING = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"}
SLURM_TIMEOUT_S = 60.0  # seconds an sbatch or sacct call may take (REPRO_SLURM_TIMEOUT_S)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # newlines, NULs, escapes: never in an sbatch option


class UnitsFailed(ReproError):
    """`--wait`: some submitted units ended without a record."""

    exit_code = 1


@dataclass
class SlurmOptions:
    """What `repro run --launcher slurm` passes to sbatch besides the family's resources."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    extra: dict[str, str | bool] = field(default_factory=dict)  # --slurm-opt KEY=VALUE (KEY alone: a flag)

    @classmethod
    def parse(cls, partition=None, account=None, qos=None, options: list[str] | None = None) -> SlurmOptions:
        for name, given in (("--partition", partition), ("--account", account), ("--qos", qos)):
            if given is not None and (_CONTROL.search(given) or not given.strip()):
                raise ReproError(f"{name} {given!r}: a Slurm name, without newlines or control characters")
        extra: dict[str, str | bool] = {}
        for text in options or []:
            if _CONTROL.search(text):
                raise ReproError(
                    f"--slurm-opt {text!r}: newlines, NULs and other control characters are not allowed "
                    "(each option becomes one #SBATCH line of the job script)"
                )
            key, has_value, value = text.partition("=")
            key = key.strip().lstrip("-").replace("-", "_").lower()
            if not re.fullmatch(r"[a-z][a-z0-9_]*", key):
                raise ReproError(f"--slurm-opt takes KEY=VALUE (an sbatch option without its dashes), not {text!r}")
            if key in RESERVED:
                raise ReproError(f"--slurm-opt {key}: set by the launcher itself (job array, logs, requeue signal)")
            if key == "time":
                value = str(slurm_minutes(value))
            if key == "gpus_per_node" and not value.isdigit():
                raise ReproError(f"--slurm-opt gpus_per_node={value}: the GPUs of a unit, a number")
            extra[key] = value if has_value else True
        return cls(partition, account, qos, extra)


def slurm_timeout_s() -> float:
    """Seconds one call of sbatch or sacct may take: `$REPRO_SLURM_TIMEOUT_S`, default 60."""
    raw = os.environ.get("REPRO_SLURM_TIMEOUT_S", "").strip()
    if not raw:
        return SLURM_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ReproError(f"REPRO_SLURM_TIMEOUT_S={raw!r}: give a positive number of seconds")
    return value


class _CommandTimedOut(FailedJobError):
    """An sbatch call that did not end within REPRO_SLURM_TIMEOUT_S."""


class _TimedCommand:
    """Stands in for submitit's `CommandFunction` (which runs sbatch with no timeout) while submitting:
    the same call and errors, under `slurm_timeout_s()`."""

    def __init__(self, command: list[str], verbose: bool = True, cwd=None, env=None) -> None:
        self.command, self.cwd, self.env = list(command), cwd, env

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        full = self.command + [str(x) for x in args] + [f"--{k}={v}" for k, v in kwargs.items()]
        timeout = slurm_timeout_s()
        try:
            done = subprocess.run(
                full, capture_output=True, text=True, errors="replace", cwd=self.cwd, env=self.env, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise _CommandTimedOut(
                f"`{full[0]}` did not answer within {timeout:g} s (REPRO_SLURM_TIMEOUT_S); the controller may be "
                "busy: check `squeue --me` before submitting again"
            ) from None
        if done.returncode:
            raise FailedJobError(done.stderr.strip())
        return done.stdout.strip()


@contextlib.contextmanager
def _timed_commands() -> Iterator[None]:
    import submitit.core.utils as submitit_utils

    saved = submitit_utils.CommandFunction
    submitit_utils.CommandFunction = _TimedCommand
    try:
        yield
    finally:
        submitit_utils.CommandFunction = saved


def _sacct(watcher) -> None:
    """What `watcher.update()` does (one sacct call for every registered job), under `slurm_timeout_s()`;
    a hung sacct or one printing something other than its table is one line naming the command."""
    command = watcher._make_command()
    if command is None:
        return
    timeout = slurm_timeout_s()
    shown = " ".join(command[:6]) + (" ..." if len(command) > 6 else "")
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ReproError(f"`{shown}` did not answer within {timeout:g} s (REPRO_SLURM_TIMEOUT_S)") from None
    except OSError as exc:
        raise ReproError(f"`{shown}` could not be run: {exc.strerror or exc}") from None
    if done.returncode:  # as submitit does: states stay unknown
        return
    text = done.stdout.decode("utf-8", errors="replace")
    try:
        info = watcher.read_info(text)
        if not all(isinstance(v, dict) and "State" in v for v in info.values()):
            raise ValueError("no State column")
    except Exception:  # submitit's parser trips on anything but sacct's table (KeyError, IndexError, ...)
        said = printable(text.strip())[:200] or "nothing"
        raise ReproError(f"`{shown}` printed something that is not its job table: {said!r}") from None
    watcher._info_dict.update(info)
    watcher._last_status_check = time.time()


def slurm_minutes(text: str) -> int:
    """A Slurm time limit (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`) in whole minutes."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not match:
        raise ReproError(f"--slurm-opt time={text}: not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)")
    days, first, second, third = (int(g) if g is not None else None for g in match.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + first * 3600 + (second or 0) * 60 + (third or 0)
    elif third is not None:  # HH:MM:SS
        seconds = first * 3600 + second * 60 + third
    else:  # MM[:SS]
        seconds = first * 60 + (second or 0)
    if seconds <= 0:
        raise ReproError(f"--slurm-opt time={text}: the time limit must be positive")
    return max(1, math.ceil(seconds / 60))


def jobs_root(workdir: Path, spec_id: str, scale: str, variant_name: str | None = None) -> Path:
    """The folder of a spec's jobs at a scale; a variant's are kept apart, as its checkpoints are."""
    root = Path(workdir) / "slurm"
    if variant_name:
        root = inside(root, "variants", variant_name)
    return inside(root, spec_id, scale)


# --- the job ----------------------------------------------------------------------------------------


@dataclass
class UnitJob(Checkpointable):
    """One Slurm job as submitit runs it: a (row, seed) unit, or a row's seeds trained together (several
    units and their contexts, one per seed); submitit calls `checkpoint` on preemption."""

    units: list[Unit]  # as the plan resolved them: configuration, hash and record paths included
    contexts: list[RunContext]
    lock: Path
    gpus: int = 0
    rebaseline: bool = False
    environ: dict[str, str] = field(default_factory=dict)  # REPRO_* folders as the submitting shell had them
    stores_record: bool = True  # False: a part of the unit (`RunContext.part`), whose own job writes the record

    def __call__(self) -> dict[str, Any]:
        import submitit

        os.environ.update(self.environ)
        attempt = int(os.environ.get("SLURM_RESTART_COUNT") or 0) + 1
        ctxs = [replace(c, resume=c.resume or attempt > 1, progress=False) for c in self.contexts]
        folder = Path(submitit.JobEnvironment().paths.folder)
        # the order is pickled (units and contexts with their typed configs), in the folder whose `_submitted.pkl`
        # submitit itself loads to start this job; the outcome comes back as JSON
        inbox, outbox = folder / "unit.pkl", folder / "outcome.json"
        record = {"rebaseline": self.rebaseline, "lock": self.lock} if self.stores_record else None
        write_bytes_atomic(inbox, pickle.dumps({"units": self.units, "contexts": ctxs, "record": record}))
        outbox.unlink(missing_ok=True)
        words = "resuming from its checkpoint" if ctxs[0].resume else "from the start"
        name = self.name
        print(f"repro: {name}, attempt {attempt}, {words}; files in {ctxs[0].workdir.parent}", flush=True)
        env = dict(os.environ)
        cpus = int(os.environ.get("SLURM_CPUS_PER_TASK") or 0)
        if cpus:
            env.setdefault("OMP_NUM_THREADS", str(max(1, cpus // max(self.gpus, 1))))
        # a session of its own: Slurm's signals reach this process, which passes them on (`_relay`, `checkpoint`)
        self._child = subprocess.Popen(unit_command(self.gpus, inbox, outbox), env=env, start_new_session=True)
        signal.signal(signal.SIGTERM, self._relay)
        code = self._wait_child()
        status, payload = read_outcome(outbox)
        if status == "interrupted":
            # stopped from outside with its checkpoint saved: Slurm's USR2 (submitit requeues the job and this
            # process exits in the middle of the wait) or a requeue by Slurm itself normally follows
            deadline = time.time() + REQUEUE_WAIT_S
            while time.time() < deadline:
                time.sleep(1)
            raise ReproError(f"{name}: {payload}; the job was not requeued")
        if status != "done":
            raise ReproError(f"{name} failed: {payload or f'exit code {code}'}")
        if not self.stores_record:
            print(f"repro: {name} done; the unit's own job writes its record", flush=True)
            return {"row": ctxs[0].row.name, "part": ctxs[0].part, "units": payload}
        for unit in payload:
            print(
                f"repro: {ctxs[0].row.name} seed {unit['seed']}: {unit['metrics']}; record {unit['record']}", flush=True
            )
        return {"row": ctxs[0].row.name, "units": payload}

    @property
    def name(self) -> str:
        from repro.launch.unit import label

        part = self.contexts[0].part
        return label(self.contexts[0].row.name, [c.seed for c in self.contexts]) + (f", {part}" if part else "")

    def checkpoint(self, *args: Any, **kwargs: Any):
        """Called by submitit on USR2 (preemption, time limit): stop the unit, which saves last.pt at its
        next step, and hand back the same unit to resume from it when the job is requeued."""
        self._stop_child()
        return DelayedSubmission(replace(self, contexts=[replace(c, resume=True) for c in self.contexts]))

    def _relay(self, signum: int, frame: Any = None) -> None:
        child = getattr(self, "_child", None)
        if child is not None and child.returncode is None:
            print(f"repro: {signal.Signals(signum).name} received; the unit saves its checkpoint", flush=True)
            _signal_group(child.pid, signal.SIGTERM)

    def _wait_child(self) -> int:
        """Wait for the child with waitpid, never `Popen.wait`: a signal handler may wait for it too."""
        while (code := _reap(self._child)) is None:
            time.sleep(0.5)
        return code

    def _stop_child(self) -> None:
        child = getattr(self, "_child", None)
        if child is None or _reap(child) is not None:
            return
        _signal_group(child.pid, signal.SIGTERM)
        deadline = time.time() + STOP_GRACE_S
        while _reap(child) is None:
            if time.time() > deadline:
                _signal_group(child.pid, signal.SIGKILL)
                deadline = math.inf
            time.sleep(0.2)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_child"}


def _reap(child: subprocess.Popen) -> int | None:
    """The child's exit code once it has ended (reaped here), else None."""
    if child.returncode is not None:
        return child.returncode
    try:
        pid, status = os.waitpid(child.pid, os.WNOHANG)
    except ChildProcessError:  # reaped by another caller meanwhile
        return child.returncode if child.returncode is not None else -1
    if pid == 0:
        return None
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def unit_command(gpus: int, inbox: Path, outbox: Path) -> list[str]:
    """The child that trains a unit: one process, or torchrun with one process per GPU."""
    tail = ["-m", "repro.launch.unit", str(inbox), str(outbox)]
    if gpus > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}", *tail]
    return [sys.executable, *tail]


# --- submission ----------------------------------------------------------------------------------


@dataclass
class Submitted:
    """One submitted job: a (row, seed) unit, or a row's seeds trained together."""

    row: str
    seeds: list[int]
    job_id: str
    stdout: str
    stderr: str
    resources: Resources
    part: str | None = None  # a part of the unit (`Hooks.parts`), trained by a job of its own


def submit(
    plan: Plan,
    options: SlurmOptions,
    *,
    resume: bool = False,
    force: bool = False,
    rebaseline: bool = False,
) -> list[Submitted]:
    """Submit every unit of `plan` that needs running, one job per (row, seed) or, with `ensemble: true`,
    per row's seeds; returns what was submitted."""
    from repro.launch.units import check_ready, groups, prepare_data, units_to_run
    from repro.paths import data_dir, experiments_dir, results_dir

    spec, scale = plan.spec, plan.scale
    check_ready(plan)
    root = jobs_root(plan.workdir, spec.id, scale, None if plan.variant.empty else plan.variant.name)
    units = units_to_run(plan, resume, force)
    wanted = {(u.row.name, u.seed) for u in units}
    states = unit_states(plan)
    busy = [
        f"{u.row} seed {u.seed} (job {u.job_id}, {u.state})"
        for u in states
        if u.state in ("pending", "running") and (u.row, u.seed) in wanted
    ]
    if busy:
        raise ReproError(f"already submitted and not finished: {', '.join(busy)}; `scancel` them or wait")
    if not units:
        return []
    environ = {  # a job writes one scale's records: its folder is the job's REPRO_RESULTS (smoke: the scratch one)
        "REPRO_DATA_DIR": str(data_dir().absolute()),
        "REPRO_RESULTS": str(results_dir(scale).absolute()),
        "REPRO_EXPERIMENTS": str(experiments_dir().absolute()),
        **{k: os.environ[k] for k in ("REPRO_LOGGERS",) if os.environ.get(k)},  # --logger: the jobs' writers too
    }
    planned = [(group, group_resources(group, options)) for group in groups(plan, units)]
    prepared = prepare_data(plan)  # generated once here, before the jobs read it
    jobs: list[tuple[UnitJob, Resources, tuple[Key, ...]]] = []
    for group, res in planned:
        data = prepared.get(group[0].row.name)
        contexts = [unit.context(resume=resume, progress=False, data=data) for unit in group]
        job = UnitJob(
            units=list(group),
            contexts=contexts,
            lock=root / "records.lock",
            gpus=res.gpus,
            rebaseline=rebaseline,
            environ=environ,
        )
        needs = _prerequisites(spec, group)
        parts = unit_parts(spec, group) if len(group) == 1 else {}
        for part, part_res in parts.items():  # a job each; the unit's own job then scores what they stored
            part_job = replace(job, contexts=[replace(c, part=part) for c in contexts], stores_record=False)
            jobs.append((part_job, part_res, ()))
            needs += tuple((unit.row.name, unit.seed, part) for unit in group)
        if parts:
            job = replace(job, contexts=[replace(c, resume=True) for c in contexts])
            res = replace(res, hours=1.0)
        jobs.append((job, res, needs))

    # a job that reads what other jobs store waits for them to succeed (afterok), each submitted before the jobs
    # that wait for it: a unit after another row's unit of its seed (`Hooks.after`: just submitted, or still pending
    # or running from before), a unit after its parts (`Hooks.parts`)
    earlier: dict[Key, str] = {(u.row, u.seed, None): u.job_id for u in states if u.state in ("pending", "running")}
    coming = {key for job, _, _ in jobs for key in _keys(job)}
    submitted: list[Submitted] = []
    while jobs:
        now = {key: s.job_id for s in submitted for key in _keys(s)}
        wave = [j for j in jobs if all(need in now or need not in coming for need in j[2])]
        if not wave:
            raise ReproError(f"{spec.id}: its units wait for each other in a circle; no order submits them")
        jobs = [j for j in jobs if not any(j is w for w in wave)]
        batches: dict[tuple[Resources, str | None], list[UnitJob]] = {}
        for job, res, needs in wave:
            ids = sorted({i for need in needs for i in [now.get(need) or earlier.get(need)] if i})
            batches.setdefault((res, "afterok:" + ":".join(ids) if ids else None), []).append(job)
        for (res, dependency), batch in batches.items():
            executor = _executor(root, f"repro-{spec.id}-{scale}", res, options, dependency)
            submitted += _submit_array(executor, batch, res, root, submitted)
    _remember(root, submitted)
    return submitted


Key = tuple[str, int, "str | None"]  # (row, seed, part) of a job: part None for a unit's own job


def _keys(job: UnitJob | Submitted) -> list[Key]:
    if isinstance(job, Submitted):
        return [(job.row, seed, job.part) for seed in job.seeds]
    return [(c.row.name, c.seed, c.part) for c in job.contexts]


def _prerequisites(spec, group: list[Unit]) -> tuple[Key, ...]:
    """The units the units of one job read from (their family's `after`)."""
    first = group[0]
    rows = first.hooks.after(spec, first.row) if first.kind == "train" and first.hooks is not None else ()
    return tuple((row, unit.seed, None) for row in rows for unit in group)


def unit_parts(spec, group: list[Unit]) -> dict[str, Resources]:
    """The parts a unit trains as jobs of their own (its family's `parts`), with their resources."""
    first = group[0]
    if first.kind != "train" or first.hooks is None:
        return {}
    return first.hooks.parts(spec, first.row, first.scale)


def _submit_array(
    executor, batch: list[UnitJob], res: Resources, root: Path, before: list[Submitted]
) -> list[Submitted]:
    """One job array of `batch`; a refusal or a hung sbatch is one error, the jobs submitted `before` remembered."""
    try:
        with _timed_commands():
            handles = executor.submit_array(batch)
    except _CommandTimedOut as exc:
        _remember(root, before)
        raise ReproError(str(exc)) from None
    except (FailedJobError, FailedSubmissionError) as exc:
        _remember(root, before)  # the arrays submitted before this one
        said = printable(str(exc)) or "no message"
        raise ReproError(f"sbatch refused the jobs of {len(batch)} unit(s): {said}") from None
    return [
        Submitted(
            unit.contexts[0].row.name,
            [c.seed for c in unit.contexts],
            job.job_id,
            str(job.paths.stdout),
            str(job.paths.stderr),
            res,
            unit.contexts[0].part,
        )
        for unit, job in zip(batch, handles)
    ]


def group_resources(group: list[Unit], options: SlurmOptions) -> Resources:
    """One job's resources: its family's for one unit (the plan's); a row's seeds trained together get the time
    of all of them one after another (together they take no more) and must fit one process."""
    res, seeds = group[0].resources, len(group)
    if "gpus_per_node" in options.extra:  # the user's GPU count: torchrun runs that many processes
        res = replace(res, gpus=int(options.extra["gpus_per_node"]))
    if seeds > 1:
        if res.gpus > 1:
            raise ReproError(
                f"{group[0].row.name}: seeds trained together (`ensemble: true`) run in one process, not on "
                f"{res.gpus} GPUs; remove `ensemble: true` or gpus_per_node"
            )
        res = replace(res, hours=res.hours * seeds)
    return res


def _executor(root: Path, name: str, res: Resources, options: SlurmOptions, dependency: str | None = None):
    """A submitit executor for jobs of `res`; `dependency` (`afterok:ID:...`): they start once those succeeded,
    beside any dependency the user's `--slurm-opt dependency=` gives."""
    import submitit

    extra = dict(options.extra)
    if dependency:
        extra["dependency"] = ",".join(filter(None, [str(extra.get("dependency") or ""), dependency]))
    minutes = int(extra.pop("time", 0)) or int(math.ceil(min(res.hours, MAX_JOB_HOURS) * 60))
    requeues = math.ceil(res.hours * 60 / minutes) + 2  # time limits the unit may reach and still requeue
    root.mkdir(parents=True, exist_ok=True)
    try:
        executor = submitit.SlurmExecutor(folder=str(root / "%j"), max_num_timeout=requeues)
    except RuntimeError as exc:
        raise ReproError(
            f"--launcher slurm needs Slurm's commands (sbatch, srun, sacct) on PATH: {exc}; "
            f"run it on the cluster's login node"
        ) from None
    params: dict[str, Any] = {"job_name": name, "time": minutes, "cpus_per_task": res.cpus, "mem": f"{res.mem_gb}GB"}
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    for key in ("partition", "account", "qos"):
        if getattr(options, key):
            params[key] = getattr(options, key)
    if extra:
        params["additional_parameters"] = extra
    executor.update_parameters(**params)
    return executor


def _remember(root: Path, submitted: list[Submitted]) -> None:
    """units.json: the latest job of each (row, seed) submitted from this folder; `together`, the seeds of
    an ensemble job."""
    path = root / "units.json"
    known = {(u["row"], u["seed"]): u for u in _read_units(root)}
    parts = {(s.row, seed): {} for s in submitted for seed in s.seeds}
    for s in submitted:
        for seed in s.seeds:
            if s.part is not None:
                parts[(s.row, seed)][s.part] = s.job_id
    for s in submitted:
        if s.part is not None:  # a part's job: named under its unit's
            continue
        for seed in s.seeds:
            known[(s.row, seed)] = {
                "row": s.row,
                "seed": seed,
                "job_id": s.job_id,
                "stdout": s.stdout,
                "stderr": s.stderr,
                "submitted": now_iso(),
                "resources": s.resources.__dict__,
                **({"together": s.seeds} if len(s.seeds) > 1 else {}),
                **({"parts": parts[(s.row, seed)]} if parts[(s.row, seed)] else {}),
            }
    write_json_atomic(path, {"units": list(known.values())})


def _read_units(root: Path) -> list[dict[str, Any]]:
    path = root / "units.json"
    if not path.exists():
        return []
    try:
        return list(json.loads(path.read_text(encoding="utf-8"))["units"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReproError(f"{path}: unreadable ({exc}); move it away to submit again") from None


# --- status --------------------------------------------------------------------------------------


@dataclass
class UnitState:
    row: str
    seed: int
    job_id: str
    state: str  # pending, running, done, failed or unknown
    slurm_state: str  # as sacct says it
    stdout: str
    stderr: str
    record: str | None = None  # the seed's record in the results store, once done
    error: str | None = None  # the last line of a failed job's error
    together: list[int] | None = None  # an ensemble job: the seeds it trains together (this one among them)

    def to_json(self) -> dict[str, Any]:
        """One unit of `repro run ID --status --format json` (docs/cluster.md): every key
        always present, null where it has no value. Keys are only ever added."""
        return {
            "row": self.row,
            "seed": self.seed,
            "state": self.state,
            "slurm_state": self.slurm_state,
            "job_id": self.job_id,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "record": self.record,
            "error": self.error,
            "together": self.together,
        }


def unit_states(plan: Plan, seeds: list[int] | None = None) -> list[UnitState]:
    """Every submitted unit of the plan's rows (and of `seeds`, else of any seed): its job's state (sacct),
    logs and record."""
    import submitit

    spec, scale = plan.spec, plan.scale
    root = jobs_root(plan.workdir, spec.id, scale, None if plan.variant.empty else plan.variant.name)
    planned = {(unit.row.name, unit.seed): unit for unit in plan.units}
    rows = {step.row.name: step for step in plan.steps}
    units = [u for u in _read_units(root) if u["row"] in rows and (seeds is None or u["seed"] in seeds)]
    jobs = [submitit.SlurmJob(folder=str(root / "%j"), job_id=u["job_id"]) for u in units]
    if jobs:
        submitit.SlurmJob.watcher.clear()  # states as they are now, none remembered
        _sacct(submitit.SlurmJob.watcher)  # one sacct call for every job
    out = []
    for unit, job in zip(units, jobs):
        slurm = (submitit.SlurmJob.watcher.get_state(job.job_id, mode="cache") or "UNKNOWN").split()[0].upper()
        # the unit as planned (a seed the plan does not run: its row's record path); its record as it is now
        known = planned.get((unit["row"], unit["seed"])) or rows[unit["row"]].units[0].with_seed(unit["seed"])
        finished = known.finished_now()
        fresh = finished is not None and finished >= unit["submitted"]
        outcome, error = _outcome(job)
        if slurm in RUNNING:
            state = "running"
        elif slurm in PENDING:
            state = "pending"
        elif fresh and (slurm == "COMPLETED" or outcome == "success"):
            state = "done"
        elif slurm == "UNKNOWN" and outcome is None:
            state = "unknown"
        else:
            state = "failed"
        out.append(
            UnitState(
                unit["row"],
                unit["seed"],
                unit["job_id"],
                state,
                slurm,
                unit["stdout"],
                unit["stderr"],
                str(known.record) if state == "done" else None,
                error,
                unit.get("together"),
            )
        )
    return out


def _outcome(job) -> tuple[str | None, str | None]:
    """("success" or "error", the error's last line) from a job's result pickle; (None, None) before it has one.
    The pickle is read as plain data only (text, numbers, lists, mappings): one that asks for any class or function
    is refused, so a file planted in the jobs folder runs nothing where `--status` or `--wait` reads it."""
    path = job.paths.result_pickle
    if not path.exists():
        return None, None
    try:
        outcome, payload = load_plain_pickle(path)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError):
        return None, None
    if outcome == "success":
        return outcome, None
    lines = [line for line in str(payload).splitlines() if line.strip()]
    return outcome, printable(lines[-1]).strip() if lines else None  # job text: no escape sequences


def wait(
    plan: Plan,
    seeds: list[int] | None = None,
    on_change: Callable[[UnitState], None] | None = None,
) -> list[UnitState]:
    """Poll until no submitted unit is pending or running (sacct every 2 s for a minute, then every 30 s);
    `on_change` hears each unit whose state changes."""
    seen: dict[tuple[str, int], str] = {}
    started = time.time()
    while True:
        states = unit_states(plan, seeds)
        for unit in states:
            if seen.get((unit.row, unit.seed)) != unit.state and on_change is not None:
                on_change(unit)
            seen[(unit.row, unit.seed)] = unit.state
        if not any(u.state in ("pending", "running") for u in states):
            return states
        time.sleep(2.0 if time.time() - started < 60 else 30.0)
