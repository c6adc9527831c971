"""Experiment specs: load and validate `experiments/<paper>/<table-id>.yaml`, resolve ids.

A spec is one table of one paper: its columns (metric, direction), its rows with the numbers the
paper printed, which rows this toolkit runs (a `model` or `compute` mapping) and which are cited
from other papers (`cited`). Every validation error names `file:line`.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from repro.design import Design, design_hash, parse_design
from repro.errors import ReproError, echoed
from repro.metrics import DIRECTIONS, METRICS
from repro.names import identifier_problem, slug
from repro.paths import experiments_dir
from repro.utils import Located, did_you_mean, read_yaml, unknown_keys

COMPUTE_TASKS = ("complexity", "statistics")
SCALES = ("paper", "synthetic", "smoke")
DEFAULT_TOLERANCE = {"paper": 0.5, "synthetic": 1.0, "smoke": 1.0}


@dataclass(frozen=True)
class Column:
    name: str
    metric: str
    better: str = "higher"  # higher, lower or none; in a spec, the metric's direction unless it says otherwise
    key: str | None = None  # which aggregate of the metric, e.g. "yes/no" for vqa
    split: str | None = None  # overrides the spec's split for this column
    dataset: str | None = None  # overrides the spec's dataset for this column
    unit: str | None = None  # as printed: "%", "M", "G", "s"


@dataclass(frozen=True)
class Row:
    name: str
    reported: dict[str, float | None]
    cited: str | None = None  # reference as printed, e.g. "[16]": shown, never run
    model: dict[str, Any] | None = None  # model configuration for rows this toolkit trains
    compute: dict[str, Any] | None = None  # non-training runs: dataset statistics, complexity
    uncertain: dict[str, str] = field(default_factory=dict)  # column -> what the PDF shows
    deviation: dict[str, str] = field(default_factory=dict)  # column -> why a faithful run differs from the paper
    note: str | None = None
    config: Any = field(default=None, compare=False)  # the typed config of `model` (or of compute.model)

    @property
    def runnable(self) -> bool:
        return self.cited is None and (self.model is not None or self.compute is not None)

    @property
    def slug(self) -> str:
        return row_slug(self.name)


@dataclass(frozen=True)
class Claim:
    """A statement of the paper about its table: `row` beats `over` on `column` (in its better direction)."""

    text: str
    row: str
    over: str
    column: str
    # equivalence margin δ in the column's units where the paper prints one for this claim; None: the design's δ
    # of the column (repro.design)
    margin: float | None = None
    # the spec id of the positive control this claim depends on: the mechanism's row against its ablation on a task
    # built to need it; the claim is informative only when every claim of that spec holds at the same scale
    control: str | None = None

    def canonical(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "over": self.over,
            "column": self.column,
            "margin": self.margin,
            "control": self.control,
        }


@dataclass(frozen=True)
class Spec:
    id: str
    paper: str
    table: str
    title: str
    datasets: tuple[str, ...]
    split: str
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    path: Path
    recipe: str | None = None
    tolerance: dict[str, float] = field(default_factory=dict)  # paper scale: column -> points
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-scale settings
    claims: tuple[Claim, ...] = ()
    notes: str | None = None
    design: Design | None = None  # the statistical design the claims are judged under (repro.design)
    # the key=value overrides already in its settings and rows (a variant's, applied once by
    # `repro.variants.resolve`); () for the spec as written
    overrides: tuple[tuple[str, Any], ...] = ()
    lines: dict[tuple, int] = field(default_factory=dict, compare=False, repr=False)  # key path -> line in the file

    def design_hash(self, scale: str) -> str:
        """The hash of the design a record of `scale` is judged under ("" when the spec has none for it)."""
        return design_hash(self.design, scale, [c.canonical() for c in self.claims])

    def error(self, where: tuple, message: str) -> ReproError:
        """`file:line: message`, the line of the key at `where` (or of the nearest key above it)."""
        line = self.lines.get(where)
        while line is None and where:
            where = where[:-1]
            line = self.lines.get(where)
        return ReproError(f"{self.path}:{line or 1}: {message}")

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def row(self, name: str) -> Row:
        for row in self.rows:
            if row.name == name or row.slug == name:
                return row
        names = [r.name for r in self.rows]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; rows: {', '.join(names)}"
        raise ReproError(f"{self.id} has no row {name!r}{hint}")

    def tolerance_for(self, column: str, scale: str) -> float:
        if scale == "paper":
            table = self.tolerance
        else:
            table = self.scales.get(scale, {}).get("tolerance", {})
        return float(table.get(column, table.get("default", DEFAULT_TOLERANCE.get(scale, 1.0))))

    @property
    def runnable_rows(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.runnable)


def scale_settings(spec: Spec, scale: str) -> dict[str, Any]:
    """The spec's `scales.<scale>` mapping (paper: none, unless a variant's overrides put some there)."""
    if scale == "paper":
        return spec.scales.get("paper", {})
    if scale not in spec.scales:
        runnable = ", ".join(sorted(spec.scales)) or "none"
        raise ReproError(
            f"{spec.id} has no settings for scale {scale!r} (scales it defines: {runnable}); "
            f"add `scales: {{{scale}: ...}}` to {spec.path}"
        )
    return spec.scales[scale]


def select_rows(spec: Spec, names: list[str] | None) -> list[Row]:
    """The rows `--rows` names (each once, none cited), or every runnable row."""
    if not names:
        rows = list(spec.runnable_rows)
    else:
        rows = [spec.row(n.strip()) for n in names if n.strip()]
        twice = sorted({r.name for r in rows if sum(o.name == r.name for o in rows) > 1})
        if twice:  # one unit planned twice would be trained twice at once in one folder
            raise ReproError(f"--rows names {', '.join(map(repr, twice))} more than once: {', '.join(names)}")
        for row in rows:
            if row.cited:
                raise ReproError(f"row {row.name!r} of {spec.id} is cited from {row.cited}: it is shown, never run")
    if not rows:
        raise ReproError(f"{spec.id} has no runnable rows")
    return rows


def row_slug(name: str) -> str:
    """A row name as a file name (`repro.names.slug`): `MCAN+PA (ours)` -> `MCAN+PA_ours`."""
    return slug(name)


# --- validation --------------------------------------------------------------------------------

_SPEC_KEYS = {
    "id",
    "paper",
    "table",
    "title",
    "datasets",
    "split",
    "columns",
    "rows",
    "recipe",
    "tolerance",
    "scales",
    "claims",
    "design",
    "notes",
}
_CLAIM_KEYS = {"text", "row", "over", "column"}
_CLAIM_OPTIONAL = {"margin", "control"}
_COLUMN_KEYS = {"name", "metric", "better", "key", "split", "dataset", "unit"}
_ROW_KEYS = {"name", "reported", "cited", "model", "compute", "uncertain", "deviation", "note"}


def _expect(loc: Located, where: tuple, value: Any, kind: type | tuple, what: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise loc.error(where, f"{what} must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple) -> str:
    names = {str: "a string", dict: "a mapping", list: "a list", int: "an integer", float: "a number"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def parse_spec(path: Path, in_tree: bool = True) -> Spec:
    """Load and validate one spec file; raise ReproError with `file:line: message` when it is wrong.
    `in_tree=False`: a copy outside the experiments folder (`repro cp`), which may live anywhere."""
    from repro.families import papers  # the family table: papers, their configs and recipes

    data, loc = read_yaml(path, "spec")
    _expect(loc, (), data, dict, "a spec")
    unknown_keys(loc, (), data, _SPEC_KEYS, "spec")
    for key in ("id", "paper", "table", "title", "split", "columns", "rows", "datasets"):
        if key not in data:
            raise loc.error((), f"missing required key {key!r}")
    for key in ("id", "paper", "table", "title", "split"):
        _expect(loc, (key,), data[key], str, key)
    problem = identifier_problem(data["id"])
    if problem:
        # the id names the spec's folders (results/<paper>/<id>, runs/<id>, the variants folder): repro.names
        raise loc.error(("id",), f"id {echoed(data['id'])} is not a plain name: {problem}")
    if data["paper"] not in papers():
        raise loc.error(("paper",), f"unknown paper {data['paper']!r}; one of {', '.join(papers())}")
    if in_tree and (path.parent.name != data["paper"] or path.stem != data["id"]):
        raise loc.error(
            ("id",),
            f"spec {data['id']!r} of {data['paper']!r} must live at experiments/{data['paper']}/{data['id']}.yaml",
        )
    datasets = data["datasets"]
    if isinstance(datasets, str):
        datasets = [datasets]
    _expect(loc, ("datasets",), datasets, list, "datasets")

    columns = _parse_columns(loc, _expect(loc, ("columns",), data["columns"], list, "columns"))
    column_names = {c.name for c in columns}
    rows = _parse_rows(loc, _expect(loc, ("rows",), data["rows"], list, "rows"), column_names)

    tolerance = _parse_tolerance(loc, ("tolerance",), data.get("tolerance", {}), column_names)
    scales = _expect(loc, ("scales",), data.get("scales", {}), dict, "scales")
    for scale, settings in scales.items():
        if scale not in SCALES or scale == "paper":
            raise loc.error(("scales", scale), f"unknown scale {scale!r}; one of synthetic, smoke")
        _expect(loc, ("scales", scale), settings, dict, f"scales.{scale}")
        if "tolerance" in settings:
            _parse_tolerance(loc, ("scales", scale, "tolerance"), settings["tolerance"], column_names)
        _check_run_settings(loc, ("scales", scale), settings)

    claims = _parse_claims(loc, data.get("claims", []), {r.name for r in rows}, column_names)
    design = None
    if data.get("design") is not None:
        design = parse_design(loc, data["design"], {c.name: c.metric for c in columns}, SCALES)
    _check_datasets(loc, datasets)
    recipe = data.get("recipe")
    if recipe is not None:
        _expect(loc, ("recipe",), recipe, str, "recipe")
        _check_recipe(loc, recipe)
    notes = data.get("notes")
    if notes is not None:
        _expect(loc, ("notes",), notes, str, "notes")
    return Spec(
        id=data["id"],
        paper=data["paper"],
        table=data["table"],
        title=data["title"],
        datasets=tuple(str(d) for d in datasets),
        split=data["split"],
        columns=tuple(columns),
        rows=tuple(rows),
        path=path,
        recipe=recipe,
        tolerance=tolerance,
        scales=scales,
        claims=claims,
        notes=notes,
        design=design,
        lines=loc.lines,
    )


def _check_datasets(loc: Located, datasets: list) -> None:
    """Every dataset a spec names is a catalog name, so the commands printed for it work."""
    known = _catalog_names(os.environ.get("REPRO_CATALOG", ""))
    for i, name in enumerate(datasets):
        if name not in known:
            close = difflib.get_close_matches(str(name), sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise loc.error(
                ("datasets", i), f"unknown dataset {name!r}{hint}; `repro download --list` shows the catalog"
            )


@lru_cache(maxsize=4)
def _catalog_names(extra: str) -> frozenset[str]:
    """Dataset names of the catalog (the built-in one when the user's file is broken: `repro download` says why)."""
    from repro.data.catalog import BUILTIN_CATALOG, load_catalog

    try:
        return frozenset(load_catalog())
    except ReproError:
        return frozenset(load_catalog(BUILTIN_CATALOG))


def _check_recipe(loc: Located, recipe: str) -> None:
    from repro.families import available_recipes, recipe_path

    try:
        path = recipe_path(recipe)
    except ReproError as exc:
        raise loc.error(("recipe",), str(exc)) from None
    if not path.is_file():
        raise loc.error(
            ("recipe",), f"no recipe {recipe!r} (looked for {path}); known: {', '.join(available_recipes()) or 'none'}"
        )


def _parse_claims(loc: Located, raw: Any, row_names: set[str], column_names: set[str]) -> tuple[Claim, ...]:
    _expect(loc, ("claims",), raw, list, "claims")
    claims = []
    for i, item in enumerate(raw):
        where = ("claims", i)
        _expect(loc, where, item, dict, "a claim")
        unknown_keys(loc, where, item, _CLAIM_KEYS | _CLAIM_OPTIONAL, "claim")
        missing = sorted(_CLAIM_KEYS - set(item))
        if missing:
            raise loc.error(where, f"claim is missing {', '.join(missing)}")
        for key, known in (("row", row_names), ("over", row_names), ("column", column_names)):
            if not isinstance(item[key], str) or item[key] not in known:
                raise loc.error(
                    where + (key,), f"claim names unknown {'column' if key == 'column' else 'row'} {item[key]!r}"
                )
        if item["row"] == item["over"]:
            raise loc.error(where + ("over",), f"a claim of row {item['row']!r} over itself")
        margin = item.get("margin")
        if margin is not None:
            _expect(loc, where + ("margin",), margin, (int, float), "a claim's margin")
            if not math.isfinite(margin) or margin <= 0:
                raise loc.error(where + ("margin",), f"a claim's margin must be a positive number, got {margin!r}")
        control = item.get("control")
        if control is not None and identifier_problem(control):
            raise loc.error(where + ("control",), "a claim's control must be the id of the control's spec")
        claims.append(
            Claim(
                text=str(item["text"]),
                row=item["row"],
                over=item["over"],
                column=item["column"],
                margin=None if margin is None else float(margin),
                control=control,
            )
        )
    return tuple(claims)


def _parse_columns(loc: Located, raw: list) -> list[Column]:
    columns: list[Column] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = ("columns", i)
        _expect(loc, where, item, dict, "a column")
        unknown_keys(loc, where, item, _COLUMN_KEYS, "column")
        for key in ("name", "metric"):
            if key not in item:
                raise loc.error(where, f"column is missing {key!r}")
        name = str(item["name"])
        if name in seen:
            raise loc.error(where + ("name",), f"duplicate column {name!r}")
        seen.add(name)
        if not isinstance(item["metric"], str) or item["metric"] not in METRICS:
            raise loc.error(where + ("metric",), f"unknown metric {item['metric']!r}; one of {', '.join(METRICS)}")
        better = item.get("better", METRICS[item["metric"]].better)  # by default, the metric's
        if better not in DIRECTIONS:
            raise loc.error(where + ("better",), f"better must be one of {', '.join(DIRECTIONS)}, got {better!r}")
        columns.append(
            Column(
                name=name,
                metric=item["metric"],
                better=better,
                key=None if item.get("key") is None else str(item["key"]),
                split=item.get("split"),
                dataset=item.get("dataset"),
                unit=item.get("unit"),
            )
        )
    if not columns:
        raise loc.error(("columns",), "a spec needs at least one column")
    return columns


def _parse_rows(loc: Located, raw: list, column_names: set[str]) -> list[Row]:
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(raw):
        where = ("rows", i)
        _expect(loc, where, item, dict, "a row")
        unknown_keys(loc, where, item, _ROW_KEYS, "row")
        if "name" not in item:
            raise loc.error(where, "row is missing 'name'")
        name = str(item["name"])
        slug = row_slug(name)
        if slug in seen:
            raise loc.error(
                where + ("name",), f"row {name!r} clashes with row {seen[slug]!r} (same file name {slug!r})"
            )
        seen[slug] = name
        reported = _expect(loc, where + ("reported",), item.get("reported", {}), dict, "reported")
        for col, value in reported.items():
            if col not in column_names:
                raise loc.error(where + ("reported", col), f"row {name!r} reports unknown column {col!r}")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise loc.error(
                    where + ("reported", col),
                    f"row {name!r} column {col!r}: reported value must be a number or null, got {value!r}",
                )
        uncertain = _column_notes(loc, where, item, "uncertain", reported, "what the PDF shows")
        deviation = _column_notes(loc, where, item, "deviation", reported, "why")
        cited, model, compute = item.get("cited"), item.get("model"), item.get("compute")
        if cited is not None:
            _expect(loc, where + ("cited",), cited, str, "cited")
            if model is not None or compute is not None:
                raise loc.error(where + ("cited",), f"row {name!r} is cited and so cannot name a model or compute")
        elif model is None and compute is None:
            raise loc.error(where, f"row {name!r} needs one of: cited (from another paper), model, compute")
        config = None
        if model is not None:
            config = _model_config(loc, where + ("model",), model, name)
        if compute is not None:
            _expect(loc, where + ("compute",), compute, dict, "compute")
            if compute.get("task") not in COMPUTE_TASKS:
                raise loc.error(
                    where + ("compute",),
                    f"row {name!r}: compute needs a 'task', one of "
                    f"{', '.join(COMPUTE_TASKS)}; got {compute.get('task')!r}",
                )
            if "model" in compute:
                config = _model_config(loc, where + ("compute", "model"), compute["model"], name)
        rows.append(
            Row(
                name=name,
                reported={str(k): (None if v is None else float(v)) for k, v in reported.items()},
                cited=cited,
                model=model,
                compute=compute,
                uncertain={str(k): v for k, v in uncertain.items()},
                deviation={str(k): v for k, v in deviation.items()},
                note=item.get("note"),
                config=config,
            )
        )
    if not rows:
        raise loc.error(("rows",), "a spec needs at least one row")
    return rows


def _model_config(loc: Located, where: tuple, model: Any, row: str) -> Any:
    """A `model:` mapping checked against its family's typed config (repro.families)."""
    from pydantic import ValidationError

    from repro.families import config_class, known_archs

    _expect(loc, where, model, dict, "model")
    arch = model.get("arch")
    if arch not in known_archs():
        raise loc.error(
            where + (("arch",) if "arch" in model else ()),
            f"row {row!r}: model needs an 'arch', one of {', '.join(known_archs())}; got {arch!r}",
        )
    config = config_class(arch)
    try:
        return config.model_validate(model)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = tuple(error["loc"])
        key = path[0] if path else None
        if error["type"] == "extra_forbidden":
            message = f"unknown model key {key!r} for arch {arch!r}{did_you_mean(key, config.model_fields)}"
        else:
            field_name = ".".join(str(p) for p in path) or "model"
            message = f"model {field_name}: {error['msg']}"
        raise loc.error(where + ((key,) if key in model else ()), f"row {row!r}: {message}") from None


def _column_notes(loc: Located, where: tuple, item: dict, key: str, reported: dict, needs: str) -> dict:
    """A row's {column: note} mapping (`uncertain`, `deviation`): each column reported, each note non-empty."""
    name = item["name"]
    notes = _expect(loc, where + (key,), item.get(key, {}), dict, key)
    for col, note in notes.items():
        if col not in reported:
            raise loc.error(where + (key, col), f"row {name!r}: {key} column {col!r} has no reported value")
        if not isinstance(note, str) or not note.strip():
            raise loc.error(where + (key, col), f"row {name!r}: {key} {col!r} needs a note saying {needs}")
    return notes


MAX_SEED = 2**31 - 1  # seeds a run accepts (torch and numpy take 32-bit seeds)
MAX_TOLERANCE = 10_000  # in a column's own units: a wider one would pass any number


def _check_run_settings(loc: Located, where: tuple, settings: dict) -> None:
    """A scale's `seeds` (distinct integers in 0..MAX_SEED) and `jobs` (a positive integer)."""
    if "seeds" in settings:
        seeds = _expect(loc, where + ("seeds",), settings["seeds"], list, "seeds")
        if not seeds:
            raise loc.error(where + ("seeds",), "seeds names no seed")
        for i, seed in enumerate(seeds):
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
                raise loc.error(where + ("seeds", i), f"a seed is an integer in 0..{MAX_SEED}, got {seed!r}")
        twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
        if twice:
            raise loc.error(where + ("seeds",), f"seeds names {', '.join(map(str, twice))} more than once")
    if "jobs" in settings:
        jobs = settings["jobs"]
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise loc.error(where + ("jobs",), f"jobs is a positive integer, got {jobs!r}")


def _parse_tolerance(loc: Located, where: tuple, raw: Any, column_names: set[str]) -> dict[str, float]:
    _expect(loc, where, raw, dict, "tolerance")
    for col, value in raw.items():
        if col != "default" and col not in column_names:
            raise loc.error(where + (col,), f"tolerance for unknown column {col!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TOLERANCE:
            raise loc.error(
                where + (col,),
                f"tolerance must be a finite non-negative number up to {MAX_TOLERANCE:,} (column units), got {value}",
            )
    return {str(k): float(v) for k, v in raw.items()}


# --- the collection of specs ---------------------------------------------------------------------


def spec_files(root: Path | None = None) -> list[Path]:
    root = root or experiments_dir()
    return sorted(root.glob("*/*.yaml"))


@cache
def _load_all(root: Path) -> tuple[tuple[Spec, ...], tuple[tuple[Path, str], ...]]:
    specs, broken = [], []
    for path in spec_files(root):
        try:
            specs.append(parse_spec(path))
        except ReproError as exc:
            broken.append((path, str(exc)))
    seen: dict[str, Path] = {}
    for spec in list(specs):
        if spec.id in seen:
            broken.append((spec.path, f"{spec.path}:1: id {spec.id!r} is also used by {seen[spec.id]}"))
            specs.remove(spec)
        else:
            seen[spec.id] = spec.path
    return tuple(specs), tuple(broken)


def clear_cache() -> None:
    """Forget the specs read so far: the next `load_all`/`resolve` reads the files again (after a spec file
    or the experiments folder changed within one process, as in tests)."""
    _load_all.cache_clear()
    _one_spec.cache_clear()


@cache
def _one_spec(path: Path) -> Spec:
    return parse_spec(path)


def _by_its_file(ident: str, root: Path) -> Spec | None:
    """The spec of a plain id whose file is the only `<paper>/<ident>.yaml`, read alone (every spec's file is named
    by its id, so no other can claim it); None where the whole collection decides (an alias, another case, a path,
    an id two folders hold). A command on one spec parses one file."""
    if identifier_problem(ident) is not None:
        return None
    if _load_all.cache_info().currsize:  # the collection is read already
        return None
    files = list(root.glob(f"*/{ident}.yaml"))  # an id has no glob character
    return _one_spec(files[0]) if len(files) == 1 else None


def load_all(root: Path | None = None) -> tuple[Spec, ...]:
    """Every valid spec under `experiments/`, sorted by paper order then id (broken ones: `broken_specs`)."""
    from repro.families import papers

    specs, _ = _load_all(_root(root))
    return tuple(sorted(specs, key=lambda s: (papers().index(s.paper), _table_order(s), s.id)))


def broken_specs(root: Path | None = None) -> list[tuple[Path, str]]:
    """(file, `file:line: message`) of every spec that does not load; one never hides the others."""
    return list(_load_all(_root(root))[1])


def _root(root: Path | None) -> Path:
    root = (root or experiments_dir()).resolve()
    if not root.is_dir():
        raise ReproError(f"{root}: no such experiments folder (REPRO_EXPERIMENTS or the checkout's experiments/)")
    return root


def aliases(spec: Spec) -> list[str]:
    """The ids experiments had before one scheme (`<paper>-table<N>-<topic>`), from the family table's
    `old_prefix`: `table5-ablation` for `mcan-pa-table5-ablation` (prefix ""), `sam4c-table1-textvqa` for
    `sa-m4c-table1-textvqa`. Scripts and CI jobs name them; they keep resolving."""
    from repro.families import FAMILIES

    if not spec.id.startswith(spec.paper + "-"):
        return []
    rest = spec.id[len(spec.paper) + 1 :]
    prefix = next((f.old_prefix for f in FAMILIES if f.paper == spec.paper), None)
    if prefix is None:
        return []
    return [f"{prefix}-{rest}" if prefix else rest]


def _table_order(spec: Spec) -> tuple[int, str]:
    numerals = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9}
    last = spec.table.split()[-1]
    if last.isdigit():
        return int(last), ""
    return numerals.get(last, 99), spec.table


def resolve(ident: str, root: Path | None = None) -> Spec:
    """Find a spec by id (`table5-ablation`), `paper/id`, or case-insensitively; else list close ids."""
    alone = _by_its_file(ident, _root(root))
    if alone is not None:
        return alone
    specs = load_all(root)
    by_id = {s.id: s for s in specs}
    by_id.update({f"{s.paper}/{s.id}": s for s in specs})
    by_id.update({name: s for s in specs for alias in aliases(s) for name in (alias, f"{s.paper}/{alias}")})
    if ident in by_id:
        return by_id[ident]
    for path, message in broken_specs(root):
        if ident in (path.stem, f"{path.parent.name}/{path.stem}"):
            raise ReproError(message)
    lowered = {k.lower(): v for k, v in by_id.items()}
    if ident.lower() in lowered:
        return lowered[ident.lower()]
    close = difflib.get_close_matches(ident, [s.id for s in specs], n=5, cutoff=0.5)
    if not close:
        close = [s.id for s in specs if ident.lower() in s.id.lower()][:5]
    hint = f"; close matches: {', '.join(close)}" if close else "; `repro list` shows every id"
    raise ReproError(f"unknown experiment {ident!r}{hint}")
