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

Ids match when their text is equal (so 42 and "42" are the same question); the gold's own id is
what per-item output uses. Every problem is a ReproError naming the file and what is wrong.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Hashable

from repro.errors import ReproError
from repro.metrics.vqa import AnswerTable, Labels

SHOW_IDS = 5


@dataclass
class Gold:
    ids: list[Hashable]
    values: Any  # per item a list of answers or one value (an AnswerTable for official answer lists)
    fields: dict[str, Any] = field(default_factory=dict)  # answer_type, question_type, type, split (lists or Labels)


def read_json(path: Path) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReproError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReproError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReproError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None


def _key(qid: Any) -> str:
    return str(qid)


def _few(ids) -> str:
    ids = list(ids)
    shown = ", ".join(str(i) for i in ids[:SHOW_IDS])
    return shown + (", ..." if len(ids) > SHOW_IDS else "")


def _check_unique(ids: list, path: Path, what: str) -> None:
    seen: set[str] = set()
    dups = []
    for qid in ids:
        k = _key(qid)
        if k in seen:
            dups.append(qid)
        seen.add(k)
    if dups:
        raise ReproError(f"{path}: {len(dups)} duplicate {what} id(s): {_few(dups)}")


def _item_id(item: Any, path: Path, index: int) -> Any:
    if not isinstance(item, dict):
        raise ReproError(f"{path}: item #{index} is not an object")
    for name in ("question_id", "questionId", "id"):
        if name in item:
            return item[name]
    raise ReproError(f"{path}: item #{index} has no question_id")


def _answer_text(value: Any, path: Path, qid: Any) -> Any:
    if isinstance(value, dict):
        if "answer" not in value:
            raise ReproError(f"{path}: question {qid}: an answer object without 'answer'")
        return value["answer"]
    return value


# --- ground truth ------------------------------------------------------------------------------


def _fast_items(items: list) -> Gold | None:
    """The common, well-formed case in bulk comprehensions; None sends it to the checking path."""
    try:
        ids = [item["question_id"] for item in items]
        if "answers" not in items[0]:
            return None
        if isinstance(items[0]["answers"], list) and items[0]["answers"] and isinstance(items[0]["answers"][0], dict):
            # the official layout: codes for every answer without a Python loop per answer (ids
            # and labels first, while the items just read may still be in cache)
            if len(set(ids)) != len(ids):
                return None
            names = [name for name in ("answer_type", "question_type", "type", "split") if name in items[0]]
            labels = Labels.from_items(items, names)
            table = AnswerTable.from_items(items)
            if table is not None:
                return Gold(ids, table, labels)
        values = [[a["answer"] for a in item["answers"]] for item in items]
        fields = {name: [item[name] for item in items] for name in ("answer_type", "question_type", "type", "split")
                  if name in items[0]}
    except (TypeError, KeyError, IndexError):
        return None
    if len(set(ids)) != len(ids) or any(not isinstance(v, list) for v in values):
        return None
    return Gold(ids, values, fields)


def _generic_items(items: list, path: Path) -> Gold:
    fast = _fast_items(items) if items else None
    if fast is not None:
        return fast
    ids, values = [], []
    fields: dict[str, list] = {}
    optional = ("answer_type", "question_type", "type", "split")
    present = {name for item in items if isinstance(item, dict) for name in optional if name in item}
    for index, item in enumerate(items):
        qid = _item_id(item, path, index)
        if "answers" in item:
            raw = item["answers"]
            if not isinstance(raw, list):
                raise ReproError(f"{path}: question {qid}: 'answers' must be a list")
            try:  # the official layout: answer objects
                value = [a["answer"] for a in raw]
            except (TypeError, KeyError, IndexError):
                value = [_answer_text(a, path, qid) for a in raw]
        elif "answer" in item:
            value = item["answer"]
        elif "bbox" in item:
            value = item["bbox"]
        else:
            raise ReproError(f"{path}: question {qid} has neither 'answers' nor 'answer'")
        ids.append(qid)
        values.append(value)
        for name in present:
            fields.setdefault(name, []).append(item.get(name, ""))
    _check_unique(ids, path, "question")
    return Gold(ids, values, fields)


