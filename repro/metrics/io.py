"""Read ground truth and predictions for `repro eval`: official files and one generic form.

Generic form, every metric:
    annotations  [{"question_id": id, "answers": [...]}]  or  [{"question_id": id, "answer": value}]
                 (optional per item: "answer_type", "question_type", "type", "split")
    predictions  [{"question_id": id, "answer": value}]

Official files recognised:
    vqa       VQA v1/v2 annotations {"annotations": [...]} (answers as {"answer": ...} dicts), with
              the questions file optional (checked against the annotations when given)
    textvqa   TextVQA {"data": [{"question_id", "answers": [10]}]}
    anls      ST-VQA / RRC {"data": [{"question_id" or "questionId", "answers": [...]}]}; predictions
              may use "questionId" too
    mse, accuracy
              TGIF-QA tab-separated question files (.csv/.tsv with a header); the question id is
              `vid_id`, the gold is `answer` (a count, a choice index 0-4, or a FrameQA word; FrameQA's
              `type` column gives per-type scores)
    wups, accuracy
              COCO-QA: a split folder with answers.txt (and types.txt), or answers.txt itself; the
              question id is the 0-based line number; predictions may be a line-aligned .txt file
    recall    ALBEF retrieval test JSON [{"image", "caption": [5 captions]}] with predictions as .npz
              (or JSON) holding `i2t` (images x texts) and `t2i` (texts x images) score matrices
    gqa       a GQA questions file {questionId: {"answer", "types": {"structural"}, "isBalanced", ...}}
              (e.g. testdev_balanced_questions.json), or the generic list with those fields; predictions
              in the GQA submission form [{"questionId", "prediction"}] (the generic form is read too)

Ids are strings or integers (not booleans, floats, null, lists or objects). Ids match when their
text is equal (so 42 and "42" are the same question), so one file giving both 42 and "42" gives a
question twice: a duplicate, an error. The gold's own id is what per-item output uses. Labels
(answer_type, question_type, type, split) are strings; an integer label is read as its text.

Every problem is a ReproError naming the file and what is wrong: a missing, empty or unreadable
file, bytes that are not UTF-8, JSON that does not parse or nests too deeply, an oversized CSV field,
an .npz that is not one (a .npy file, a truncated archive), a top level or an item of the wrong type,
a file with no questions. Only regular files are read (a FIFO, a device such as /dev/zero or a socket
is refused without reading a byte), and at most `REPRO_EVAL_MAX_BYTES` bytes (default 4 GiB) of each.
"""

from __future__ import annotations

import csv
import json
import os
import zipfile
import zlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any

from repro.errors import ReproError, reason
from repro.metrics.base import shown
from repro.metrics.vqa import AnswerTable, Labels
from repro.utils import DuplicateKey, csv_field_limit, unique_keys

SHOW_IDS = 5
MAX_BYTES = 4 << 30  # the largest input file read (REPRO_EVAL_MAX_BYTES)


@dataclass
class Gold:
    ids: list[Hashable]
    values: Any  # per item a list of answers or one value (an AnswerTable for official answer lists)
    fields: dict[str, Any] = field(default_factory=dict)  # answer_type, question_type, type, split (lists or Labels)
    path: Path = Path("<annotations>")  # named in errors about the gold values


def max_bytes() -> int:
    """The largest input `repro eval` reads: `$REPRO_EVAL_MAX_BYTES`, default 4 GiB."""
    import os

    raw = os.environ.get("REPRO_EVAL_MAX_BYTES", "").strip()
    if not raw:
        return MAX_BYTES
    if not raw.isdigit() or int(raw) <= 0:
        raise ReproError(f"REPRO_EVAL_MAX_BYTES={raw!r}: give a positive number of bytes")
    return int(raw)


