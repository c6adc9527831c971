"""Shared fixtures: isolated experiment/results/data folders, a CLI runner."""

from __future__ import annotations

import os
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

# The width of the terminal the suite was started from (CI sets COLUMNS) must not decide the width of the
# CLI's output: a console keeps the COLUMNS it saw when it was made; tests set their own.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from repro import specs  # noqa: E402

# transformers binds its log handler to the sys.stderr of the process's first transformers log line. Made inside a
# test's CLI runner, that stream is closed once the test ends, and a later test's log line fails on it: a logging
# error, with its traceback, in that test's output. Bound here, before any runner, it writes to the session's stream.
try:
    from transformers.utils import logging as _transformers_logging
except ImportError:  # the base install has no transformers
    pass
else:
    _transformers_logging.get_logger("transformers")

SPEC_TEXT = """\
id: t1-demo
paper: mcan-pa
table: Table IX
title: A demo table
datasets: [vqa2]
split: test-dev
columns:
  - {name: Num, metric: vqa, key: number, better: higher}
  - {name: All, metric: vqa, key: overall, better: higher}
rows:
  - name: Cited
    cited: "[7]"
    reported: {Num: 50.0, All: 70.0}
  - name: Ours*
    model: {arch: mcan}
    reported: {Num: 54.86, All: 71.05}
    uncertain: {All: "PDF shows '71.0/'"}
tolerance: {default: 0.5, All: 0.25}
scales:
  smoke: {tolerance: {default: 0.1}}
"""


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker takes its share of the cores as PyTorch threads, as `repro run -j N` gives its
    processes (`repro.load.threads_per_process`): N workers of all the cores' threads each would wait for one
    another's cores at every parallel step."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if workers.isdigit() and int(workers) > 1:
        import torch

        from repro import load

        torch.set_num_threads(load.threads_per_process(int(workers)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` skip where there is no CUDA device (torch is imported only when one is collected)."""
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu:
        return
    import torch

    if not torch.cuda.is_available():
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device (marked gpu)"))


@pytest.fixture(autouse=True)
def _fresh_consoles():
    """The CLI's consoles are made at a command's first print and keep the width they saw then (in a process: when
    the command starts); each test's commands get consoles of their own, with the width its runner sets."""
    yield
    from repro.cli.common import console, err_console

    console.forget()
    err_console.forget()


@pytest.fixture(autouse=True, scope="session")
def _scratch_folder(tmp_path_factory: pytest.TempPathFactory):
    """Smoke and variant records of a test that leaves REPRO_RESULTS unset go to a folder of this session, never
    to (nor read from) the user's ~/.cache/repro/results (repro.paths.scratch_dir); so do its caches, parsed YAML
    among them."""
    names = ("REPRO_SCRATCH", "REPRO_CACHE", "XDG_CACHE_HOME")
    before = {name: os.environ.get(name) for name in names}
    os.environ["REPRO_SCRATCH"] = str(tmp_path_factory.mktemp("scratch"))
    os.environ["REPRO_CACHE"] = str(tmp_path_factory.mktemp("parsed"))  # parsed YAML (repro.utils.parsed_once)
    # the caches a test fills (question ids, WordNet staged for the WUPS tests) are the session's too
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# what a test may leave in the checkout or the user's cache: the caches of the tools that run the tests
TOOL_CACHES = frozenset({"__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"})


class _Folders:
    """The folders of the checkout, each with its entries: a test that leaves a file there, outside the results,
    scratch and data folders the tests point the toolkit at, is caught by the folder's changed mtime (one stat per
    folder after a test), then its listing. (The user's ~/.cache is out of reach: `_scratch_folder` points
    XDG_CACHE_HOME, the parent of the default data and scratch folders, at the session's own folder.)"""

    def __init__(self, roots: list[Path]):
        self.roots = roots
        self.seen: dict[Path, tuple[int, frozenset[str]]] = {}
        for root in roots:
            self._walk(root)

    def _walk(self, folder: Path) -> None:
        try:
            stat, entries = folder.stat(), list(os.scandir(folder))
        except OSError:
            return
        self.seen[folder] = (stat.st_mtime_ns, frozenset(e.name for e in entries if e.name not in TOOL_CACHES))
        for entry in entries:
            if entry.name not in TOOL_CACHES and entry.name not in (".git", ".venv") and entry.is_dir():
                if not entry.is_symlink():
                    self._walk(Path(entry.path))

    def new_entries(self) -> list[Path]:
        found = []
        for folder, (mtime, names) in list(self.seen.items()):
            try:
                if folder.stat().st_mtime_ns == mtime:
                    continue
                now = frozenset(name for name in os.listdir(folder) if name not in TOOL_CACHES)
            except OSError:
                now = frozenset()
            found += [folder / name for name in sorted(now - names)]
            self._walk(folder)
        for root in self.roots:
            if root not in self.seen and root.exists():
                found.append(root)
                self._walk(root)
        return found


# What a record asks of other programs while it is written (repro.results): git for its commit, torch's collect_env
# for its environment. Those programs read; the processes they run are not a test's writers.
PROVENANCE_QUERIES = frozenset({("repro.results", "git_state"), ("repro.results", "environment")})


def _asked_for_provenance() -> bool:
    """The process now being started was asked for by one of PROVENANCE_QUERIES (read from the calling frames)."""
    frame = sys._getframe(1)
    while frame is not None:
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) in PROVENANCE_QUERIES:
            return True
        frame = frame.f_back
    return False


class _OwnWrites:
    """What this test process writes into the checkout, from Python's audit events (`open` for writing, `os.rename`
    and `os.replace`, `os.mkdir`, `os.symlink`, `os.link`), and whether it started another process, whose writes
    those events do not see: a fork, a program (but for a record's PROVENANCE_QUERIES), or a process of
    multiprocessing's "spawn" (which raises no audit event: its one way in, `multiprocessing.util.spawnv_passfds`, is
    wrapped). A file that appears in the checkout during a test is the test's when it wrote it or started a process
    that may have; otherwise another program wrote it, such as a `repro run` writing its records into the checkout's
    results/ while the suite runs. Writes from C code that raise no event (torch.save given a path, not a handle) go
    unseen: the toolkit writes through handles (`repro.utils.atomic_open`), whose opening and renaming are events."""

    STARTS = frozenset({"os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec"})
    WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND

    def __init__(self, root: Path):
        import multiprocessing.util

        self.root = str(root) + os.sep
        self.paths: set[str] = set()
        self.started = False
        sys.addaudithook(self._event)
        spawn = multiprocessing.util.spawnv_passfds

        def spawnv_passfds(*args, **kwargs):
            self.started = True
            return spawn(*args, **kwargs)

        multiprocessing.util.spawnv_passfds = spawnv_passfds

    def reset(self) -> None:
        self.paths.clear()
        self.started = False

    def _event(self, event: str, args: tuple) -> None:
        try:
            self._note(event, args)
        except Exception:  # an audit hook that raises makes the call it audits fail
            pass

    def _note(self, event: str, args: tuple) -> None:
        if event in self.STARTS or (event == "subprocess.Popen" and not _asked_for_provenance()):
            self.started = True
            return
        if event == "open":
            path, mode, flags = args
            if not (isinstance(mode, str) and any(c in mode for c in "wax+")) and not (flags or 0) & self.WRITING:
                return
        elif event in ("os.rename", "os.symlink", "os.link"):
            path = args[1]
        elif event == "os.mkdir":
            path = args[0]
        else:
            return
        if isinstance(path, (str, bytes, os.PathLike)):  # not a file descriptor
            path = os.path.abspath(os.fsdecode(path))
            if path.startswith(self.root):
                self.paths.add(path)

    def wrote(self, entry: Path) -> bool:
        """This process wrote `entry`, or into it."""
        text = str(entry)
        return any(path == text or path.startswith(text + os.sep) for path in self.paths)


@pytest.fixture(scope="session")
def _watched_folders() -> _Folders:
    from repro.paths import REPO_DIR

    return _Folders([REPO_DIR])


@pytest.fixture(scope="session")
def _own_writes() -> _OwnWrites:
    from repro.paths import REPO_DIR

    return _OwnWrites(REPO_DIR)


def _leftover_message(left: list[Path], own: _OwnWrites) -> tuple[bool, str]:
    """(whether it fails the test, what to say) for files `left` in the checkout while a test ran."""
    names = ", ".join(map(str, left[:5]))
    if any(map(own.wrote, left)):
        return True, f"the test left files outside its folders: {names}"
    if own.started:
        return True, (
            f"the test, or a process it started, left files outside its folders: {names} (when another program "
            "writes into this checkout while the suite runs, such as a `repro run`, run the suite in a clone)"
        )
    return False, f"files appeared in the checkout while this test ran, written by another program: {names}"


@pytest.fixture(autouse=True)
def _nothing_left_outside(_watched_folders: _Folders, _own_writes: _OwnWrites):
    """No test leaves a file outside the results, scratch and data folders it was given (tmp_path, the session's
    scratch and cache folders): nothing new in the checkout. A file that appeared there while the test ran, which
    the test neither wrote nor could have (it started no process), is another program's: a warning, not a failure."""
    _own_writes.reset()
    yield
    left = _watched_folders.new_entries()
    if left:
        fails, message = _leftover_message(left, _own_writes)
        if fails:
            pytest.fail(message, pytrace=False)
        warnings.warn(message, stacklevel=1)


class LineCheckingRunner(CliRunner):
    """A CliRunner whose every invocation is held to the toolkit's rule for what it says about a failure: no
    error or warning line longer than 1,000 characters (repro.errors.LINE_LIMIT), none with a traceback unless
    --debug asked for it."""

    def invoke(self, *args, **kwargs):
        result = super().invoke(*args, **kwargs)
        for line in result.output.splitlines():
            if line.lstrip().startswith(("error:", "warning:")):
                assert len(line) <= 1000, f"a line of {len(line):,} characters: {line[:200]}"
        if os.environ.get("REPRO_DEBUG", "") in ("", "0") and "--debug" not in (args[1] if len(args) > 1 else ()):
            assert "Traceback (most recent call last)" not in result.output, result.output[-2000:]
        return result


@pytest.fixture
def runner() -> CliRunner:
    return LineCheckingRunner()


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty experiments/results/data folders the toolkit uses instead of the checkout's."""
    for name in ("experiments", "results", "data"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("REPRO_EXPERIMENTS", str(tmp_path / "experiments"))
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    specs.clear_cache()
    yield tmp_path
    specs.clear_cache()


def write_spec(root: Path, text: str, paper: str = "mcan-pa", ident: str = "t1-demo") -> Path:
    path = root / "experiments" / paper / f"{ident}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    specs.clear_cache()
    return path


def copy_spec(root: Path, paper: str, ident: str, edit=None) -> Path:
    """A checked-in spec copied into a sandbox's experiments, after `edit(spec_mapping)` when given."""
    import yaml

    from repro.paths import REPO_DIR

    spec = yaml.safe_load((REPO_DIR / "experiments" / paper / f"{ident}.yaml").read_text(encoding="utf-8"))
    if edit is not None:
        edit(spec)
    path = root / "experiments" / paper / f"{ident}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    specs.clear_cache()
    return path


def lone_and_together(runner, root: Path, words: list[str], paper: str, ident: str) -> tuple[dict, dict]:
    """`repro run WORDS` with each seed alone, then with `--ensemble`: each side's seed records by file name; each
    side's results of the paper are moved to `results-lone` and `results-together` in `root`."""
    import json
    import shutil

    from repro.cli import app

    folder = root / "results" / paper / ident / "seeds"
    sides = []
    for side, extra in (("lone", []), ("together", ["--ensemble"])):
        out = runner.invoke(app, [*words, *extra, "--workdir", str(root / side)])
        assert out.exit_code == 0, out.output
        sides.append({p.name: json.loads(p.read_text()) for p in folder.glob("*.json")})
        shutil.move(str(root / "results" / paper), str(root / f"results-{side}"))
    return sides[0], sides[1]


@pytest.fixture
def demo_spec(sandbox: Path) -> Path:
    return write_spec(sandbox, SPEC_TEXT)


TOY_SPEC = """\
id: toy-table1
paper: toy
table: Table 1
title: Points in halves
datasets: []
split: val
recipe: toy/default
columns:
  - {name: Acc, metric: accuracy, better: higher}
rows:
  - name: Blind
    model: {arch: toy, use_position: false}
    reported: {Acc: 50.0}
  - name: Sighted
    model: {arch: toy}
    reported: {Acc: 99.0}
claims:
  - {text: "seeing the position helps", row: Sighted, over: Blind, column: Acc}
scales:
  smoke: {seeds: [0]}
"""


@pytest.fixture
def toy_family(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny family from tests/toy_family, registered with one line, and its spec: trains in a second."""
    from repro import families

    monkeypatch.setattr(
        families, "FAMILIES", [*families.FAMILIES, families.Family("toy", "tests.toy_family", ("toy",))]
    )
    write_spec(sandbox, TOY_SPEC, paper="toy", ident="toy-table1")
    return sandbox
