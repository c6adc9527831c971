"""What `repro run` shows while it works: one overall bar (units done of total, elapsed, ETA) and one
line per running unit (row, seed, epoch, step, loss), whichever process trains it.

Progress is read from each unit's `train.jsonl` (the trainer appends a line per step with epoch of
epochs and step of steps), so worker processes need no channel back to the parent. A unit that trains in
stages (psac's four tasks; ace-rpe's pre-training, fine-tunings and heads; one folder each) says so in
`stages.json` beside them (`repro.train.stage_plan`: each stage's folder and its share of the unit's work), and
its progress is the stages' weighted sum, not its current stage's.
In a terminal the bars are live; in a pipe or a CI log a status line is printed every `heartbeat_s` seconds. When
other work loads the machine (`repro.load`), the estimate says so and by about how much it is stretched.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from repro import load as machine
from repro.paths import shown
from repro.train.stage_plan import read_stages


@dataclass
class Unit:
    label: str  # "<row> s<seed>"
    workdir: Path
    task: TaskID | None = None
    done: bool = False
    last: dict = field(default_factory=dict)  # the unit's latest train.jsonl line ("stage": its folder, if staged)
    done_share: float = 0.0  # of the unit's work, from its log lines (`unit_progress`)


def last_line(workdir: Path) -> dict:
    """The newest step line of any train.jsonl under a unit's folder ({} before the first step)."""
    logs = sorted(workdir.glob("**/train.jsonl"), key=lambda p: p.stat().st_mtime) if workdir.is_dir() else []
    if not logs:
        return {}
    try:
        with open(logs[-1], "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 4096))
            lines = handle.read().decode("utf-8", "replace").splitlines()
        for line in reversed(lines):
            try:
                return json.loads(line)
            except ValueError:
                continue  # a line being written, or the cut first line
    except OSError:
        pass
    return {}


def unit_progress(workdir: Path, started: float) -> tuple[dict, float]:
    """(the line to show, the share of the unit done) from the logs this run wrote (`_since` `started`): a staged
    unit's share is its stages' fractions weighted by their weights, and its line the newest stage's with "stage";
    any other unit's is its newest log's."""
    stages = read_stages(workdir) if workdir.is_dir() else []
    if not stages:
        line = last_line(workdir) if workdir.is_dir() and _since(workdir, started) else {}
        return line, fraction(line)
    total, done, newest, newest_time = sum(w for _, w in stages), 0.0, {}, -1.0
    for name, weight in stages:
        folder = workdir / name
        when = _newest_log(folder)
        if when < started - 1:  # not begun in this run
            continue
        line = last_line(folder)
        done += weight * fraction(line)
        if line and when >= newest_time:
            newest, newest_time = {**line, "stage": name}, when
    return newest, done / total


def fraction(line: dict) -> float:
    steps = line.get("steps") or 0
    return min(1.0, line.get("step", 0) / steps) if steps else 0.0


def describe(line: dict) -> str:
    if not line:
        return "starting"
    text = f"{line['stage']}: " if line.get("stage") else ""
    text += f"epoch {line.get('epoch', '?')}/{line.get('epochs', '?')}"
    if fraction(line) >= 1.0:
        return text + ", evaluating"
    loss = line.get("loss")
    return text + (f", loss {loss:.4g}" if isinstance(loss, (int, float)) else "")


RATE_AFTER_S = 20.0  # seconds of progress watched before an ETA is given


def eta(
    elapsed: float, done: float, total: int, load: machine.Load | None = None, since: tuple[float, float] = (0.0, 0.0)
) -> str:
    """`ETA 0:11:45` from the rate since progress was first seen (`since`: the elapsed seconds and units done then),
    so that a run's start-up (generating data, building models) is not taken for the pace of its training; `ETA –`
    until progress has been watched for RATE_AFTER_S seconds. On a busy machine also the load and how much it
    stretches the time."""
    seconds, gained = elapsed - since[0], done - since[1]
    known = total > 0 and gained > 0 and seconds >= RATE_AFTER_S
    text = f"ETA {_clock(seconds / gained * (total - done))}" if known else "ETA –"
    return text + (f" ({busy_words(load)})" if load is not None and load.busy else "")


def scoring_eta(elapsed: float, since: tuple[float, int], completed: int, left: int) -> str:
    """The ETA once every unit left has trained and is being scored (`since`: the elapsed seconds and units done
    when that began). Training's pace says nothing about scoring (beam search took a quarter of one run), so the
    estimate is the pace at which units have finished since then (a row's seeds trained together are scored one
    after another); `ETA –` until one has."""
    seconds, finished = elapsed - since[0], completed - since[1]
    return f"scoring, ETA {_clock(seconds / finished * left)}" if finished > 0 else "scoring, ETA –"


def busy_words(load: machine.Load) -> str:
    return f"machine busy: {load.words()}, so about {load.stretch:.1f}× an idle machine's time"


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


class RunMonitor:
    """Context manager around the execution of a plan's units; `finished(key, text)` prints a unit's line."""

    def __init__(
        self,
        console: Console,
        units: dict[tuple[str, int], Unit],
        heartbeat_s: float = 60.0,
        load: Callable[[], machine.Load | None] = machine.current,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.console = console
        self.clock = clock  # elapsed time and the ETA's rate (a fake one in tests)
        self.clock_started = clock()
        self.first_progress: tuple[float, float] | None = None  # (elapsed, units done) when progress was first seen
        self.load_source = load  # the machine's load, read at each refresh (a fake one in tests)
        self.load: machine.Load | None = None
        self.units = units
        self.total = len(units)
        self.completed = 0
        # units that finished with no training step of this run in their logs (a stored seed read, a training shared
        # with another row read from the store): they say nothing of the pace and are left out of the ETA's count
        self.untrained = 0
        self.scoring_since: tuple[float, int] | None = None  # (elapsed, units done) when only scoring was left
        self.heartbeat_s = heartbeat_s
        self.started = time.time()
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not self.live,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> RunMonitor:
        self.load = self.load_source()
        if self.load is not None and self.load.busy:
            self.console.print(
                f"note: this machine is busy ({self.load.words()}): CPU work takes about "
                f"{self.load.stretch:.1f}× an idle machine's time while that lasts, and the ETA says so",
                highlight=False,
                soft_wrap=True,
            )
        self.progress.start()
        self.overall = self.progress.add_task("units", total=self.total, status="")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.progress.stop()

    def finished(self, key: tuple[str, int], metrics: dict[str, float], seconds: float, record: Path) -> None:
        """A unit is done: its line (row, seed, time, metrics, where its record is) goes above the bars."""
        values = ", ".join(f"{k} {v:.2f}" for k, v in metrics.items()) or "no local metrics"
        label = self.units[key].label if key in self.units else f"{key[0]} s{key[1]}"
        text = f"{escape(label)} in {seconds:.0f}s: {escape(values)} → {escape(shown(record))}"
        with self._lock:
            unit = self.units.get(key)
            if unit is not None:
                if not unit_progress(unit.workdir, self.started)[0]:
                    self.untrained += 1
                unit.done = True
                if unit.task is not None:
                    self.progress.remove_task(unit.task)
                    unit.task = None
            self.completed += 1
            self.progress.console.print(
                f"[green]done[/] [{self.completed}/{self.total}] {text}", highlight=False, soft_wrap=True
            )
            self._refresh()

    def _loop(self) -> None:
        last_beat = time.time()
        while not self._stop.wait(1.0):
            with self._lock:
                self._refresh()
            if not self.live and time.time() - last_beat >= self.heartbeat_s:
                last_beat = time.time()
                self.console.print(self.status_line(), highlight=False, soft_wrap=True)

    def _refresh(self) -> None:
        running = 0.0
        elapsed = self.clock() - self.clock_started
        for unit in self.units.values():
            if unit.done:
                continue
            unit.last, unit.done_share = unit_progress(unit.workdir, self.started)
            if not unit.last:
                continue
            running += unit.done_share
            if self.live:
                staged = bool(unit.last.get("stage"))  # a staged unit's bar: percent of the unit, not the stage's steps
                total = 100 if staged else unit.last.get("steps") or 1
                completed = round(100 * unit.done_share) if staged else unit.last.get("step", 0)
                if unit.task is None:
                    unit.task = self.progress.add_task(escape(unit.label), total=total, status="")
                self.progress.update(unit.task, total=total, completed=completed, status=escape(describe(unit.last)))
        progress = self.completed + running
        if self.first_progress is None and progress - self.untrained > 0:
            self.first_progress = (elapsed, progress - self.untrained)
        self.load = self.load_source()
        status = self._eta(elapsed, progress)
        self.progress.update(self.overall, completed=self.completed, status=escape(status))
        self.fraction_done = progress

    def _eta(self, elapsed: float, progress: float) -> str:
        left = [u for u in self.units.values() if not u.done]
        if left and all(u.done_share >= 1.0 for u in left):  # every unit left has trained: scoring
            if self.scoring_since is None:
                self.scoring_since = (elapsed, self.completed)
            text = scoring_eta(elapsed, self.scoring_since, self.completed, len(left))
            load = self.load
            return text + (f" ({busy_words(load)})" if load is not None and load.busy else "")
        trained = progress - self.untrained  # the pace is that of the units that train
        return eta(elapsed, trained, self.total - self.untrained, self.load, self.first_progress or (0.0, 0.0))

    def status_line(self) -> str:
        elapsed = self.clock() - self.clock_started
        running = [f"{u.label}: {describe(u.last)}" for u in self.units.values() if not u.done and u.last]
        head = f"[{self.completed}/{self.total} units, {_clock(elapsed)} elapsed, "
        head += self._eta(elapsed, getattr(self, "fraction_done", 0.0)) + "]"
        return " ".join([head, "; ".join(running)]).strip()


def _since(workdir: Path, started: float) -> bool:
    """Only logs this run writes count (a finished earlier run's log is not progress)."""
    return _newest_log(workdir) >= started - 1


def _newest_log(workdir: Path) -> float:
    """The latest modification time of a train.jsonl under `workdir` (-inf: none, or the folder is not there)."""
    try:
        return max((p.stat().st_mtime for p in workdir.glob("**/train.jsonl")), default=float("-inf"))
    except OSError:
        return float("-inf")
