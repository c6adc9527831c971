"""What each submission target requires, and the checks a prediction file must pass before it is sent.

Everything here is local: the file parses, has the target's record format, answers every question of
the split the server requires exactly once with no unknown ids, answers are strings, and the size is
within the server's limit. Any failure is one line (ReproError, exit 2) that says what and where, and
nothing is sent. JSON-lines input, or records with keys the server does not read, are converted to
the canonical JSON array; servers outside EvalAI get the exact file (zip, JSON, CSV) they require.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from repro.errors import ReproError, reason
from repro.paths import data_dir
from repro.utils import DuplicateKey, check_not_an_input, paused_gc, unique_keys, write_bytes_atomic

TARGETS_FILE = Path(__file__).resolve().parent / "targets.yaml"
MB = 1024 * 1024
SAMPLE = 5  # ids quoted in a message


# --- targets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictionFormat:
    id_key: str
    id_type: type
    answer_key: str
    answers: tuple[str, ...] = ()  # allowed values, empty = any string

    def describe(self) -> str:
        return f"{{{self.id_key}: {self.id_type.__name__}, {self.answer_key}: str}}"


@dataclass(frozen=True)
class QuestionSource:
    path: str  # relative to the data folder
    layout: str  # list | keyed | lines
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
    dataset: str = ""  # the catalog dataset whose test split it scores
    for_dataset: bool = False  # the target a run's test-set file of `dataset` goes to first

    @property
    def on_evalai(self) -> bool:
        return self.server == "evalai"


def load_targets(path: Path = TARGETS_FILE) -> dict[str, Target]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReproError(f"{path}: cannot read the submission targets ({reason(exc)})") from None
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
        questions = (
            None
            if q is None
            else QuestionSource(q["path"], q["layout"], q["split"], q.get("list_key", ""), q.get("id_key", ""))
        )
        if questions is not None and questions.layout not in ("list", "keyed", "lines"):
            raise ValueError(f"unknown questions layout {questions.layout!r}")
        target = Target(
            name=name,
            title=entry["title"],
            server=entry["server"],
            prediction=prediction,
            questions=questions,
            max_file_mb=float(entry["max_file_mb"]),
            limits=entry.get("limits", ""),
            challenge=entry.get("challenge"),
            phase=entry.get("phase"),
            phase_names=tuple(entry.get("phase_names") or ()),
            direct_upload_max_mb=float(entry.get("direct_upload_max_mb", 10)),
            package=dict(entry.get("package") or {}),
            instructions=entry.get("instructions", ""),
            dataset=str(entry.get("dataset", "")),
            for_dataset=bool(entry.get("for_dataset", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ReproError(f"{where}: malformed ({reason(exc)})") from None
    if target.on_evalai and (not target.challenge or not (target.phase or target.phase_names)):
        raise ReproError(f"{where}: an EvalAI target needs a challenge and a phase id or phase names")
    if not target.on_evalai and not (target.package and target.instructions):
        raise ReproError(f"{where}: a target outside EvalAI needs package and instructions")
    return target


def target_for(datasets: list[str], targets: dict[str, Target] | None = None) -> str | None:
    """The target a run's test-set file goes to: the first of `datasets` (a spec's) that a server scores."""
    targets = load_targets() if targets is None else targets
    first = {t.dataset: t.name for t in targets.values() if t.for_dataset}
    return next((first[d] for d in datasets if d in first), None)


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
    upload: Path  # what is sent or handed over: the source itself or a converted file
    count: int  # predictions
    records: list[dict]  # canonical {id_key, answer_key} records
    converted: str = ""  # why a converted file is sent instead of the source
    questions: Path | None = None
    question_count: int | None = None
    size: int = 0  # bytes of what is sent
    notes: list[str] = field(default_factory=list)


def read_predictions(path: Path) -> tuple[list[Any], str]:
    """Entries of a JSON array or JSON-lines file, and which of the two it was ('array' or 'lines')."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReproError(f"{path}: no such predictions file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReproError(f"{path}: cannot read it as UTF-8 text ({reason(exc)})") from None
    body = text.lstrip()
    if not body:
        raise ReproError(f"{path}: empty file")
    if body[0] not in "[{":
        raise ReproError(f"{path}: not JSON (a JSON array of records is expected)")
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise ReproError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        if body[0] == "{" and exc.msg == "Extra data":
            return _read_json_lines(path, text), "lines"
        raise ReproError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ReproError(f"{path}: not readable: the JSON is nested too deeply") from None
    except ValueError:  # an integer of more digits than Python reads
        raise ReproError(f"{path}: not readable: a number in it has too many digits") from None
    if isinstance(data, dict):
        return [data], "lines"  # a one-line JSON-lines file
    return data, "array"


