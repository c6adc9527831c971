"""Benchmark: how fast the commands a user types first answer, against `python -c pass` measured in the same run.

    python -m benchmarks.bench_commands            # 5 repetitions of each
    python -m benchmarks.bench_commands --reps 9

Each command runs as a fresh process, as a user starts it (`python -m repro.cli ...`, bytecode written once by a
warm-up run, the parsed specs kept as a first command keeps them): `repro --help`, `repro show`, `repro list`,
`repro table mcan-pa-table5-ablation --scale synthetic` (the committed records) and `repro eval --metric vqa` on a
generated 40,000-question VQA set, beside the official-style scorer of `bench_vqa_eval` (its per-question loop) run
on the same files as a process of its own. For each: the median wall time and CPU time (user + sys of the process,
which a loaded machine inflates less than wall time), and their ratios to `python -c pass`; the 1-minute load
average before and after. It asserts nothing about time (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from repro.paths import REPO_DIR

QUESTIONS = 40_000

OFFICIAL = """
import json, sys
from benchmarks.bench_vqa_eval import baseline
annotations = json.load(open(sys.argv[1]))
results = json.load(open(sys.argv[2]))
scores = baseline(annotations, results)
print(100 * sum(scores.values()) / len(scores))
"""


def commands(folder: Path) -> dict[str, list[str]]:
    py = [sys.executable]
    ann, res = str(folder / "annotations.json"), str(folder / "predictions.json")
    return {
        "python -c pass": [*py, "-c", "pass"],
        "repro --help": [*py, "-m", "repro.cli", "--help"],
        "repro show mcan-pa-table5-ablation": [*py, "-m", "repro.cli", "show", "mcan-pa-table5-ablation"],
        "repro list": [*py, "-m", "repro.cli", "list"],
        "repro table mcan-pa-table5-ablation --scale synthetic": [
            *py,
            "-m",
            "repro.cli",
            "table",
            "mcan-pa-table5-ablation",
            "--scale",
            "synthetic",
        ],
        f"repro eval --metric vqa ({QUESTIONS:,} questions)": [
            *py,
            "-m",
            "repro.cli",
            "eval",
            "--metric",
            "vqa",
            "--annotations",
            ann,
            "--predictions",
            res,
            "--json",
        ],
        f"official-style scorer ({QUESTIONS:,} questions)": [*py, "-c", OFFICIAL, ann, res],
    }


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + sys) of one run of `argv` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv[:6])}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="runs of each command (medians are reported)")
    args = parser.parse_args(argv)
    from benchmarks.bench_vqa_eval import generate

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        annotations, results = generate(QUESTIONS)
        (folder / "annotations.json").write_text(json.dumps(annotations))
        (folder / "predictions.json").write_text(json.dumps(results))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as an installed package runs
        env.update(PYTHONPATH=str(REPO_DIR), COLUMNS="80", REPRO_CACHE=str(folder / "cache"))
        runs = commands(folder)
        for argv_ in runs.values():  # the warm-up: bytecode written, specs parsed and kept
            timed(argv_, env)
        load_before = os.getloadavg()[0]
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for _ in range(args.reps):  # interleaved, so a change of load touches every command alike
            for name, argv_ in runs.items():
                measured[name].append(timed(argv_, env))
        load_after = os.getloadavg()[0]
    wall = {name: statistics.median(w for w, _ in m) for name, m in measured.items()}
    cpu = {name: statistics.median(c for _, c in m) for name, m in measured.items()}
    base = "python -c pass"
    print(
        f"{os.cpu_count()} cores, 1-minute load {load_before:.1f} before, {load_after:.1f} after; "
        f"medians of {args.reps}"
    )
    print(f"{'command':58} {'wall s':>7} {'CPU s':>7} {'wall/pass':>9} {'CPU/pass':>8}")
    for name in runs:
        print(
            f"{name:58} {wall[name]:7.3f} {cpu[name]:7.3f} {wall[name] / wall[base]:9.1f} {cpu[name] / cpu[base]:8.1f}"
        )
    ours, official = (next(n for n in runs if n.startswith(p)) for p in ("repro eval", "official-style"))
    print(
        f"repro eval against the official-style scorer, whole processes: {wall[official] / wall[ours]:.1f}x wall, "
        f"{cpu[official] / cpu[ours]:.1f}x CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
