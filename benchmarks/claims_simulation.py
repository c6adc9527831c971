"""Tables of claims simulated with a known truth, run through the verdict code (repro.report.claims): the error rate
a design promises, measured. Used by tests/test_design.py and `python -m benchmarks.bench_claims_fwer`.

A simulated table has `rows` rows, every pair of them a claim ("row j beats row i"), one column, normal seeds of a
common standard deviation. Under `effect=0` every "holds" or "reversed" is wrong; under `effect=delta` (each row
`delta` above the previous one) every "equivalent" is wrong, and so is every "reversed".
"""

from __future__ import annotations

import random
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from repro.report.claims import judge_table
from repro.results import Result
from repro.specs import Spec, parse_spec


def table_spec(
    rows: int = 4,
    seeds: int = 6,
    delta: float = 1.0,
    looks: list[int] | None = None,
    spending: str = "obrien-fleming",
    alpha: float = 0.05,
) -> Spec:
    """A spec of `rows` rows (the paper's values 5 points apart, so that every equivalence test can speak) and a
    claim for every pair, under a design of `seeds` seeds (and `looks`, if given)."""
    names = [f"R{i}" for i in range(rows)]
    row_text = "\n".join(
        f"  - name: {n}\n    model: {{arch: mcan}}\n    reported: {{Acc: {50 + 5 * i}}}" for i, n in enumerate(names)
    )
    claims = "\n".join(
        f"  - {{text: '{b} beats {a}', row: {b}, over: {a}, column: Acc}}"
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    )
    seed_list = ", ".join(str(s) for s in range(seeds))
    plan = f"\n  looks: {{synthetic: {{at: {looks}, spending: {spending}}}}}" if looks else ""
    text = f"""id: simulated
paper: mcan-pa
table: Table S
title: simulated claims
datasets: []
split: val
columns:
  - {{name: Acc, metric: accuracy, better: higher}}
rows:
{row_text}
claims:
{claims}
design:
  fixed: "2026-11-28"
  alpha: {alpha}
  test: welch
  delta: {{Acc: {{value: {delta}, source: reason, why: simulated}}}}
  seeds: {{synthetic: [{seed_list}]}}{plan}
"""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "simulated.yaml"
        path.write_text(text, encoding="utf-8")
        return parse_spec(path, in_tree=False)


def records(spec: Spec, values: dict[str, list[float]]) -> dict[str, Result]:
    """Row records of the given per-seed values, made under the spec's design."""
    digest = spec.design_hash("synthetic")
    out = {}
    for name, seeds in values.items():
        out[name] = Result(
            spec=spec.id,
            paper=spec.paper,
            row=name,
            scale="synthetic",
            split="val",
            metrics={"Acc": statistics.fmean(seeds)},
            std={"Acc": statistics.stdev(seeds)} if len(seeds) > 1 else {},
            seeds=list(range(len(seeds))),
            extra={"per_seed": [{"Acc": v} for v in seeds]},
            design_hashes=[digest] * len(seeds),
        )
    return out


@dataclass
class ErrorRate:
    tables: int
    wrong: int  # tables with at least one wrong verdict

    @property
    def rate(self) -> float:
        return self.wrong / self.tables

    @property
    def standard_error(self) -> float:
        p = self.rate
        return (p * (1 - p) / self.tables) ** 0.5


def family_wise_error(
    spec: Spec, tables: int, effect: float = 0.0, sd: float = 2.0, seed: int = 0, seeds_run: int | None = None
) -> ErrorRate:
    """Simulate `tables` tables under the truth "row i's mean is 60 + i * effect" and count the tables with a wrong
    verdict: holds or reversed when effect is 0; reversed or equivalent when effect >= δ."""
    rng = random.Random(seed)
    n = seeds_run if seeds_run is not None else len(spec.design.seeds["synthetic"])
    wrong = 0
    for _ in range(tables):
        values = {row.name: [rng.gauss(60 + i * effect, sd) for _ in range(n)] for i, row in enumerate(spec.rows)}
        verdicts = [v.kind for v in judge_table(spec, records(spec, values), "synthetic").claims]
        bad = ("holds", "reversed") if effect == 0 else ("reversed", "equivalent")
        wrong += any(kind in bad for kind in verdicts)
    return ErrorRate(tables, wrong)
