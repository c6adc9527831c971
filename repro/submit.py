"""`repro submit`: check a test-set prediction file against its server's rules, send it, record it.

The order is the point: everything that can be checked locally (format, every required question
answered once, nothing unknown, answers are strings, size) is checked before any network call, so an
incomplete file never leaves the machine and never costs one of the few test-std submissions.
EvalAI targets are then sent through the `evalai` client (see `repro.evalai_client`); targets on
other servers get the exact file they require, and instructions for uploading it by hand.

Records of EvalAI submissions go to `results/submissions.jsonl` (one JSON object a line: target,
challenge, phase, host, file and digest, submission id, time, later status and result), rewritten
atomically under a lock. Tokens are never written there or printed.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import zipfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from repro.errors import ReproError
from repro.paths import PACKAGE_DIR, data_dir, results_dir

TARGETS_FILE = PACKAGE_DIR / "catalog" / "targets.yaml"
MB = 1024 * 1024
SAMPLE = 5  # ids quoted in a message


# --- targets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictionFormat:
    id_key: str
    id_type: type
    answer_key: str
    answers: tuple[str, ...] = ()   # allowed values, empty = any string

    def describe(self) -> str:
        return f"{{{self.id_key}: {self.id_type.__name__}, {self.answer_key}: str}}"


@dataclass(frozen=True)
class QuestionSource:
    path: str              # relative to the data folder
    layout: str            # list | keyed | lines
    split: str
    list_key: str = ""
    id_key: str = ""


@dataclass(frozen=True)
class Target:
    name: str
    title: str
    server: str
    prediction: PredictionFormat
    questions: QuestionSource | None
    max_file_mb: float
    limits: str = ""
    challenge: int | None = None
    phase: int | None = None
    phase_names: tuple[str, ...] = ()
    direct_upload_max_mb: float = 10.0
    package: dict = field(default_factory=dict)
    instructions: str = ""

    @property
    def on_evalai(self) -> bool:
        return self.server == "evalai"


def load_targets(path: Path = TARGETS_FILE) -> dict[str, Target]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReproError(f"{path}: cannot read the submission targets ({type(exc).__name__})") from None
    if not isinstance(raw, dict):
        raise ReproError(f"{path}: expected a mapping of target names")
    return {name: _target(name, entry, path) for name, entry in raw.items()}


def _target(name: str, entry: Any, path: Path) -> Target:
    where = f"{path}: target {name}"
    try:
        pred = entry["prediction"]
        id_type = {"int": int, "str": str}[pred["id_type"]]
        prediction = PredictionFormat(pred["id_key"], id_type, pred["answer_key"], tuple(pred.get("answers") or ()))
        q = entry.get("questions")
        questions = None if q is None else QuestionSource(q["path"], q["layout"], q["split"], q.get("list_key", ""),
                                                          q.get("id_key", ""))
        if questions is not None and questions.layout not in ("list", "keyed", "lines"):
            raise ValueError(f"unknown questions layout {questions.layout!r}")
        target = Target(
            name=name, title=entry["title"], server=entry["server"], prediction=prediction, questions=questions,
            max_file_mb=float(entry["max_file_mb"]), limits=entry.get("limits", ""),
            challenge=entry.get("challenge"), phase=entry.get("phase"),
            phase_names=tuple(entry.get("phase_names") or ()),
            direct_upload_max_mb=float(entry.get("direct_upload_max_mb", 10)),
            package=dict(entry.get("package") or {}), instructions=entry.get("instructions", ""),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ReproError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
    if target.on_evalai and (not target.challenge or not (target.phase or target.phase_names)):
        raise ReproError(f"{where}: an EvalAI target needs a challenge and a phase id or phase names")
    if not target.on_evalai and not (target.package and target.instructions):
        raise ReproError(f"{where}: a target outside EvalAI needs package and instructions")
    return target


def get_target(name: str, targets: dict[str, Target] | None = None) -> Target:
    targets = load_targets() if targets is None else targets
    if name not in targets:
        raise ReproError(f"unknown submission target {name!r}; one of {', '.join(targets)}")
    return targets[name]


# --- pre-flight: the file, checked before any network call ------------------------------------


@dataclass
class Preflight:
    target: Target
    source: Path
    upload: Path                 # what is sent or handed over: the source itself or a converted file
    count: int                   # predictions
    records: list[dict]          # canonical {id_key, answer_key} records
    converted: str = ""          # why a converted file is sent instead of the source
    questions: Path | None = None
    question_count: int | None = None
    size: int = 0                # bytes of what is sent
    notes: list[str] = field(default_factory=list)


def read_predictions(path: Path) -> tuple[list[Any], str]:
    """Entries of a JSON array or JSON-lines file, and which of the two it was ('array' or 'lines')."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReproError(f"{path}: no such predictions file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReproError(f"{path}: cannot read it as UTF-8 text ({type(exc).__name__})") from None
    body = text.lstrip()
    if not body:
        raise ReproError(f"{path}: empty file")
    if body[0] not in "[{":
        raise ReproError(f"{path}: not JSON (a JSON array of records is expected)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if body[0] == "{" and exc.msg == "Extra data":
            return _read_json_lines(path, text), "lines"
        raise ReproError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    if isinstance(data, dict):
        return [data], "lines"   # a one-line JSON-lines file
    return data, "array"


def _read_json_lines(path: Path, text: str) -> list[Any]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ReproError(f"{path}:{number}: not valid JSON lines ({exc.msg})") from None
    return entries


def read_question_ids(path: Path, source: QuestionSource, id_type: type) -> set:
    """The ids of every question the server requires, from the official question file."""
    try:
        if source.layout == "lines":
            records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            data: Any = None
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReproError(f"question file {path} not found; download the dataset (`repro download`) "
                         "or pass --questions FILE") from None
    except (OSError, ValueError) as exc:
        raise ReproError(f"question file {path}: unreadable ({type(exc).__name__})") from None
    try:
        if source.layout == "keyed":
            ids = list(data)
        else:
            if source.layout == "list":
                records = data[source.list_key] if source.list_key else data
            ids = [record[source.id_key] for record in records]
    except (KeyError, TypeError, IndexError):
        key = f"'{source.list_key}' with '{source.id_key}'" if source.layout == "list" else f"'{source.id_key}'"
        raise ReproError(f"question file {path}: no {key} in it; is it the {source.split} question file?") from None
    if not ids:
        raise ReproError(f"question file {path}: no questions in it")
    if any(type(i) is not id_type for i in ids):
        raise ReproError(f"question file {path}: ids are not all of type {id_type.__name__}")
    return set(ids)


def default_questions(target: Target) -> Path | None:
    return None if target.questions is None else data_dir() / target.questions.path


def _sample(ids: Any) -> str:
    ordered = sorted(ids, key=lambda i: (str(type(i)), i))[:SAMPLE]
    return ", ".join(str(i) for i in ordered)


def check_entries(entries: list[Any], fmt: PredictionFormat, path: Path, kind: str) -> tuple[list[dict], bool]:
    """Canonical records from raw entries, and whether any entry carried keys the server does not read."""
    def where(index: int) -> str:
        return f"{path}:{index + 1}" if kind == "lines" else f"{path}: entry {index + 1}"

    records: list[dict] = []
    extra = False
    problems: Counter = Counter()
    first: dict[str, str] = {}
    for index, entry in enumerate(entries):
        problem = None
        if not isinstance(entry, dict):
            problem = ("not-object", f"{where(index)} is {type(entry).__name__}, not an object {fmt.describe()}")
        elif fmt.id_key not in entry or fmt.answer_key not in entry:
            missing = fmt.id_key if fmt.id_key not in entry else fmt.answer_key
            problem = (f"no-{missing}", f"{where(index)} has no '{missing}' (keys: {', '.join(map(str, entry)) or 'none'})")
        elif type(entry[fmt.id_key]) is not fmt.id_type:
            value = entry[fmt.id_key]
            problem = ("id-type", f"{where(index)}: {fmt.id_key} {value!r} is {type(value).__name__}, "
                                  f"not {fmt.id_type.__name__}")
        elif not isinstance(entry[fmt.answer_key], str):
            value = entry[fmt.answer_key]
            problem = ("answer-type", f"{where(index)}: {fmt.answer_key} {value!r} is {type(value).__name__}, "
                                      "not a string")
        elif fmt.answers and entry[fmt.answer_key] not in fmt.answers:
            problem = ("answer-value", f"{where(index)}: {fmt.answer_key} {entry[fmt.answer_key]!r} is not one of "
                                       f"{', '.join(fmt.answers)}")
        if problem is not None:
            problems[problem[0]] += 1
            first.setdefault(problem[0], problem[1])
            continue
        extra = extra or len(entry) > 2
        records.append({fmt.id_key: entry[fmt.id_key], fmt.answer_key: entry[fmt.answer_key]})
    if problems:
        kind_, count = problems.most_common(1)[0]
        more = f" ({count:,} entries like this)" if count > 1 else ""
        others = sum(problems.values()) - count
        tail = f"; {others:,} other malformed entries" if others else ""
        raise ReproError(f"{first[kind_]}{more}{tail}; nothing sent")
    return records, extra


def check_coverage(records: list[dict], fmt: PredictionFormat, required: set, path: Path, split: str) -> None:
    """Every required question answered exactly once, no unknown ids: else one line and exit 2."""
    counts = Counter(record[fmt.id_key] for record in records)
    duplicates = [i for i, n in counts.items() if n > 1]
    missing = required.difference(counts)
    unknown = set(counts).difference(required)
    parts = []
    if missing:
        parts.append(f"{len(missing):,} of {len(required):,} {split} questions missing (e.g. {_sample(missing)})")
    if duplicates:
        parts.append(f"{len(duplicates):,} duplicate {fmt.id_key}s (e.g. {_sample(duplicates)})")
    if unknown:
        parts.append(f"{len(unknown):,} {fmt.id_key}s not in {split} (e.g. {_sample(unknown)})")
    if parts:
        raise ReproError(f"{path}: {'; '.join(parts)}; nothing sent")


def canonical_bytes(records: list[dict]) -> bytes:
    return json.dumps(records, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def preflight(target: Target, predictions: Path, questions: Path | None = None) -> Preflight:
    """All local checks; raises ReproError (one line, exit 2) on the first failure."""
    predictions = Path(predictions)
    entries, kind = read_predictions(predictions)
    if not entries:
        raise ReproError(f"{predictions}: no predictions in it; nothing sent")
    records, extra = check_entries(entries, target.prediction, predictions, kind)
    question_path = Path(questions) if questions else default_questions(target)
    result = Preflight(target, predictions, predictions, len(records), records)
    if question_path is not None:
        source = target.questions
        if source is None:  # ids hidden by default; the user gave a list of them (JSON lines or a JSON array)
            layout = "lines" if question_path.suffix == ".jsonl" else "list"
            source = QuestionSource(str(question_path), layout, question_path.name, "", target.prediction.id_key)
        required = read_question_ids(question_path, source, target.prediction.id_type)
        check_coverage(records, target.prediction, required, predictions, source.split)
        result.questions, result.question_count = question_path, len(required)
    else:
        result.notes.append("the question ids of this split are not public: coverage not checked")
    if kind == "lines":
        result.converted = "JSON lines converted to the JSON array the server reads"
    elif extra:
        result.converted = f"keys other than {target.prediction.id_key} and {target.prediction.answer_key} dropped"
    result.size = len(canonical_bytes(records)) if result.converted else predictions.stat().st_size
    if result.size > target.max_file_mb * MB:
        raise ReproError(f"{predictions}: {result.size / MB:,.1f} MB is over the server's "
                         f"{target.max_file_mb:,.0f} MB limit; nothing sent")
    return result


def converted_path(source: Path, target: Target) -> Path:
    path = source.with_name(f"{source.stem}.{target.name}.json")
    return path if path != source else source.with_name(f"{source.stem}.upload.json")


def write_upload_file(check: Preflight) -> Path:
    """The file to send: the source when it is already exactly what the server reads, else a converted copy."""
    if check.converted:
        check.upload = converted_path(check.source, check.target)
        write_bytes_atomic(check.upload, canonical_bytes(check.records))
    return check.upload


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- servers outside EvalAI: prepare the exact file -----------------------------------------------


def package_manual(check: Preflight, method: str) -> Path:
    """Write the file the target's server requires next to the predictions; return its path."""
    target, spec = check.target, check.target.package
    if not re.fullmatch(r"[A-Za-z0-9_-]+", method):
        raise ReproError(f"--method {method!r}: use letters, digits, '_' or '-' (it becomes part of a file name)")
    folder = check.source.parent / f"{check.source.stem}.{target.name}"
    out = folder / spec["name"]
    if spec["format"] == "json":
        write_bytes_atomic(out, canonical_bytes(check.records))
    elif spec["format"] == "csv":
        fmt = target.prediction
        lines = [f"{r[fmt.id_key]},{r[fmt.answer_key]}" for r in check.records]
        if any("," in line.split(",", 1)[1] or "\n" in line for line in lines):
            raise ReproError(f"{check.source}: a prediction contains a comma or newline, which the CSV cannot hold")
        write_bytes_atomic(out, ("\n".join(lines) + "\n").encode("utf-8"))
    elif spec["format"] == "zip":
        member = spec["member"].format(method=method)
        fd, tmp = tempfile.mkstemp(prefix=".results.", suffix=".zip", dir=_mkdir(folder))
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(member, canonical_bytes(check.records))
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    else:
        raise ReproError(f"target {target.name}: unknown package format {spec['format']!r}")
    check.upload = out
    return out


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- submission records -------------------------------------------------------------------------


def records_path() -> Path:
    return results_dir() / "submissions.jsonl"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # no advisory locks on this platform: the rename still keeps the file whole
            pass
        yield


def read_records(path: Path | None = None) -> list[dict]:
    path = path or records_path()
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise ReproError(f"{path}:{number}: not a JSON record") from None
    return records


def _rewrite(path: Path, records: list[dict]) -> None:
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    write_bytes_atomic(path, text.encode("utf-8"))


def add_record(record: dict) -> Path:
    path = records_path()
    with _locked(path):
        _rewrite(path, read_records(path) + [record])
    return path


def update_record(submission_id: int, host: str, **changes: Any) -> None:
    path = records_path()
    with _locked(path):
        records = read_records(path)
        for record in reversed(records):
            if record.get("submission_id") == submission_id and record.get("host") == host:
                record.update(changes)
                _rewrite(path, records)
                return


def find_record(submission_id: int) -> dict | None:
    return next((r for r in reversed(read_records()) if r.get("submission_id") == submission_id), None)


# --- phases -------------------------------------------------------------------------------------


def _norm(name: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name or "").lower())


def phase_cache_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro" / "evalai-phases.json"


def resolve_phase(target: Target, client: Any, override: int | None = None) -> tuple[int, str]:
    """(phase id, name): `--phase`, the catalog's id, the cache, or a lookup by name on the server."""
    if override is not None:
        return override, "given with --phase"
    if target.phase:
        return int(target.phase), target.phase_names[0] if target.phase_names else ""
    cache_path = phase_cache_path()
    key = f"{client.conn.host} {target.challenge} {target.name}"
    cache = _read_cache(cache_path)
    if isinstance(cache.get(key), dict) and isinstance(cache[key].get("id"), int):
        return cache[key]["id"], cache[key].get("name", "")
    phases = client.phases(target.challenge)
    for wanted in target.phase_names:
        hits = [p for p in phases if any(_norm(p.get(k)) == _norm(wanted) for k in ("name", "codename", "slug"))]
        if len(hits) == 1 and isinstance(hits[0].get("id"), int):
            cache[key] = {"id": hits[0]["id"], "name": hits[0].get("name", wanted)}
            _write_cache(cache_path, cache)
            return cache[key]["id"], cache[key]["name"]
    listed = ", ".join(f"{p.get('id')} {p.get('name')!r}" for p in phases) or "none"
    raise ReproError(f"challenge {target.challenge} has no phase named {' / '.join(target.phase_names)} "
                     f"(phases: {listed}); pass --phase ID")


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, data: dict) -> None:
    write_bytes_atomic(path, json.dumps(data, indent=2, sort_keys=True).encode("utf-8"))


# --- the command --------------------------------------------------------------------------------


@dataclass
class SubmitOptions:
    target: str
    predictions: Path
    questions: Path | None = None
    wait: bool = False
    dry_run: bool = False
    yes: bool = False
    host: str | None = None
    token: str | None = None
    phase: int | None = None
    large: bool = False
    method: str | None = None
    poll_s: float = 5.0
    timeout_s: float = 3600.0


def submit(opts: SubmitOptions, console: Console, err: Console, confirm: Callable[[str], bool]) -> int:
    """The whole flow; returns the exit code. Raises ReproError/ServerError with one line on failure."""
    target = get_target(opts.target)
    with err.status(f"checking {opts.predictions} against {target.name}…"):
        check = preflight(target, opts.predictions, opts.questions)
    if not target.on_evalai:
        return _prepare_manual(check, opts, console)
    if opts.dry_run:
        _summary(console, check, phase=(opts.phase or target.phase, ""), large=_is_large(check, opts), limits=None)
        console.print("[bold]dry run:[/] the file passed every check; nothing was sent")
        return 0

    from repro.evalai_client import EvalAI, resolve_connection

    client = EvalAI(resolve_connection(opts.host, opts.token))
    phase_id, phase_name = resolve_phase(target, client, opts.phase)
    detail = client.phase(target.challenge, phase_id)
    phase_name = detail.get("name") or phase_name
    limits = client.remaining(target.challenge, phase_id)
    upload = write_upload_file(check)
    large = _is_large(check, opts)
    _summary(console, check, (phase_id, phase_name), large, limits, host=client.conn.host, detail=detail)
    _refuse_when_exhausted(limits, phase_name)
    if not opts.yes and not confirm(f"Submit {upload.name} to {target.name} ({phase_name})?"):
        console.print("not submitted")
        return 1
    metadata = {"method_name": opts.method} if opts.method else {}
    submission_id = _send(client, target, phase_id, upload, large, metadata, err)
    record = {
        "target": target.name, "challenge": target.challenge, "phase": phase_id, "phase_name": phase_name,
        "host": client.conn.host, "predictions": str(check.source), "file": str(upload),
        "sha256": sha256(upload), "bytes": upload.stat().st_size, "questions": check.count,
        "upload": "presigned" if large else "direct", "submission_id": submission_id,
        "submitted_at": _now(), "status": "submitted",
    }
    path = add_record(record)
    console.print(f"[green]submitted[/] {escape(upload.name)} as submission [bold]{submission_id}[/] "
                  f"(recorded in {escape(str(path))})", highlight=False)
    if not opts.wait:
        console.print(f"follow it with: repro submit --status {submission_id} --wait", highlight=False)
        return 0
    return follow(client, submission_id, console, err, opts.poll_s, opts.timeout_s)


def show_status(submission_id: int, console: Console, err: Console, wait: bool, host: str | None = None,
                token: str | None = None, poll_s: float = 5.0, timeout_s: float = 3600.0) -> int:
    """`repro submit --status ID`: the submission's status, and its result once evaluated."""
    from repro.evalai_client import TERMINAL, EvalAI, resolve_connection

    record = find_record(submission_id)
    client = EvalAI(resolve_connection(host or (record or {}).get("host"), token))
    if wait:
        return follow(client, submission_id, console, err, poll_s, timeout_s)
    data = client.submission(submission_id)
    if data["status"] in TERMINAL:
        return _finish(client, data, console)
    console.print(f"submission {submission_id}: [bold]{escape(str(data['status']))}[/] "
                  f"(submitted {escape(str(data.get('submitted_at', '?')))})", highlight=False)
    return 0


def follow(client: Any, submission_id: int, console: Console, err: Console, poll_s: float, timeout_s: float) -> int:
    """Poll `GET /api/jobs/submission/{id}` with backoff until finished, failed or cancelled."""
    from repro.evalai_client import TERMINAL, ServerError

    start, delay, retries = time.monotonic(), max(poll_s, 0.001), 0
    with err.status(f"waiting for submission {submission_id}…") as spinner:
        while True:
            try:
                data = client.submission(submission_id)
                retries = 0
            except ServerError as exc:
                retries += 1
                if not exc.transient or retries > 5:
                    raise
                data = {"status": f"unreachable ({exc})"}
            elapsed = time.monotonic() - start
            spinner.update(f"submission {submission_id}: {data['status']} ({elapsed:.0f} s)")
            if data["status"] in TERMINAL:
                return _finish(client, data, console)
            if elapsed + delay > timeout_s:
                raise ServerError(f"submission {submission_id} is still {data['status']} after {elapsed:.0f} s; "
                                  f"check later with `repro submit --status {submission_id} --wait`")
            time.sleep(delay)
            delay = min(delay * 1.5, 60.0)


def _finish(client: Any, data: dict, console: Console) -> int:
    from repro.evalai_client import ServerError

    sid, status = data.get("id"), data["status"]
    changes: dict[str, Any] = {"status": status, "completed_at": data.get("completed_at")}
    if status == "finished":
        result = client.result_file(data["submission_result_file"]) if data.get("submission_result_file") else None
        changes["result"] = result
        update_record(sid, client.conn.host, **changes)
        console.print(f"submission {sid}: [bold green]finished[/]", highlight=False)
        render_result(console, result)
        return 0
    update_record(sid, client.conn.host, **changes)
    why = ""
    if status == "failed" and data.get("stderr_file"):
        try:
            text = client.result_file(data["stderr_file"])
            lines = [line for line in str(text).splitlines() if line.strip()]
            why = f": {lines[-1].strip()}" if lines else ""
        except ServerError:
            why = " (its error log could not be fetched)"
    raise ServerError(f"submission {sid} {status} on the server{why}")


def render_result(console: Console, result: Any) -> None:
    """VQA-style `[{split: {metric: value}}]` as a table; anything else as JSON."""
    rows = []
    if isinstance(result, list) and all(isinstance(x, dict) for x in result):
        for entry in result:
            for split, metrics in entry.items():
                if not isinstance(metrics, dict):
                    rows = []
                    break
                rows.append((split, metrics))
    if rows:
        names = list(dict.fromkeys(k for _, m in rows for k in m))
        table = Table(title="evaluated result")
        table.add_column("split")
        for name in names:
            table.add_column(name, justify="right")
        for split, metrics in rows:
            table.add_row(split, *(str(metrics.get(n, "–")) for n in names))
        console.print(table)
    elif result is None:
        console.print("the server reports no result file")
    else:
        console.print(escape(json.dumps(result, indent=2) if not isinstance(result, str) else result), highlight=False)


def _is_large(check: Preflight, opts: SubmitOptions) -> bool:
    return opts.large or check.size > check.target.direct_upload_max_mb * MB


def _refuse_when_exhausted(limits: dict | None, phase_name: str) -> None:
    if not limits:
        return
    for key, what in (("remaining_submissions_today_count", "today"), ("remaining_submissions_count", "in all"),
                      ("remaining_submissions_this_month_count", "this month")):
        if limits.get(key) == 0:
            raise ReproError(f"the server reports no submissions left {what} for phase {phase_name!r}; nothing sent")


def _limits_text(limits: dict | None) -> str:
    if not limits:
        return "not reported by the server"
    if "message" in limits:
        return f"{limits['message']}" + (f" (next in {limits['remaining_time']})" if limits.get("remaining_time") else "")
    parts = [f"{what} {limits[key]}" for key, what in (("remaining_submissions_today_count", "today"),
                                                        ("remaining_submissions_this_month_count", "this month"),
                                                        ("remaining_submissions_count", "in all"))
             if key in limits]
    return ", ".join(parts) or "not reported by the server"


def _summary(console: Console, check: Preflight, phase: tuple[int | None, str], large: bool,
             limits: dict | None, host: str = "", detail: dict | None = None) -> None:
    target = check.target
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("target", f"{target.name} — {target.title}")
    if host:
        table.add_row("server", host)
    table.add_row("challenge", str(target.challenge))
    phase_id, phase_name = phase
    table.add_row("phase", f"{phase_id if phase_id else '(looked up by name when sending)'} {phase_name}".strip())
    if detail and detail.get("is_active") is False:
        table.add_row("", "[yellow]the server marks this phase inactive[/]")
    table.add_row("file", str(check.upload if check.converted and check.upload != check.source else check.source)
                  + (f"  ({check.converted})" if check.converted else ""))
    table.add_row("size", f"{check.size / MB:,.2f} MB, {'presigned (large-file)' if large else 'direct'} upload")
    covered = (f"{check.count:,} predictions, every one of {check.question_count:,} questions "
               f"({check.target.questions.split if check.target.questions else check.questions}) answered once"
               if check.question_count else f"{check.count:,} predictions")
    table.add_row("questions", covered)
    table.add_row("limits", target.limits or "not published")
    if host:
        table.add_row("remaining", _limits_text(limits))
    for note in check.notes:
        table.add_row("note", note)
    console.print(table)


def _send(client: Any, target: Target, phase_id: int, upload: Path, large: bool, metadata: dict, err: Console) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(TextColumn("uploading {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task(upload.name, total=upload.stat().st_size)
        return client.submit(target.challenge, phase_id, upload, large, metadata,
                             on_read=lambda n: progress.advance(task, n))


def _prepare_manual(check: Preflight, opts: SubmitOptions, console: Console) -> int:
    target = check.target
    _summary(console, check, (None, ""), large=False, limits=None)
    if opts.dry_run:
        console.print("[bold]dry run:[/] the file passed every check; nothing was written")
        return 0
    out = package_manual(check, opts.method or "repro")
    console.print(f"[green]prepared[/] {escape(str(out))} (sha256 {sha256(out)[:16]}…)", highlight=False)
    console.print(f"{target.name} is not on EvalAI; upload it by hand:", highlight=False)
    console.print(escape(target.instructions.strip().format(file=out)), highlight=False)
    return 0


def _now() -> str:
    from repro.results import now_iso

    return now_iso()


def targets_table() -> Table:
    table = Table(title="submission targets")
    for name in ("target", "server", "challenge / phase", "must answer", "limits"):
        table.add_column(name, overflow="fold")
    for target in load_targets().values():
        where = (f"{target.challenge} / {target.phase or ' or '.join(target.phase_names[:2])}"
                 if target.on_evalai else "by hand")
        table.add_row(target.name, target.server, where, target.questions.split if target.questions else "(hidden)",
                      target.limits)
    return table
