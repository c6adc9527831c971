"""Seeds in two modes: a row whose seeds split into two groups far apart, the sign of training that sometimes finds
the mechanism and sometimes does not (under-trained or unstable), which no number of seeds averages away.

The rule: across a row's seeds (four or more), the widest gap between neighbouring sorted values of a score column
is wider than 3 × the row's median absolute deviation plus 3 points. "Points" are those of the column: one point of
a percentage column, and for a column in other units (a fraction such as ANLS, an error such as MSE) the design's δ
of the column; a column with neither (counts, times, FLOPs, parameters) is not judged.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from repro.specs import Column, Spec

NOT_SCORES = {"count", "copy-rate", "time", "flops", "params"}  # sizes and costs of a row, not its answers
MIN_SEEDS = 4
MAD_TIMES = 3.0
POINTS = 3.0


@dataclass(frozen=True)
class TwoModes:
    """One row column whose seeds sit in two modes: the values sorted, the widest gap and where it falls."""

    row: str
    column: str
    values: tuple[float, ...]
    gap: float
    limit: float

    @property
    def split(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The two groups either side of the widest gap."""
        i = max(range(1, len(self.values)), key=lambda k: self.values[k] - self.values[k - 1])
        return self.values[:i], self.values[i:]


def point_of(spec: Spec, column: Column) -> float | None:
    """One point of a score column in its own units: 1 for a percentage, else the design's δ of the column; None
    for a column with neither."""
    if column.metric in NOT_SCORES:
        return None
    if column.unit == "%":
        return 1.0
    given = spec.design.delta.get(column.name) if spec.design is not None else None
    return None if given is None else given.value


def widest_gap(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return max((b - a for a, b in zip(ordered, ordered[1:])), default=0.0)


def limit_of(values: Sequence[float], point: float) -> float:
    """3 × the median absolute deviation of the values plus 3 points."""
    middle = statistics.median(values)
    mad = statistics.median(abs(v - middle) for v in values)
    return MAD_TIMES * mad + POINTS * point


def two_modes(values: Sequence[float], point: float) -> bool:
    """Whether seeds' values sit in two modes (four or more seeds; fewer are never judged)."""
    return len(values) >= MIN_SEEDS and widest_gap(values) > limit_of(values, point)


def rows_in_two_modes(spec: Spec, scale: str, root: Path | None = None) -> list[TwoModes]:
    """Every (row, score column) of a spec's stored seeds at a scale whose seeds sit in two modes."""
    from repro.results import read_seed_results

    found = []
    for row in spec.rows:
        if not row.runnable:
            continue
        seeds = read_seed_results(spec, row, scale, root)
        for column in spec.columns:
            point = point_of(spec, column)
            values = [s.metrics.get(column.name) for s in seeds.values()]
            values = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if point is not None and two_modes(values, point):
                found.append(
                    TwoModes(row.name, column.name, tuple(sorted(values)), widest_gap(values), limit_of(values, point))
                )
    return found
