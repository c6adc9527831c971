"""Regression check for CI: every stored result of a spec against the paper or its own reference."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repro.results import read_results
from repro.specs import Spec


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