def _read_table(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            sample = handle.readline()
            handle.seek(0)
            delimiter = "\t" if "\t" in sample else ","
            rows = list(csv.DictReader(handle, delimiter=delimiter))
    except OSError as exc:
        raise ReproError(f"{path}: cannot read ({exc})") from None
    if not rows or "answer" not in rows[0]:
        raise ReproError(f"{path}: a TGIF-QA question file needs a header with an 'answer' column")
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
        types.append(row.get("type", ""))
    _check_unique(ids, path, "question")
    fields = {"type": types} if any(types) else {}
    return Gold(ids, values, fields)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ReproError(f"{path}: cannot read ({exc})") from None


def _cocoqa(path: Path) -> Gold:
    folder = path if path.is_dir() else path.parent
    answers_file = folder / "answers.txt" if path.is_dir() else path
    answers = [line.strip() for line in _lines(answers_file)]
    while answers and not answers[-1]:
        answers.pop()
    fields = {}
    types_file = folder / "types.txt"
    if types_file.is_file():
        names = {"0": "object", "1": "number", "2": "color", "3": "location"}
        types = [names.get(t.strip(), t.strip()) for t in _lines(types_file)][: len(answers)]
        if len(types) == len(answers):
            fields["type"] = types
    return Gold(list(range(len(answers))), answers, fields)


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
    raise ReproError(f"{path}: expected a list of {{question_id, answers}} or an official annotation file")


def _as_list(value: Any, path: Path, name: str) -> list:
    if not isinstance(value, list):
        raise ReproError(f"{path}: '{name}' must be a list")
    return value


def _check_questions(gold: Gold, questions: Path) -> None:
    data = read_json(questions)
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ReproError(f"{questions}: expected a VQA questions file with a 'questions' list")
    qids = {_key(_item_id(q, questions, i)) for i, q in enumerate(items)}
    missing = [g for g in gold.ids if _key(g) not in qids]
    if missing or len(qids) != len(gold.ids):
        raise ReproError(f"{questions}: questions do not match the annotations "
                         f"({len(qids)} questions, {len(gold.ids)} annotations; not in questions: {_few(missing)})")


def _albef_retrieval(items: list, path: Path) -> Gold:
    img2txt, txt2img = [], []
    for index, item in enumerate(items):
        captions = item.get("caption")
        if isinstance(captions, str):
            captions = [captions]
        if not isinstance(captions, list):
            raise ReproError(f"{path}: item #{index}: 'caption' must be a list of captions")
        img2txt.append(list(range(len(txt2img), len(txt2img) + len(captions))))
        txt2img.extend([index] * len(captions))
    return Gold(list(range(len(items))), img2txt, {"txt2img": txt2img})


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
    try:  # the common case: well-formed and no duplicates
        fast = {item["question_id"]: item["answer"] for item in data}
        if len(fast) == len(data):
            return Predictions(fast)
    except (TypeError, KeyError):
        pass
    out: dict[str, tuple[Hashable, Any]] = {}
    dups = []
    for index, item in enumerate(data):
        qid = _item_id(item, path, index)
        if "answer" not in item:
            raise ReproError(f"{path}: prediction for question {qid} has no 'answer'")
        if _key(qid) in out:
            dups.append(qid)
        out[_key(qid)] = (qid, item["answer"])
    if dups:
        raise ReproError(f"{path}: {len(dups)} duplicate prediction id(s): {_few(dups)}")
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
        raise ReproError(f"{path}: missing predictions for {len(missing)} of {len(gold.ids)} question(s): "
                         f"{_few(missing)}")
    return [by_text[_key(q)][1] for q in gold.ids]


def load_score_matrices(path: Path):
    """`i2t` and `t2i` score matrices from .npz or JSON."""
    import numpy as np

    path = Path(path)
    if path.suffix.lower() == ".npz":
        try:
            with np.load(path) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise ReproError(f"{path}: cannot read score matrices ({exc})") from None
    else:
        data = read_json(path)
        if not isinstance(data, dict):
            raise ReproError(f"{path}: expected an object with 'i2t' and 't2i' score matrices")
        arrays = data
    missing = [k for k in ("i2t", "t2i") if k not in arrays]
    if missing:
        raise ReproError(f"{path}: no {' or '.join(missing)} score matrix")
    try:
        return np.asarray(arrays["i2t"], dtype=np.float64), np.asarray(arrays["t2i"], dtype=np.float64)
    except (TypeError, ValueError):
        raise ReproError(f"{path}: score matrices must be rectangular arrays of numbers") from None
