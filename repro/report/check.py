"""Regression check for CI: every stored result of a spec against the paper or its own reference."""

from __future__ import annotations

import json
import math
import re
import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.errors import ReproError
from repro.names import inside
from repro.paths import read_here, results_read_dir, results_read_roots
from repro.results import (
    CorruptResult,
    Result,
    SeedResult,
    _split_stem,
    read_results,
    result_path,
    seed_path,
)
from repro.specs import SCALES, Spec


@dataclass
class Check:
    spec: str
    row: str
    scale: str
    column: str
    expected: float
    actual: float
    tolerance: float
    against: str  # "reported" or "reference"

    @property
    def ok(self) -> bool:
        return abs(self.actual - self.expected) <= self.tolerance + 1e-9


def check_spec(spec: Spec, results_root: Path | None = None) -> list[Check]:
    """Compare every stored result of a spec with what it claims: the paper's number at paper scale,
    the record's own reference at other scales."""
    checks = []
    for (row_name, scale), result in sorted(read_results(spec, root=results_root).items()):
        row = spec.row(row_name)
        for col in spec.columns:
            against = "reported" if scale == "paper" and col.name not in row.deviation else "reference"
            expected = (row.reported if against == "reported" else (result.reference or {})).get(col.name)
            actual = result.metrics.get(col.name)
            if expected is None or actual is None:
                continue
            checks.append(
                Check(
                    spec.id,
                    row_name,
                    scale,
                    col.name,
                    float(expected),
                    float(actual),
                    spec.tolerance_for(col.name, scale),
                    against,
                )
            )
    return checks


# --- the records a table and its claims are computed from ------------------------------------------

# A stored metric beyond this magnitude is no measurement (1e308 squares to inf in a std): a corrupt record.
PLAUSIBLE = 1e12
_SEED_NAME = re.compile(r"^(?P<stem>.+)\.seed(?P<seed>[0-9]+)\.json$")


@dataclass
class RecordProblem:
    """A record a table or claim is computed from that does not hold together: a failure of `repro check`."""

    spec: str
    path: str
    message: str


@dataclass
class RecordCheck:
    problems: list[RecordProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what holds but cannot be verified, or is mixed (config hashes)
    rows: int = 0  # row records verified
    seeds: int = 0  # seed records verified against their row record


def check_records(spec: Spec, results_root: Path | None = None) -> RecordCheck:
    """Everything a table or claim of `spec` is computed from, verified against its seed records.

    Each file under `seeds/` must be a readable seed record named `<row>[.<scale>].seed<N>.json` whose
    spec, row, scale and seed are the ones its name says, with finite metrics. Each row record's
    `extra.per_seed` must hold exactly the metrics of its seed records (seeds kept only in the row record
    by an older version are noted), its `metrics` their mean and its `std` their sample standard
    deviation (ddof 1), with finite values; every seed record of a (row, scale) must be in its row record,
    and its config hash among the row record's (rows whose seeds ran under several configs are noted,
    with the seeds of each, as the table's footnote says). Without `results_root`, each scale's records where
    they live (`repro.paths.results_read_roots`: the results folder, the scratch folder of smoke runs).
    """
    out = RecordCheck()
    for root, scratch in [(results_root, None)] if results_root else results_read_roots():
        _check_root(spec, root, scratch, out)
    return out


def _check_root(spec: Spec, root: Path, scratch: bool | None, out: RecordCheck) -> None:
    """`check_records` in one folder, of the scales read there (`repro.paths.read_here`), into `out`."""
    folder = inside(root, spec.paper, spec.id)
    if not folder.is_dir():
        return

    def fail(path: Path, message: str) -> None:
        out.problems.append(RecordProblem(spec.id, str(path), message))

    slugs = {r.slug: r.name for r in spec.rows}
    seeds_dir = folder / "seeds"
    by_unit: dict[tuple[str, str], dict[int, tuple[Path, SeedResult]]] = {}
    if seeds_dir.is_symlink() or (seeds_dir.exists() and not seeds_dir.is_dir()):
        fail(seeds_dir, "not a folder of seed records")
    elif seeds_dir.is_dir():
        for path in sorted(seeds_dir.iterdir()):
            found = _seed_record(spec, path, slugs, root, fail)
            if found is not None and read_here(found.scale, scratch):
                by_unit.setdefault((found.row, found.scale), {})[found.seed] = (path, found)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptResult)  # `repro check` reports unreadable row records itself
        results = {k: r for k, r in read_results(spec, root=root).items() if read_here(k[1], scratch)}
    now: dict[str, dict[str, str]] = {}  # per scale: the configuration hash of each row's units now
    for (row, scale), result in sorted(results.items()):
        path = result_path(spec, row, scale, root)
        out.rows += 1
        files = by_unit.pop((row, scale), {})
        records = {s: rec for s, (_, rec) in files.items() if s in result.seeds}
        for kind in ("metrics", "std", "reference"):
            bad = _implausible(getattr(result, kind) or {})
            if bad:
                fail(path, f"{kind}.{bad[0]} is {bad[1]!r}: not a finite measurement")
        per_seed = result.extra.get("per_seed") if isinstance(result.extra, dict) else None
        if per_seed is None:
            if len(result.seeds) > 1 or files:
                fail(path, f"seeds {result.seeds} but no extra.per_seed: the claims have nothing to test")
            continue
        if not isinstance(per_seed, list) or not all(isinstance(m, dict) for m in per_seed):
            fail(path, "extra.per_seed is not a list of metrics")
            continue
        if len(per_seed) != len(result.seeds) or len(set(result.seeds)) != len(result.seeds):
            fail(path, f"extra.per_seed has {len(per_seed)} entries for seeds {result.seeds}")
            continue
        for seed, metrics in zip(result.seeds, per_seed):
            bad = _implausible(metrics)
            if bad:
                fail(path, f"extra.per_seed of seed {seed}: {bad[0]} is {bad[1]!r}: not a finite measurement")
        _check_aggregate(result, per_seed, path, fail)
        legacy = []
        for seed, metrics in zip(result.seeds, per_seed):
            if seed not in files:
                legacy.append(seed)
                continue
            seed_file, record = files.pop(seed)
            out.seeds += 1
            if not _same_metrics(metrics, record.metrics):
                fail(path, f"extra.per_seed of seed {seed} differs from its seed record {seed_file.name}")
        for seed, (seed_file, _) in sorted(files.items()):
            fail(seed_file, f"seed {seed} is not in its row record {path.name} (seeds {result.seeds})")
        if legacy:
            out.notes.append(
                f"{spec.id} / {row} ({scale}): seeds {_seed_list(legacy)} kept only in the row record "
                f"(written before seed records existed): checked against its mean, not a seed record"
            )
        hashes = [h for h in result.config_hash.split(",") if h]
        by_hash = config_seeds(result, records)
        stray = sorted(set(by_hash) - set(hashes) - {""})
        if stray:
            fail(path, f"seed records ran under config {', '.join(stray)}, which the row record does not name")
        if len(set(hashes)) > 1:
            out.notes.append(f"{spec.id} / {row} ({scale}): seeds ran under several configs: {config_words(by_hash)}")
        other = other_settings(spec, result, now)
        if other:
            out.notes.append(
                f"{spec.id} / {row} ({scale}): made under other settings than the spec's now (config {other[0]}; "
                f"now {other[1]}): shown as made; `repro run {spec.id} --scale {scale} --rows '{row}' --force` makes "
                "it again"
            )
        _check_design(spec, row, scale, result, records, path, fail, out)
    for (row, scale), files in sorted(by_unit.items()):
        for seed_file, _ in sorted(files.values()):
            fail(seed_file, f"seed record of {row!r} at scale {scale!r} with no row record: no table shows it")


