"""A spec's statistical design: what its claims are judged with, fixed in the spec before the runs.

The `design:` block of a spec with claims names the level α (the family-wise error of the whole table), the test,
δ per claim column with where it comes from, the seeds per scale the verdicts use, optionally the looks of a
group-sequential plan with its alpha-spending function, the training's stopping rule per scale, and the date the
design was fixed. Every seed record carries the hash of its scale's design (`design_hash`): a record made under
another design (δ, α, the seeds or the test changed after the runs) is void, and `repro check` says so; a record
made before any design is "pre-design" and judges nothing.

```yaml
design:
  fixed: "2026-11-28"           # the day this design was committed, before the runs it judges
  alpha: 0.05                   # P(any wrong verdict in the table) <= alpha: one Holm family
  test: welch                   # Welch's t-test, two-sided, floored at the exact permutation test's smallest p
  delta:                        # per claim column: the equivalence margin and where it comes from
    All: {value: 1.0, source: reason, why: "one accuracy point: the smallest difference the paper discusses"}
  seeds: {synthetic: [0, 1, 2, 3, 4, 5]}
  looks: {synthetic: {at: [3, 6], spending: obrien-fleming}}   # optional
  stopping: {synthetic: "16 epochs; the last quarter moves val accuracy < 0.5 points (pilot)"}
```

This module only parses and hashes; it names no family and imports nothing of the toolkit above `errors`/`utils`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

TESTS = ("welch",)
DELTA_SOURCES = {
    "paper": "the paper's own margin",
    "resolution": "the metric's resolution",
    "reason": "a stated reason",
}
SPENDING = ("obrien-fleming", "pocock")
KEYS = {"fixed", "alpha", "test", "delta", "seeds", "looks", "stopping", "note"}
MAX_SEEDS = 1000


@dataclass(frozen=True)
class Delta:
    value: float
    source: str  # one of DELTA_SOURCES
    why: str = ""

    @property
    def words(self) -> str:
        text = DELTA_SOURCES[self.source]
        return f"{text}: {self.why}" if self.why else text


@dataclass(frozen=True)
class Looks:
    """A group-sequential plan: verdicts may be read when the first `at[j]` design seeds of both rows are in; look j
    spends alpha(t_j) - alpha(t_{j-1}) of alpha, t_j = at[j] / at[-1] (Lan-DeMets spending functions)."""

    at: tuple[int, ...]
    spending: str = "obrien-fleming"

    def levels(self, alpha: float) -> tuple[float, ...]:
        """The level each look tests at; they add up to alpha (a union bound over the looks: conservative)."""
        spent, out = 0.0, []
        for n in self.at:
            total = spending(self.spending, alpha, n / self.at[-1])
            out.append(max(total - spent, 0.0))
            spent = total
        return tuple(out)


def spending(kind: str, alpha: float, t: float) -> float:
    """Cumulative alpha spent at information fraction t (0 < t <= 1): Lan-DeMets' O'Brien-Fleming-like
    2 - 2 Phi(z_{1-alpha/2} / sqrt(t)), or Pocock-like alpha ln(1 + (e - 1) t)."""
    from statistics import NormalDist

    if t >= 1.0:
        return alpha
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return 2 - 2 * NormalDist().cdf(z / math.sqrt(t))


@dataclass(frozen=True)
class Design:
    fixed: str
    alpha: float
    test: str
    delta: dict[str, Delta]
    seeds: dict[str, tuple[int, ...]]  # scale -> the seeds a verdict uses, in order (looks take a prefix)
    looks: dict[str, Looks] = field(default_factory=dict)
    stopping: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def looks_for(self, scale: str) -> Looks | None:
        """The scale's looks; without a sequential plan, one look at all of its seeds."""
        seeds = self.seeds.get(scale)
        if not seeds:
            return None
        return self.looks.get(scale) or Looks((len(seeds),))

    def canonical(self, scale: str, claims: list[dict[str, Any]]) -> dict[str, Any]:
        """What a scale's verdicts depend on: everything but the other scales' seeds, looks and stopping rules."""
        looks = self.looks.get(scale)
        return {
            "alpha": self.alpha,
            "test": self.test,
            "delta": {k: [d.value, d.source] for k, d in sorted(self.delta.items())},
            "seeds": list(self.seeds.get(scale, ())),
            "looks": None if looks is None else [list(looks.at), looks.spending],
            "stopping": self.stopping.get(scale),
            "claims": claims,
        }