def _read_json_lines(path: Path, text: str) -> list[Any]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                entries.append(json.loads(line, object_pairs_hook=unique_keys))
            except DuplicateKey as exc:
                raise ReproError(f"{path}:{number}: {exc}") from None
            except json.JSONDecodeError as exc:
                raise ReproError(f"{path}:{number}: not valid JSON lines ({exc.msg})") from None
            except (RecursionError, ValueError):
                raise ReproError(f"{path}:{number}: not readable: nested too deeply or a number too long") from None
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
        raise ReproError(
            f"question file {path} not found; download the dataset (`repro download`) or pass --questions FILE"
        ) from None
    except (OSError, ValueError) as exc:
        raise ReproError(f"question file {path}: unreadable ({reason(exc)})") from None
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


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro"


def question_ids(path: Path, source: QuestionSource, id_type: type) -> set:
    """`read_question_ids`, cached per file (path, size, mtime): GQA's question file is large and
    parsing it whole for each submission costs tens of seconds; its ids alone load in one."""
    try:
        stat = path.stat()
    except OSError:
        return read_question_ids(path, source, id_type)
    stamp = {
        "path": str(path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "layout": source.layout,
        "list_key": source.list_key,
        "id_key": source.id_key,
    }
    key = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:24]
    cached = cache_dir() / "question-ids" / f"{key}.json"
    try:
        data = json.loads(cached.read_text(encoding="utf-8"))
        if data.get("stamp") == stamp and all(type(i) is id_type for i in data["ids"][:1]):
            return set(data["ids"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    ids = read_question_ids(path, source, id_type)
    try:
        write_bytes_atomic(cached, json.dumps({"stamp": stamp, "ids": sorted(ids)}).encode("utf-8"))
    except OSError:
        pass  # a cache that cannot be written only costs time
    return ids


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
            problem = (
                f"no-{missing}",
                f"{where(index)} has no '{missing}' (keys: {', '.join(map(str, entry)) or 'none'})",
            )
        elif type(entry[fmt.id_key]) is not fmt.id_type:
            value = entry[fmt.id_key]
            problem = (
                "id-type",
                f"{where(index)}: {fmt.id_key} {value!r} is {type(value).__name__}, not {fmt.id_type.__name__}",
            )
        elif not isinstance(entry[fmt.answer_key], str):
            value = entry[fmt.answer_key]
            problem = (
                "answer-type",
                f"{where(index)}: {fmt.answer_key} {value!r} is {type(value).__name__}, not a string",
            )
        elif fmt.answers and entry[fmt.answer_key] not in fmt.answers:
            problem = (
                "answer-value",
                f"{where(index)}: {fmt.answer_key} {entry[fmt.answer_key]!r} is not one of {', '.join(fmt.answers)}",
            )
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
    ids = [record[fmt.id_key] for record in records]
    seen = set(ids)
    duplicates = [] if len(seen) == len(ids) else [i for i, n in Counter(ids).items() if n > 1]
    missing = required.difference(seen)
    unknown = seen.difference(required)
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
    with paused_gc():
        return _preflight(target, Path(predictions), Path(questions) if questions else None)


def not_paper_scale(path: Path) -> str | None:
    """What made a prediction file other than a full paper-scale run, from the name `RunContext.predictions_file`
    gives it (`<row>[.<scale>].seed<N>.<split>[.partial].json`) and its place (a variant's results folder):
    None for a file that names no such origin."""
    name = Path(path).name
    scale = re.search(r"\.(smoke|synthetic)\.seed[0-9]+\.", name)
    if scale:
        return f"the {scale.group(1)} scale (generated data)"
    if re.search(r"\.seed[0-9]+\..+\.partial\.json$", name):
        return "a run cut short by --limit (.partial)"
    if "variants" in Path(path).absolute().parts:
        return "a variant (overrides, --limit or a spec file of its own: a variants/ folder)"
    return None


def refuse_not_paper_scale(target: Target, predictions: Path) -> None:
    """A ReproError for a file `not_paper_scale` names an origin of: a real server never gets one."""
    origin = not_paper_scale(predictions)
    if origin is not None:
        raise ReproError(
            f"{predictions}: made by {origin}, not a paper-scale run of the spec as written; {target.name} is a real "
            f"server with few submissions: nothing sent"
        )


def _preflight(target: Target, predictions: Path, questions: Path | None) -> Preflight:
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
        if not questions and not question_path.exists():
            dataset = source.path.split("/")[0]
            raise ReproError(
                f"question file {question_path} not found; run `repro download {dataset}` or pass --questions FILE"
            )
        required = question_ids(question_path, source, target.prediction.id_type)
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
        raise ReproError(
            f"{predictions}: {result.size / MB:,.1f} MB is over the server's "
            f"{target.max_file_mb:,.0f} MB limit; nothing sent"
        )
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


# --- servers outside EvalAI: prepare the exact file -----------------------------------------------


def package_manual(check: Preflight, method: str) -> Path:
    """Write the file the target's server requires next to the predictions; return its path."""
    target, spec = check.target, check.target.package
    if not re.fullmatch(r"[A-Za-z0-9_-]+", method):
        raise ReproError(f"--method {method!r}: use letters, digits, '_' or '-' (it becomes part of a file name)")
    folder = check.source.parent / f"{check.source.stem}.{target.name}"
    out = folder / spec["name"]
    check_not_an_input(out, {"predictions": check.source})
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
