"""Names that become paths. Every name a user gives that the toolkit joins into a path (a spec's id and paper, a
row, a dataset, a variant, the parts of a unit's work folder, a catalog file) is checked here, once, by `inside`
or one of the `*_problem` functions, before it is joined: one path component, never a separator, `..`, an
absolute path or a hidden name. A test (tests/test_hostile_round3.py) walks every place that joins one."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from repro.errors import ReproError, echoed

MAX_NAME_BYTES = 200  # leaves room for ".part", ".corrupt" and ".lock" within the usual 255-byte limit
# a spec id: it names folders (results/<paper>/<id>, runs/<id>) and appears in commands and URLs
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def plain_name_problem(value: Any) -> str | None:
    """Why `value` is not a plain file or folder name (one path component, no hidden file), or None."""
    if not isinstance(value, str):
        return f"expected text, got {type(value).__name__}"
    if not value:
        return "empty"
    if value in (".", ".."):
        return "'.' and '..' are not names"
    if "/" in value or "\\" in value:
        return "a path separator ('/' or '\\') would leave its folder"
    if os.path.isabs(value) or _windows_drive(value):
        return "an absolute path"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "control characters (or NUL) in a name"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "not valid Unicode (a lone surrogate)"
    if size > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes"
    if value.startswith("."):
        return "hidden names (starting with '.') are the toolkit's own"
    if value != value.strip():
        return "leading or trailing spaces"
    return None


def _windows_drive(value: str) -> bool:
    """`C:` or `C:x`: a name Windows reads as on a drive (as `PureWindowsPath(value).drive`, without its parsing)."""
    return value[1:2] == ":" and value[:1].isascii() and value[:1].isalpha()


def identifier_problem(value: Any) -> str | None:
    """Why `value` cannot be a spec id (a plain name of letters, digits, '.', '_', '+' and '-'), or None."""
    problem = plain_name_problem(value)
    if problem is None and (not IDENTIFIER.fullmatch(value) or ".." in value):
        problem = "letters, digits, '.', '_', '+' and '-' only (at most 100), no '..'"
    return problem


def slug(text: str) -> str:
    """A row (or column) name as a file name: `MCAN+PA (ours)` -> `MCAN+PA_ours`, `MCAN+PA*` -> `MCAN+PA-star`;
    always a plain name (`.` and `..` become `row`)."""
    text = text.replace("*", "-star").replace("†", "-dagger")
    text = re.sub(r"[^A-Za-z0-9+.=@-]+", "_", text).strip("_")[:MAX_NAME_BYTES]
    if not text.strip(".") or text.startswith("."):
        text = "row" + text.lstrip(".")
    return text


def plain(value: Any, what: str = "name") -> str:
    """`value` when it is a plain name, else ReproError naming it and why."""
    problem = plain_name_problem(value)
    if problem:
        raise ReproError(f"{what} {echoed(value)} refused: {problem}")
    return value


def inside(root: Path, *names: str, what: str = "name") -> Path:
    """`root / name / ...`, each name checked to be plain first: the one way a user-given name enters a path."""
    path = Path(root)
    for name in names:
        path = path / plain(name, what)
    return path