def _check_design(
    spec: Spec, row: str, scale: str, result: Result, records: dict[int, SeedResult], path: Path, fail, out: RecordCheck
) -> None:
    """Each seed's design hash against the spec's design now: a seed made under another design (δ, α, the seeds, the
    test or a claim changed after the runs) is void, and a failure; a seed from before any design is noted."""
    expected = spec.design_hash(scale)
    if result.design_hashes and len(result.design_hashes) != len(result.seeds):
        fail(path, f"design_hashes has {len(result.design_hashes)} entries for seeds {result.seeds}")
        return
    made = {s: (records[s].design_hash if s in records else result.design_hash_of(s)) for s in result.seeds}
    for seed in result.seeds:
        if seed in records and result.design_hashes and records[seed].design_hash != result.design_hash_of(seed):
            fail(path, f"design hash of seed {seed} differs from its seed record's ({records[seed].design_hash!r})")
    void = sorted(s for s, h in made.items() if h and h != expected)
    if void:
        now = f"the spec's design is now {expected}" if expected else "the spec has no design for this scale now"
        fail(
            path,
            f"seeds {_seed_list(void)} ran under design {', '.join(sorted({made[s] for s in void}))}; {now}: a design "
            "changed after its runs voids them (run them again under the design, or restore it)",
        )
    before = sorted(s for s, h in made.items() if not h)
    if before and expected and spec.claims:
        out.notes.append(
            f"{spec.id} / {row} ({scale}): seeds {_seed_list(before)} are pre-design (run before design "
            f"{expected} was fixed): shown, never judged"
        )


def config_seeds(result: Result, records: dict[int, SeedResult]) -> dict[str, list[int]]:
    """{config hash: [seeds]} of a row record: its seed records' hashes, and for the seeds kept only in
    the row record, the hash(es) of the row record that no seed record has ("?" when that is not one)."""
    by_hash: dict[str, list[int]] = {}
    for seed, record in sorted(records.items()):
        by_hash.setdefault(record.config_hash, []).append(seed)
    rest = [s for s in result.seeds if s not in records]
    if rest:
        others = sorted({h for h in result.config_hash.split(",") if h} - set(by_hash))
        by_hash.setdefault(others[0] if len(others) == 1 else "?", []).extend(rest)
    return by_hash


