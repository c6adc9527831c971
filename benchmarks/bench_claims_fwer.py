"""The family-wise error of a table's verdicts, measured: simulated tables with a known truth through the verdict
code (benchmarks.claims_simulation). A design promises P(any wrong verdict in a table) <= alpha.

    python -m benchmarks.bench_claims_fwer [--tables 2000]

Prints, per scenario, the share of tables with a wrong verdict and its Monte-Carlo standard error: no effect
(wrong: holds, reversed), every effect at δ (wrong: reversed, equivalent), and a sequential design whose looks a
researcher uses to stop early (wrong: holds, reversed).
"""

from __future__ import annotations

import argparse
import time

from benchmarks.claims_simulation import family_wise_error, table_spec


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=2000)
    args = parser.parse_args(argv)
    scenarios = [
        ("no effect, 4 rows (6 claims), 6 seeds", table_spec(4, 6), 0.0),
        ("every effect at δ = 1, 4 rows, 6 seeds, sd 0.5", table_spec(4, 6), 1.0),
        (
            "no effect, sequential looks at 5 and 10 seeds (Pocock)",
            table_spec(3, 10, looks=[5, 10], spending="pocock"),
            0.0,
        ),
    ]
    print(f"tables per scenario: {args.tables}; alpha 0.05")
    for name, spec, effect in scenarios:
        started = time.perf_counter()
        sd = 0.5 if effect else 2.0
        rate = family_wise_error(spec, args.tables, effect=effect, sd=sd, seed=1)
        print(
            f"{name}: wrong verdict in {rate.rate:.4f} of tables (± {rate.standard_error:.4f} Monte-Carlo s.e.), "
            f"{time.perf_counter() - started:.0f} s"
        )


if __name__ == "__main__":
    main()
