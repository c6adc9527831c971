"""Small utilities used across the toolkit: atomic writes, sha256, timestamps, YAML with line numbers, and
a pause of the cyclic garbage collector while millions of small objects are built.

Atomic writes: a temporary file in the same folder, flushed and fsynced, then renamed over the
target, so a file is either complete or absent; an error or interrupt leaves the old file.
"""

from __future__ import annotations

import difflib
import errno
import functools
import gc
import hashlib
import json
import math
import os
import pickle
import re
import secrets
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from repro.errors import ReproError, cut, echoed


def check_output_path(path: Path, what: str = "output") -> None:
    """A ReproError when `path` exists and is not a regular file (a FIFO, a device such as /dev/null, a
    socket, a folder): an output replaces its target by a rename, which would replace that node itself."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ReproError(f"{what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    kind = next((name for test, name in kinds.items() if test(mode)), "not a regular file")
    raise ReproError(f"{what} {path} is {kind}, not a regular file; give a file name (it is never replaced)")


def check_not_an_input(output: Path, inputs: dict[str, Path | None], what: str = "output") -> None:
    """A ReproError when `output` is one of the command's own inputs (the same path, or the same file through a
    link), or lies in an input folder (the records a table reads): writing it would replace the input, and an
    official file fetched by hand may not be fetched again. None stands for an input the command lacks."""
    output = Path(output)
    for name, given in inputs.items():
        if given is None:
            continue
        given = Path(given)
        if given.is_dir() and output.resolve().is_relative_to(given.resolve()):
            raise ReproError(
                f"{what} {output} is inside the {name} it reads ({given}); write it elsewhere (the {name} is never "
                "written into)"
            )
        same = output.resolve() == given.resolve()
        if not same and output.exists() and given.exists():
            try:
                same = os.path.samefile(output, given)
            except OSError:
                same = False
        if same:
            raise ReproError(
                f"{what} {output} is the {name} it reads ({given}); give another file name (the {name} is never "
                "written over)"
            )


class _PlainData(pickle.Unpickler):
    """Reads a pickle of plain data (text, numbers, bytes, lists, tuples, mappings, sets): every class or function
    it asks for is refused, so loading it runs nothing."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refused: the file asks for {module}.{name}")


def load_plain_pickle(path: Path) -> Any:
    """A pickle of plain data only (`_PlainData`): a pickle.UnpicklingError when it holds anything else."""
    with open(path, "rb") as handle:
        return _PlainData(handle).load()


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new file `.<name>.<8 hex>.tmp` beside `path`, created with mode 0o666 so that the umask (and a
    folder's default ACL) decides its permissions, as for any file a program creates; `mkstemp` would
    make it 0600, which a rename then gives the target."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary name for {path.name}")


@contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO]:
    """`with atomic_open(p, "wb") as f: ...` writes `p` atomically ("w" for text, "wb" for bytes).

    The file gets the mode the umask gives (0644 under umask 022); a target that exists and is not a
    regular file is refused (`check_output_path`) before anything is written."""
    path = Path(path)
    check_output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a write's error (disk full, `ulimit -f`) names no file: this one it is
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    except RuntimeError as exc:
        Path(tmp).unlink(missing_ok=True)
        if "write failed" in str(exc):  # torch.save's writer wraps the system's error in its own
            raise OSError(
                errno.EIO, "writing failed (disk full, or the file size limit of `ulimit -f`)", str(path)
            ) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def work_dir(root: Path, prefix: str) -> Path:
    """A new temporary folder in `root`, named `<prefix><host>.<pid>.<random>`, after sweeping the ones
    of that prefix that a killed process on this host left behind (`sweep_work_dirs`)."""
    root = Path(root)
    sweep_work_dirs(root, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{socket.gethostname()}.{os.getpid()}.", dir=root))


def sweep_work_dirs(root: Path, prefix: str) -> list[Path]:
    """Remove `root`'s temporary folders of `prefix` whose process, on this host, no longer runs.

    A folder of another host (a shared filesystem) or of a live process is left alone; returns the removed.
    """
    host, removed = socket.gethostname(), []
    for entry in Path(root).glob(f"{prefix}*"):
        parts = entry.name[len(prefix) :].rsplit(".", 2)
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit() or not entry.is_dir():
            continue
        if not _process_alive(int(parts[1])):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


@contextmanager
def paused_gc() -> Iterator[None]:
    """Millions of small answer objects make the cyclic collector run again and again; none of
    them form cycles, so it is paused while they are built and scored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class DuplicateKey(ValueError):
    """A JSON object that names a key twice (which of the two counts is not defined: Python keeps the last)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads(..., object_pairs_hook=unique_keys)`: an object, or DuplicateKey when it names a key twice."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKey(f"a JSON object names {twice[:200]!r} twice; give each key once")
    return out


def write_json_atomic(path: Path, data: Any, compact: bool = False) -> None:
    """Write JSON (strict: no NaN) so that `path` is either the old file or the complete new one. Indented for
    reading, or `compact` on one line as the datasets' own files are: the generated data, where json's indented
    encoder (pure Python) took most of the generation's time."""
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    text = json.dumps(data, sort_keys=True, allow_nan=False, **layout)
    with atomic_open(path) as handle:
        handle.write(text + "\n")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def sha256_file(path: Path, on_chunk=None, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks; `on_chunk(n)` is called with each chunk's size (progress)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_size):
            digest.update(block)
            if on_chunk is not None:
                on_chunk(len(block))
    return digest.hexdigest()


@contextmanager
def csv_field_limit(limit: int) -> Iterator[None]:
    """`csv.field_size_limit` is one setting for the whole process: set it for one read and put it back."""
    import csv

    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --- YAML with line numbers ---------------------------------------------------------------------
#
# Every YAML file and value the toolkit reads (specs, recipes, the catalog, the submission targets, key=value
# overrides) is read here, by ruamel.yaml as YAML 1.2: `1:30` is text (YAML 1.1 read it as 90, in base 60), `yes`
# is text, `012` is twelve. A value is text, a number, true/false, null, a list or a mapping, and nothing else:
# no dates, no binary, no tags; a number written in octal or hexadecimal (`0o17`, `0x1f`) is refused rather than
# read as a surprise, and so is an integer too long to be a count.

MAX_YAML_BYTES = 4 << 20  # specs and recipes are a few kB; anything far larger is not one
MAX_DIGITS = 30  # an integer longer than this is no count, seed or size
_CORE = "tag:yaml.org,2002:"
_VALUE_TAGS = {f"{_CORE}{kind}" for kind in ("str", "int", "float", "bool", "null")}
_BASED = re.compile(r"[-+]?0[oOxXbB]")


def _yaml_reader():
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True)  # YAML 1.2, the core schema


@functools.cache
def _scalars():
    """One constructor for every scalar (a reader per value would cost more than the value)."""
    return _yaml_reader().constructor


def yaml_scalar(node: Any, where: str) -> Any:
    """One scalar node as a Python value (YAML 1.2 core schema); ReproError at `where` (`file:line`) for a tag,
    a date, an octal or hexadecimal number or an integer of more than MAX_DIGITS digits."""
    tag, text = node.tag, node.value
    if tag not in _VALUE_TAGS:
        kind = tag.rsplit(":", 1)[-1] if tag.startswith(_CORE) else tag
        raise ReproError(f"{where}: YAML {kind} {echoed(text)} is not a value here; quote it to mean the text")
    if tag == f"{_CORE}int":
        if _BASED.match(text):
            raise ReproError(f"{where}: {echoed(text)}: write numbers in decimal (no 0o, 0x or 0b)")
        if len(text.lstrip("+-")) > MAX_DIGITS:
            raise ReproError(
                f"{where}: an integer of {len(text.lstrip('+-')):,} digits is no count; at most {MAX_DIGITS}"
            )
    if tag == f"{_CORE}float" and len(text) > 400:
        raise ReproError(f"{where}: a number written with {len(text):,} characters; write it shorter")
    return _scalars().construct_object(node)


class Located:
    """Line numbers of every mapping key and sequence item of one YAML document, read into plain Python: at most
    `max_aliases` uses of an alias (*name; none by default: no spec needs them, and they allow exponential
    "billion laughs" documents), none recursive."""

    def __init__(self, path: Path, max_aliases: int = 0):
        self.path = path
        self.lines: dict[tuple, int] = {}
        self.max_aliases, self._aliases = max_aliases, 0
        self._open: set[int] = set()
        self._read: set[int] = set()

    def error(self, where: tuple, message: str) -> ReproError:
        line = self.lines.get(where)
        while line is None and where:
            where = where[:-1]
            line = self.lines.get(where)
        return ReproError(f"{self.path}:{line or 1}: {message}")

    def to_python(self, node: Any, where: tuple = ()) -> Any:
        from ruamel.yaml import nodes

        line = node.start_mark.line + 1
        self.lines.setdefault(where, line)
        if node.anchor is not None and self.max_aliases == 0:
            raise ReproError(f"{self.path}:{line}: YAML anchors and aliases (&, *) are not allowed here")
        if id(node) in self._open:
            raise ReproError(f"{self.path}:{line}: recursive alias *{node.anchor}")
        if id(node) in self._read:  # a node read before: an alias of it
            self._aliases += 1
            if self._aliases > self.max_aliases:
                raise ReproError(
                    f"{self.path}:{line}: more than {self.max_aliases} aliases (*name); write the values out"
                )
        self._read.add(id(node))
        if isinstance(node, nodes.ScalarNode):
            return yaml_scalar(node, f"{self.path}:{line}")
        self._open.add(id(node))
        try:
            return self._collection(node, where, line)
        finally:
            self._open.discard(id(node))

    def _collection(self, node: Any, where: tuple, line: int) -> Any:
        from ruamel.yaml import nodes

        if isinstance(node, nodes.MappingNode):
            if node.tag != f"{_CORE}map":
                raise ReproError(f"{self.path}:{line}: YAML tag {node.tag!r} is not allowed")
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, nodes.ScalarNode):
                    raise ReproError(f"{self.path}:{key_line}: a key must be a plain value")
                key = yaml_scalar(key_node, f"{self.path}:{key_line}")
                if not isinstance(key, str):
                    raise ReproError(f"{self.path}:{key_line}: key {echoed(key)} is not a name; quote it")
                if key in out:
                    raise ReproError(f"{self.path}:{key_line}: duplicate key {echoed(key)}")
                self.lines[where + (key,)] = key_line
                out[key] = self.to_python(value_node, where + (key,))
            return out
        if node.tag != f"{_CORE}seq":
            raise ReproError(f"{self.path}:{line}: YAML tag {node.tag!r} is not allowed")
        items = []
        for i, item in enumerate(node.value):
            self.lines[where + (i,)] = item.start_mark.line + 1
            items.append(self.to_python(item, where + (i,)))
        return items


def compose_yaml(text: str, where: str) -> Any:
    """One YAML document's node graph (YAML 1.2; `Located.to_python` reads it); ReproError with `where:line` for
    anything that is not one well-formed document."""
    from ruamel.yaml.error import YAMLError

    try:
        return _yaml_reader().compose(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "expected a single document" in str(exc):
            problem = "more than one YAML document"
        raise ReproError(f"{where}:{line}: invalid YAML: {one_line_text(problem)}") from None
    except RecursionError:
        raise ReproError(f"{where}: YAML nested too deeply") from None


def one_line_text(text: str) -> str:
    return cut(" ".join(str(text).split()))


def read_yaml(path: Path, what: str = "file") -> tuple[Any, Located]:
    """Parse a YAML file into plain Python with the line of every key and item; ReproError with file:line.

    What a file parses to is kept on disk by its content's hash (`parsed_cache_dir`, as JSON: reading it back runs
    nothing), so a spec, a recipe or the catalog is parsed once, not by every command; the hash covers the file's
    bytes and this reader's own code, so an edited file or reader parses afresh."""
    located = Located(path)
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise ReproError(f"{path}: {path.stat().st_size} bytes is too large for a {what}")
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReproError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ReproError(f"{path}: cannot read: {exc.strerror}") from None
    located.lines = {}

    def parse() -> tuple[Any, dict[tuple, int]]:
        node = compose_yaml(text, str(path))
        if node is None:
            raise ReproError(f"{path}:1: empty {what}")
        try:
            return located.to_python(node), located.lines
        except RecursionError:
            raise ReproError(f"{path}: YAML nested too deeply") from None

    data, located.lines = parsed_once(raw, parse, Path(__file__))
    return data, located


# --- what a YAML file parses to, kept by content hash ------------------------------------------------

_PAIRS = "\x00pairs"  # a mapping whose keys are not all text (or that holds this key): its (key, value) pairs


def parsed_cache_dir() -> Path | None:
    """Where parsed YAML is kept: `$REPRO_CACHE/parsed`, else `$XDG_CACHE_HOME/repro/parsed` (`~/.cache/...`);
    None (nothing kept) when REPRO_CACHE is `off`."""
    root = os.environ.get("REPRO_CACHE", "")
    if root == "off":
        return None
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro"
    return base / "parsed"


def parsed_once(raw: bytes, parse, reader: Path) -> tuple[Any, dict[tuple, int]]:
    """`parse()` of a YAML file whose bytes are `raw`: (plain data, the line of each key path), kept on disk by the
    hash of `raw`, of `reader` (the source file of the code that parses) and of the YAML library's version, as JSON
    (reading it back runs nothing); a file, a reader or a library that changes parses afresh. What JSON cannot
    hold exactly (a date) is parsed every time."""
    key = hashlib.sha256(_source_digest(reader) + raw).hexdigest()
    folder = parsed_cache_dir()
    if folder is not None:
        try:
            kept = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"), object_hook=_decoded)
            return kept["data"], {tuple(where): int(line) for where, line in kept["lines"]}
        except (OSError, ValueError, KeyError, TypeError):  # none kept, or unreadable: parsed afresh and kept again
            pass
    data, lines = parse()
    if folder is not None:
        try:
            kept = {"data": _encode(data), "lines": [[_encode(list(where)), line] for where, line in lines.items()]}
            folder.mkdir(parents=True, exist_ok=True)
            with atomic_open(folder / f"{key}.json") as handle:
                json.dump(kept, handle)  # keys in their order, as the file has them
        except (OSError, TypeError, ValueError):  # a read-only cache folder, a value JSON cannot hold: not kept
            pass
    return data, lines


@functools.cache
def _source_digest(reader: Path) -> bytes:
    """What decides how a file parses, besides its bytes: the reader's source, this module's, the library's version."""
    import importlib.util

    library = Path(importlib.util.find_spec("ruamel.yaml").origin).read_bytes()  # its version, unimported
    return hashlib.sha256(reader.read_bytes() + Path(__file__).read_bytes() + library).digest()


def _encode(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and _PAIRS not in value:
            return {k: _encode(v) for k, v in value.items()}
        return {_PAIRS: [[k, _encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(type(value).__name__)  # a date, bytes: not kept


def _decoded(mapping: dict) -> dict:
    """A JSON object as `_encode` wrote it (json's object_hook: called on the innermost objects first)."""
    if len(mapping) == 1 and _PAIRS in mapping:
        return dict(mapping[_PAIRS])
    return mapping


def yaml_value(text: str, where: str) -> Any:
    """A YAML 1.2 value given on the command line (`recipe.epochs=2`: `2`), by the rules of the files."""
    node = compose_yaml(text, where)
    if node is None:
        return None
    located = Located(Path(where))
    try:
        return located.to_python(node)
    except ReproError as exc:
        raise ReproError(str(exc).replace(f"{where}:1: ", f"{where}: ", 1)) from None


def did_you_mean(key: Any, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` with the known name closest to `key`, or nothing: the hint of every unknown key
    (specs, recipes, model configs)."""
    close = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_keys(loc: Located, where: tuple, data: dict, allowed: set[str], what: str) -> None:
    """Refuse a key outside `allowed`, suggesting the closest known one."""
    for key in data:
        if key not in allowed:
            raise loc.error(where + (key,), f"unknown {what} key {key!r}{did_you_mean(key, allowed)}")


# --- values of settings and overrides -------------------------------------------------------------


def value_text(value: Any) -> str:
    """A setting's value as typed on a command line: text as it is, lists and mappings as JSON, else YAML."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf"  # YAML's words (JSON has none)
    return json.dumps(value, separators=(",", ":"))  # lists and mappings as JSON; true, null and numbers as YAML


def same_type(current: Any, value: Any) -> None:
    """A value of the kind the setting has: an integer for an integer, a number for a float, and so on (the
    overrides of `repro.variants`, a spec's generator settings in `GeneratorSettings.from_mapping`)."""
    if current is None or value is None:
        return
    if isinstance(current, bool) or isinstance(value, bool):
        ok = isinstance(current, bool) and isinstance(value, bool)
    elif isinstance(current, int):
        ok = isinstance(value, int)
    elif isinstance(current, float):
        ok = isinstance(value, (int, float))
    elif isinstance(current, (list, tuple)):
        ok = isinstance(value, list)
    else:
        ok = isinstance(value, type(current))
    if not ok:
        raise ReproError(f"expected {kind_of(current)}, got {kind_of(value)} {cut(value_text(value))}")


def kind_of(value: Any) -> str:
    """What kind of value a setting holds, in words: true/false, an integer, a number, text, a list, a mapping."""
    if isinstance(value, dict):
        return "a mapping"
    return {bool: "true/false", int: "an integer", float: "a number", str: "text"}.get(
        type(value), "a list" if isinstance(value, (list, tuple)) else type(value).__name__
    )