def config_words(by_hash: dict[str, list[int]]) -> str:
    return "; ".join(f"config {h} for seeds {_seed_list(sorted(s))}" for h, s in by_hash.items())


def _seed_list(seeds: list[int]) -> str:
    return ", ".join(str(s) for s in seeds)


def read_seed_files(spec: Spec, row: str, scale: str, root: Path | None = None) -> dict[int, SeedResult]:
    """The readable seed records of one (row, scale), from their files only (where tables read them)."""
    root = root or results_read_dir(scale)
    out = {}
    for seed_file in sorted(seed_path(spec, row, scale, 0, root).parent.glob("*.json")):
        match = _SEED_NAME.match(seed_file.name)
        if match is None or seed_file.name != seed_path(spec, row, scale, int(match["seed"]), root).name:
            continue
        try:
            record = SeedResult.from_json(json.loads(seed_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, RecursionError):
            continue
        out[record.seed] = record
    return out


def _seed_record(spec: Spec, path: Path, slugs: dict[str, str], root: Path, fail) -> SeedResult | None:
    match = _SEED_NAME.match(path.name)
    if path.is_symlink():
        try:
            path.resolve(strict=True).relative_to(root.resolve())
        except (OSError, ValueError, RuntimeError):
            fail(path, "a link that leads out of the results folder (or nowhere): not a seed record")
            return None
    if not path.is_file():
        fail(path, "not a file: nothing but seed records belongs under seeds/")
        return None
    if match is None:
        fail(path, "not named <row>[.<scale>].seed<N>.json: a stray file under seeds/")
        return None
    slug, scale = _split_stem(match["stem"], slugs)
    if slug not in slugs or scale not in SCALES:
        fail(path, f"names no row and scale of {spec.id} (row {slug!r}, scale {scale!r})")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
        record = SeedResult.from_json(data)
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        fail(path, f"unreadable seed record ({exc})")
        return None
    for kind in ("metrics", "reference"):
        bad = _implausible(getattr(record, kind) or {})
        if bad:
            fail(path, f"{kind}.{bad[0]} is {bad[1]!r}: not a finite measurement")
            return None
    said = {"spec": spec.id, "row": slugs[slug], "scale": scale, "seed": int(match["seed"])}
    wrong = [f"{k} {getattr(record, k)!r} (its name says {v!r})" for k, v in said.items() if getattr(record, k) != v]
    if wrong:
        fail(path, "the record says " + ", ".join(wrong))
        return None
    return record


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _implausible(values: Any) -> tuple[str, Any] | None:
    if not isinstance(values, dict):
        return ("", values)
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return (name, value)
        if not math.isfinite(value) or abs(value) > PLAUSIBLE:
            return (name, value)
    return None


def _same_metrics(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(math.isclose(a[k], b[k], rel_tol=1e-12, abs_tol=1e-12) for k in a)


def _check_aggregate(result: Result, per_seed: list[dict], path: Path, fail) -> None:
    """The row's mean and its std with ddof 1 (the sample standard deviation) from its per-seed values."""
    for column, mean in result.metrics.items():
        values = [m.get(column) for m in per_seed]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
            fail(path, f"{column}: a seed without a value in extra.per_seed")
            continue
        if not math.isclose(statistics.fmean(values), mean, rel_tol=1e-9, abs_tol=1e-9):
            fail(path, f"metrics.{column} = {mean!r} is not the mean of its seeds ({statistics.fmean(values)!r})")
        if len(values) > 1:
            std = (result.std or {}).get(column)
            expected = statistics.stdev(values)
            if std is None or not math.isclose(std, expected, rel_tol=1e-9, abs_tol=1e-9):
                fail(path, f"std.{column} = {std!r} is not the sample std (ddof 1) of its seeds ({expected!r})")


def other_settings(spec: Spec, result: Result, now: dict[str, dict[str, str]] | None = None) -> tuple[str, str] | None:
    """(the record's configuration hashes, the one `repro run` gives the row now) when none of a row record's hashes
    is today's: the spec's settings for the scale (or the row's model, or its recipe) changed after the record was
    made. `now` caches today's hashes per scale between calls."""
    from repro.run import config_hashes_now

    made = {h for h in result.config_hash.split(",") if h}
    if not made or spec.overrides:  # a record from before hashes were kept; a variant's own configuration
        return None
    now = {} if now is None else now
    if result.scale not in now:
        try:
            now[result.scale] = config_hashes_now(spec, result.scale)
        except ReproError:  # no settings for the scale now: `repro check` reports the spec itself
            now[result.scale] = {}
    expected = now[result.scale].get(result.row)
    if expected is None or expected in made:
        return None
    return ", ".join(sorted(made)), expected


def config_note(spec: Spec, result: Result, results_root: Path | None = None) -> str | None:
    """ "ROW: config A for seeds 0, 1; config B for seeds 2" when a row's seeds ran under several configs."""
    if len({h for h in result.config_hash.split(",") if h}) < 2:
        return None
    records = {
        s: r for s, r in read_seed_files(spec, result.row, result.scale, results_root).items() if s in result.seeds
    }
    return f"{result.row}: {config_words(config_seeds(result, records))}"