def _kind(mode: int) -> str:
    import stat

    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: Path):
    """`path` opened for reading in binary, if it is a regular file of at most `max_bytes()`; else a ReproError.

    Opened without blocking (a FIFO with no writer would wait forever) and checked on the open handle, so a
    name swapped for a FIFO or a device between a check and the open is caught too.
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ReproError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReproError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise ReproError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ReproError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise ReproError(f"{path}: {_kind(st.st_mode)}, not a regular file; refusing to read it")
        limit = max_bytes()
        if st.st_size > limit:
            raise ReproError(
                f"{path}: {st.st_size:,} bytes, over the {limit:,} bytes an input may have (REPRO_EVAL_MAX_BYTES)"
            )
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path) -> bytes:
    """The bytes of a regular file of at most `max_bytes()` (a file growing while read is cut off there)."""
    limit = max_bytes()
    with open_regular(path) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ReproError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise ReproError(f"{path}: over the {limit:,} bytes an input may have (REPRO_EVAL_MAX_BYTES)")
    return data


def read_text(path: Path, allow_empty: bool = False) -> str:
    """A UTF-8 text file; missing, unreadable, not a regular file, too large, empty (unless `allow_empty`) or
    not UTF-8: a ReproError."""
    data = read_bytes(path)
    if not allow_empty and (not data or data.isspace()):
        raise ReproError(f"{path}: the file is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ReproError(f"{path}:{line}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def read_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise ReproError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ReproError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ReproError(f"{path}: not readable: the JSON is nested too deeply") from None
    except ValueError as exc:  # an integer with too many digits
        raise ReproError(f"{path}: not readable JSON ({exc})") from None


def _key(qid: Any) -> str:
    return str(qid)


def _few(ids) -> str:
    ids = list(ids)
    text = ", ".join(shown(i) for i in ids[:SHOW_IDS])
    return text + (", ..." if len(ids) > SHOW_IDS else "")


def _plain_ids(ids) -> bool:
    """True when all ids are integers or all are strings: then distinct values have distinct text,
    and a set of them finds duplicates (one C-speed pass over the types)."""
    types = set(map(type, ids))
    return types == {int} or types == {str}


def _check_id(qid: Any, path: Path, where: str) -> Any:
    if isinstance(qid, str) or (isinstance(qid, int) and not isinstance(qid, bool)):
        return qid
    raise ReproError(
        f"{path}: {where}: the id {shown(qid)} is {type(qid).__name__}; an id must be a string or an integer"
    )


def _duplicates(ids: list) -> list[str]:
    """The ids whose text an earlier id already had, as messages show them ("1" after 1 says so)."""
    seen: dict[str, Any] = {}
    dups = []
    for qid in ids:
        k = _key(qid)
        if k in seen:
            first = seen[k]
            dups.append(shown(qid) if type(first) is type(qid) else f"{shown(qid)} (as an integer and as a string)")
        else:
            seen[k] = qid
    return dups


def _check_unique(ids: list, path: Path, what: str) -> None:
    dups = _duplicates(ids)
    if dups:
        raise ReproError(f"{path}: {len(dups)} duplicate {what} id(s): {_few(dups)}")


def _item_id(item: Any, path: Path, index: int) -> Any:
    if not isinstance(item, dict):
        raise ReproError(f"{path}: item #{index} is {type(item).__name__}, not an object")
    for name in ("question_id", "questionId", "id"):
        if name in item:
            return _check_id(item[name], path, f"item #{index}")
    raise ReproError(f"{path}: item #{index} has no question_id")


LABELS = ("answer_type", "question_type", "type", "split")


def _label(value: Any, path: Path, qid: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ReproError(f"{path}: question {shown(qid)}: {name} {shown(value)} is {type(value).__name__}, not a string")


def _answer_text(value: Any, path: Path, qid: Any) -> Any:
    if isinstance(value, dict):
        if "answer" not in value:
            raise ReproError(f"{path}: question {shown(qid)}: an answer object without 'answer'")
        return value["answer"]
    return value


# --- ground truth ------------------------------------------------------------------------------


def _fast_items(items: list, path: Path) -> Gold | None:
    """The common, well-formed case in bulk comprehensions; None sends it to the checking path."""
    try:
        ids = [item["question_id"] for item in items]
        if "answers" not in items[0] or not _plain_ids(ids):
            return None
        if isinstance(items[0]["answers"], list) and items[0]["answers"] and isinstance(items[0]["answers"][0], dict):
            # the official layout: codes for every answer without a Python loop per answer (ids
            # and labels first, while the items just read may still be in cache)
            if len(set(ids)) != len(ids):
                return None
            names = [name for name in LABELS if name in items[0]]
            labels = Labels.from_items(items, names)
            if any(not isinstance(name, str) for label in labels.values() for name in label.names):
                return None
            table = AnswerTable.from_items(items)
            if table is not None:
                return Gold(ids, table, labels, path)
        values = [[a["answer"] for a in item["answers"]] for item in items]
        fields = {name: [item[name] for item in items] for name in LABELS if name in items[0]}
    except (TypeError, KeyError, IndexError):
        return None
    if (
        len(set(ids)) != len(ids)
        or any(not isinstance(v, list) for v in values)
        or any(set(map(type, labels)) != {str} for labels in fields.values())
    ):
        return None
    return Gold(ids, values, fields, path)


def _generic_items(items: list, path: Path) -> Gold:
    if not items:
        raise ReproError(f"{path}: no questions")
    fast = _fast_items(items, path)
    if fast is not None:
        return fast
    ids, values = [], []
    fields: dict[str, list] = {}
    present = [name for name in LABELS if any(isinstance(item, dict) and name in item for item in items)]
    for index, item in enumerate(items):
        qid = _item_id(item, path, index)
        if "answers" in item:
            raw = item["answers"]
            if not isinstance(raw, list):
                raise ReproError(f"{path}: question {shown(qid)}: 'answers' must be a list")
            try:  # the official layout: answer objects
                value = [a["answer"] for a in raw]
            except (TypeError, KeyError, IndexError):
                value = [_answer_text(a, path, qid) for a in raw]
        elif "answer" in item:
            value = item["answer"]
        elif "bbox" in item:
            value = item["bbox"]
        else:
            raise ReproError(f"{path}: question {shown(qid)} has neither 'answers' nor 'answer'")
        ids.append(qid)
        values.append(value)
        for name in present:
            fields.setdefault(name, []).append(_label(item.get(name, ""), path, qid, name))
    _check_unique(ids, path, "question")
    return Gold(ids, values, fields, path)


CSV_FIELD_LIMIT = 131072  # Python's default: a TGIF-QA question file has short fields


def _read_table(path: Path) -> list[dict[str, str]]:
    text = read_text(path)
    delimiter = "\t" if "\t" in text.partition("\n")[0] else ","
    reader = csv.DictReader(StringIO(text, newline=""), delimiter=delimiter)
    try:
        with csv_field_limit(CSV_FIELD_LIMIT):
            rows = list(reader)
    except csv.Error as exc:  # a field over csv.field_size_limit(), a NUL byte, ...
        raise ReproError(f"{path}:{reader.line_num}: not a readable table ({exc})") from None
    if not reader.fieldnames or "answer" not in reader.fieldnames:
        raise ReproError(f"{path}: a TGIF-QA question file needs a header with an 'answer' column")
    if not rows:
        raise ReproError(f"{path}: no questions")
    return rows


def _tgif(path: Path, metric: str) -> Gold:
    rows = _read_table(path)
    ids, values, types = [], [], []
    for line, row in enumerate(rows, start=2):
        qid = row.get("vid_id") or row.get("key") or str(line - 2)
        answer = (row.get("answer") or "").strip()
        if metric == "mse" or "a1" in row:  # counts and multiple-choice indices are integers
            try:
                value: Any = int(answer)
            except ValueError:
                raise ReproError(f"{path}:{line}: answer {answer!r} is not an integer") from None
        else:
            value = answer
        ids.append(qid)
        values.append(value)
        types.append(row.get("type") or "")
    _check_unique(ids, path, "question")
    fields = {"type": types} if any(types) else {}
    return Gold(ids, values, fields, path)


def _lines(path: Path, allow_empty: bool = False) -> list[str]:
    return read_text(path, allow_empty).splitlines()


def _cocoqa(path: Path) -> Gold:
    folder = path if path.is_dir() else path.parent
    answers_file = folder / "answers.txt" if path.is_dir() else path
    answers = [line.strip() for line in _lines(answers_file)]
    while answers and not answers[-1]:
        answers.pop()
    fields = {}
    types_file = folder / "types.txt"
    if types_file.is_file():
        names = {"0": "object", "1": "number", "2": "color", "3": "location"}  # COCO-QA's four, and no other
        codes = [t.strip() for t in _lines(types_file, allow_empty=True)][: len(answers)]
        for line, code in enumerate(codes, 1):
            if code not in names:
                raise ReproError(f"{types_file}:{line}: type {shown(code)} is not one of COCO-QA's 0-3")
        types = [names[code] for code in codes]
        if len(types) == len(answers):
            fields["type"] = types
    return Gold(list(range(len(answers))), answers, fields, answers_file)


def annotation_files(path: Path) -> list[Path]:
    """The files `load_annotations(metric, path)` reads (a COCO-QA split also reads types.txt)."""
    path = Path(path)
    if path.is_dir():
        return [path / "answers.txt", path / "types.txt"]
    if path.suffix.lower() == ".txt":
        return [path, path.parent / "types.txt"]
    return [path]


def load_annotations(metric: str, path: Path, questions: Path | None = None) -> Gold:
    """The ground truth in file order, whichever supported form `path` is in."""
    path = Path(path)
    if not path.exists():
        raise ReproError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if path.is_dir() or suffix == ".txt":
        return _cocoqa(path)
    if suffix in (".csv", ".tsv"):
        return _tgif(path, metric)
    return annotations_from_data(metric, read_json(path), path, questions)


def annotations_from_data(metric: str, data: Any, path: Path, questions: Path | None = None) -> Gold:
    """The ground truth from already-parsed JSON (`path` is named in errors)."""
    if metric == "gqa":
        return _gqa_questions(data, path)
    if isinstance(data, dict) and "annotations" in data:
        gold = _generic_items(_as_list(data["annotations"], path, "annotations"), path)
        if questions is not None:
            _check_questions(gold, Path(questions))
        return gold
    if isinstance(data, dict) and "data" in data:
        return _generic_items(_as_list(data["data"], path, "data"), path)
    if isinstance(data, list):
        if metric == "recall" and data and isinstance(data[0], dict) and "caption" in data[0]:
            return _albef_retrieval(data, path)
        return _generic_items(data, path)
    raise ReproError(
        f"{path}: expected a list of {{question_id, answers}} or an official annotation file, not {type(data).__name__}"
    )


def _as_list(value: Any, path: Path, name: str) -> list:
    if not isinstance(value, list):
        raise ReproError(f"{path}: '{name}' must be a list")
    return value


def _check_questions(gold: Gold, questions: Path) -> None:
    data = read_json(questions)
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ReproError(f"{questions}: expected a VQA questions file with a 'questions' list")
    qids = {_key(_item_id(q, questions, i)) for i, q in enumerate(items)}  # ids checked as they are read
    missing = [g for g in gold.ids if _key(g) not in qids]
    if missing or len(qids) != len(gold.ids):
        raise ReproError(
            f"{questions}: questions do not match the annotations "
            f"({len(qids)} questions, {len(gold.ids)} annotations; not in questions: {_few(missing)})"
        )


def _gqa_questions(data: Any, path: Path) -> Gold:
    """A GQA questions file {questionId: record}, or the generic list of records with a question_id: the gold
    `answer`, `types.structural` and `isBalanced` (true when absent) of every question."""
    if isinstance(data, dict) and isinstance(data.get("annotations", data.get("data")), list):
        data = data.get("annotations", data.get("data"))
    if isinstance(data, list):
        items = [(_item_id(item, path, i), item) for i, item in enumerate(data)]
        _check_unique([qid for qid, _ in items], path, "question")
    elif isinstance(data, dict) and data:
        items = list(data.items())
    else:
        raise ReproError(f"{path}: expected a GQA questions file {{questionId: {{answer, types, isBalanced}}}}")
    ids, answers, structural, balanced = [], [], [], []
    for qid, record in items:
        types = record.get("types") if isinstance(record, dict) else None
        if not isinstance(types, dict) or not isinstance(record.get("answer"), str):
            raise ReproError(f"{path}: question {shown(qid)} needs an 'answer' string and a 'types' object")
        if not isinstance(types.get("structural"), str):
            raise ReproError(f"{path}: question {shown(qid)}: types.structural must be a string")
        flag = record.get("isBalanced", True)
        if not isinstance(flag, bool):  # "false" (a string) would count as balanced
            raise ReproError(f"{path}: question {shown(qid)}: isBalanced must be true or false, got {flag!r}")
        ids.append(qid)
        answers.append(record["answer"])
        structural.append(types["structural"])
        balanced.append(flag)
    if not any(balanced):
        raise ReproError(f"{path}: no question has isBalanced true; the GQA score is over balanced questions")
    return Gold(ids, answers, {"structural": structural, "balanced": balanced}, path)


def _albef_retrieval(items: list, path: Path) -> Gold:
    img2txt, txt2img = [], []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ReproError(f"{path}: item #{index} is {type(item).__name__}, not an object")
        captions = item.get("caption")
        if isinstance(captions, str):
            captions = [captions]
        if not isinstance(captions, list) or not all(isinstance(c, str) for c in captions):
            raise ReproError(f"{path}: item #{index}: 'caption' must be a list of captions (strings)")
        img2txt.append(list(range(len(txt2img), len(txt2img) + len(captions))))
        txt2img.extend([index] * len(captions))
    if not txt2img:
        raise ReproError(f"{path}: no captions: text retrieval has no queries")
    return Gold(list(range(len(items))), img2txt, {"txt2img": txt2img}, path)


# --- predictions -------------------------------------------------------------------------------


class Predictions(dict):
    """{question id: answer}, ids as the file gives them."""


def load_predictions(path: Path) -> Predictions:
    """Predictions by id; a .txt file gives one answer per line keyed by line number."""
    path = Path(path)
    if path.suffix.lower() == ".txt":
        lines = [line.strip() for line in _lines(path)]
        while lines and not lines[-1]:
            lines.pop()
        return Predictions(dict(enumerate(lines)))
    return predictions_from_data(read_json(path), path)


def predictions_from_data(data: Any, path: Path) -> Predictions:
    """Predictions from already-parsed JSON (`path` is named in errors)."""
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise ReproError(f"{path}: expected a list of {{question_id, answer}}")
    try:  # the common case: well-formed, ids all integers or all strings, no duplicates
        fast = {item["question_id"]: item["answer"] for item in data}
        if len(fast) == len(data) and _plain_ids(fast):
            return Predictions(fast)
    except (TypeError, KeyError):
        pass
    out: dict[str, tuple[Hashable, Any]] = {}
    ids = []
    for index, item in enumerate(data):
        qid = _item_id(item, path, index)
        name = "answer" if "answer" in item else "prediction"  # GQA's submission form names it prediction
        if name not in item:
            raise ReproError(f"{path}: prediction for question {shown(qid)} has no 'answer'")
        ids.append(qid)
        out[_key(qid)] = (qid, item[name])
    _check_unique(ids, path, "prediction")
    return Predictions({qid: answer for qid, answer in out.values()})


def align(gold: Gold, predictions: dict, path: Path) -> list[Any]:
    """Predictions in gold order; unknown or missing ids are errors that list a few of them."""
    if len(predictions) == len(gold.ids):
        try:
            return [predictions[q] for q in gold.ids]
        except (KeyError, TypeError):
            pass  # ids differ in type or do not match: compare their text below
    by_text = {_key(q): (q, a) for q, a in predictions.items()}
    known = {_key(q) for q in gold.ids}
    unknown = [qid for k, (qid, _) in by_text.items() if k not in known]
    if unknown:
        raise ReproError(f"{path}: {len(unknown)} prediction(s) for unknown question(s): {_few(unknown)}")
    missing = [q for q in gold.ids if _key(q) not in by_text]
    if missing:
        raise ReproError(
            f"{path}: missing predictions for {len(missing)} of {len(gold.ids)} question(s): {_few(missing)}"
        )
    retyped = [by_text[_key(q)][0] for q in gold.ids if type(by_text[_key(q)][0]) is not type(q)]
    if retyped:  # "1" for 1: the text matches, but a server reads the id as the annotations write it
        theirs = {type(q).__name__ for q in gold.ids}
        raise ReproError(
            f"{path}: {len(retyped)} prediction id(s) are written as {_type_words(retyped)} where the annotations "
            f"write {' and '.join(sorted(theirs))}: {_few(retyped)}; write each id as the annotations do (repro "
            "submit refuses them too)"
        )
    return [by_text[_key(q)][1] for q in gold.ids]


def _type_words(ids: list) -> str:
    names = {"int": "integers", "str": "strings"}
    return " and ".join(
        sorted(names.get(type(q).__name__, type(q).__name__) for q in {type(q): q for q in ids}.values())
    )


# what np.load and reading an archive member raise on a file that is not a good .npz
NPZ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, NotImplementedError)


def _read_npz(path: Path) -> dict:
    import numpy as np

    # opened here, so that it is closed whatever np.load raises (a truncated archive leaves it open)
    handle = open_regular(path)
    with handle:
        if os.fstat(handle.fileno()).st_size == 0:
            raise ReproError(f"{path}: the file is empty")
        try:
            loaded = np.load(handle, allow_pickle=False)
        except NPZ_ERRORS as exc:
            raise ReproError(f"{path}: not an .npz archive of score matrices ({reason(exc)})") from None
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ReproError(f"{path}: a single array (.npy), not an .npz archive holding 'i2t' and 't2i'")
        try:
            with loaded as data:
                return {k: data[k] for k in ("i2t", "t2i") if k in data.files}
        except NPZ_ERRORS as exc:
            raise ReproError(f"{path}: cannot read the score matrices ({reason(exc)})") from None


def _matrix(value: Any, path: Path, name: str):
    """A 2-D float64 array of finite numbers from an .npz array or a JSON list of lists."""
    import numpy as np

    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        array = None
    if array is None or array.dtype.kind not in "iuf" or array.ndim != 2:
        raise ReproError(f"{path}: '{name}' must be a rectangular 2-D array of numbers")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        i, j = np.argwhere(~np.isfinite(array))[0].tolist()
        raise ReproError(f"{path}: '{name}'[{i}][{j}] is {array[i, j]} (NaN or infinite); scores must be finite")
    return array


def load_score_matrices(path: Path):
    """`i2t` and `t2i` score matrices from .npz or JSON: 2-D arrays of finite numbers."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        arrays = _read_npz(path)
    else:
        arrays = read_json(path)
        if not isinstance(arrays, dict):
            raise ReproError(f"{path}: expected an object with 'i2t' and 't2i' score matrices")
    missing = [k for k in ("i2t", "t2i") if k not in arrays]
    if missing:
        raise ReproError(f"{path}: no {' or '.join(missing)} score matrix")
    return _matrix(arrays["i2t"], path, "i2t"), _matrix(arrays["t2i"], path, "t2i")