def design_hash(design: Design | None, scale: str, claims: list[dict[str, Any]]) -> str:
    """12 hex digits of the canonical design of one scale ("" when the spec has no design for it). `claims`: what
    each claim compares (row, over, column, control), so that re-aiming a claim after the runs voids them too."""
    if design is None or not design.seeds.get(scale):
        return ""
    text = json.dumps(design.canonical(scale, claims), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def parse_design(loc, raw: Any, columns: dict[str, str], scales: tuple[str, ...]) -> Design:
    """The `design:` block, validated with file:line errors (`loc`: repro.utils.Located). `columns`: name -> metric
    of the spec's columns; `scales`: the scales a design may name."""
    where = ("design",)
    if not isinstance(raw, dict):
        raise loc.error(where, "design must be a mapping")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise loc.error(where + (unknown[0],), f"unknown design key {unknown[0]!r}; one of {', '.join(sorted(KEYS))}")
    for key in ("fixed", "alpha", "test", "delta", "seeds"):
        if key not in raw:
            raise loc.error(where, f"design is missing {key!r}")
    fixed = raw["fixed"]
    if isinstance(fixed, (datetime.date, datetime.datetime)):
        fixed = fixed.isoformat()[:10]
    if not isinstance(fixed, str):
        raise loc.error(where + ("fixed",), "design.fixed must be a date (YYYY-MM-DD)")
    try:
        datetime.date.fromisoformat(fixed)
    except ValueError:
        raise loc.error(where + ("fixed",), f"design.fixed must be a date (YYYY-MM-DD), got {fixed[:40]!r}") from None
    alpha = _number(loc, where + ("alpha",), raw["alpha"], "design.alpha")
    if not 0 < alpha < 0.5:
        raise loc.error(where + ("alpha",), f"design.alpha must be between 0 and 0.5, got {alpha:g}")
    test = raw["test"]
    if test not in TESTS:
        raise loc.error(where + ("test",), f"design.test must be one of {', '.join(TESTS)}, got {str(test)[:40]!r}")
    delta = _parse_delta(loc, raw["delta"], columns)
    seeds = _parse_per_scale(loc, "seeds", raw["seeds"], scales, _parse_seeds)
    looks = _parse_per_scale(loc, "looks", raw.get("looks", {}), scales, _parse_looks)
    for scale, plan in looks.items():
        if scale not in seeds:
            raise loc.error(where + ("looks", scale), f"design.looks.{scale}: no design.seeds.{scale} to look at")
        if plan.at[-1] != len(seeds[scale]):
            raise loc.error(
                where + ("looks", scale, "at"),
                f"design.looks.{scale}: the last look must be at all {len(seeds[scale])} seeds, got {plan.at[-1]}",
            )
    stopping = _parse_per_scale(loc, "stopping", raw.get("stopping", {}), scales, _parse_text)
    note = raw.get("note", "")
    if not isinstance(note, str):
        raise loc.error(where + ("note",), "design.note must be text")
    return Design(fixed, alpha, test, delta, seeds, looks, stopping, note)


def _number(loc, where: tuple, value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise loc.error(where, f"{what} must be a finite number, got {str(value)[:40]!r}")
    return float(value)


def _parse_delta(loc, raw: Any, columns: dict[str, str]) -> dict[str, Delta]:
    where = ("design", "delta")
    if not isinstance(raw, dict):
        raise loc.error(where, "design.delta must map claim columns to {value, source, why}")
    out = {}
    for name, item in raw.items():
        at = where + (name,)
        if name not in columns:
            raise loc.error(at, f"design.delta names unknown column {str(name)[:40]!r}; one of {', '.join(columns)}")
        if not isinstance(item, dict) or set(item) - {"value", "source", "why"} or not {"value", "source"} <= set(item):
            raise loc.error(at, f"design.delta.{name} must be {{value, source, why}}")
        value = _number(loc, at + ("value",), item["value"], f"design.delta.{name}.value")
        if value <= 0:
            raise loc.error(at + ("value",), f"design.delta.{name}.value must be positive, got {value:g}")
        source = item["source"]
        if source not in DELTA_SOURCES:
            raise loc.error(at + ("source",), f"design.delta.{name}.source must be one of {', '.join(DELTA_SOURCES)}")
        why = item.get("why", "")
        if not isinstance(why, str) or (source == "reason" and not why.strip()):
            raise loc.error(at + ("why",), f"design.delta.{name}: source 'reason' needs the reason in 'why'")
        out[str(name)] = Delta(value, source, why.strip())
    return out


def _parse_per_scale(loc, key: str, raw: Any, scales: tuple[str, ...], parse) -> dict:
    where = ("design", key)
    if not isinstance(raw, dict):
        raise loc.error(where, f"design.{key} must map scales ({', '.join(scales)}) to values")
    out = {}
    for scale, value in raw.items():
        if scale not in scales:
            raise loc.error(
                where + (scale,), f"design.{key}: unknown scale {str(scale)[:40]!r}; one of {', '.join(scales)}"
            )
        out[scale] = parse(loc, where + (scale,), value, f"design.{key}.{scale}")
    return out


def _parse_seeds(loc, where: tuple, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise loc.error(where, f"{what} must be a list of seeds")
    if any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**31 for s in value):
        raise loc.error(where, f"{what}: seeds are integers from 0 to 2^31 - 1")
    if len(set(value)) != len(value) or len(value) > MAX_SEEDS:
        raise loc.error(where, f"{what}: each seed once, at most {MAX_SEEDS}")
    return tuple(value)


def _parse_looks(loc, where: tuple, value: Any, what: str) -> Looks:
    if not isinstance(value, dict) or set(value) - {"at", "spending"} or "at" not in value:
        raise loc.error(where, f"{what} must be {{at: [seed counts], spending: {' | '.join(SPENDING)}}}")
    at = value["at"]
    if (
        not isinstance(at, list)
        or not at
        or any(isinstance(n, bool) or not isinstance(n, int) or n < 2 for n in at)
        or list(at) != sorted(set(at))
    ):
        raise loc.error(where + ("at",), f"{what}.at must be increasing seed counts of at least 2")
    kind = value.get("spending", "obrien-fleming")
    if kind not in SPENDING:
        raise loc.error(where + ("spending",), f"{what}.spending must be one of {', '.join(SPENDING)}")
    return Looks(tuple(at), kind)


def _parse_text(loc, where: tuple, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise loc.error(where, f"{what} must be text")
    return value.strip()
