"""A non-editable install works: the wheel carries every spec and the committed results (read from outside
the checkout while there is no ./results), results go to ./results, the record's commit says it is an
installed copy.

How, honestly and quickly (about 5 s): the source is copied (so the build writes nothing into the checkout),
a wheel is built with the running interpreter's setuptools (`pip wheel --no-deps --no-build-isolation`),
installed with `pip install --no-deps --target` into a temporary folder, and run from another folder
with only that folder on PYTHONPATH; its dependencies come from the running environment, so only the
packaging is under test, not the dependency resolution.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from repro.paths import REPO_DIR

pytestmark = pytest.mark.slow  # over ~10 s: left out by `make test-fast`


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, capture_output=True, timeout=300)


def test_a_wheel_installed_elsewhere_lists_32_experiments_and_shows_a_table(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_DIR / name, source / name)
    shutil.copytree(REPO_DIR / "repro", source / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    assert (source / "repro" / "experiments" / "mcan-pa").is_dir()  # the link to experiments/, followed
    _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source))
    (wheel,) = (tmp_path / "dist").glob("repro-*.whl")
    _pip("install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(wheel))

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
    env.update(PYTHONPATH=str(tmp_path / "site"), REPRO_DATA_DIR=str(tmp_path / "data"), COLUMNS="80")

    def repro(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "repro", *args], cwd=work, env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import repro.paths as p, repro.results as r; print(p.PACKAGE_DIR); print(p.results_dir()); "
            "print(r.git_commit())",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert where[0].startswith(str(tmp_path / "site")), "the installed copy runs, not the checkout"
    assert where[1] == str(work / "results") and where[2] == "unknown (repro 0.1.0, installed)"
    listed = {e["id"] for e in json.loads(repro("list", "--format", "json"))}
    assert listed == {p.stem for p in (REPO_DIR / "experiments").glob("*/*.yaml")}  # the 32 tables and the controls
    table = repro("table", "table5-ablation")
    assert "MCAN+PA (ours)" in table and "86.99" in table
    assert not (tmp_path / "site" / "results").exists()

    # the committed synthetic numbers, shipped in the wheel, read from outside the checkout
    committed = REPO_DIR / "results" / "mcan-pa" / "mcan-pa-table5-ablation"
    rows = [json.loads(p.read_text()) for p in sorted(committed.glob("*.synthetic.json"))]
    means = [row["metrics"]["Y/N"] for row in rows]
    assert len(means) == 10
    fewest, most = min(len(row["seeds"]) for row in rows), max(len(row["seeds"]) for row in rows)
    synthetic = repro("table", "mcan-pa-table5-ablation", "--scale", "synthetic")
    header = f"n = {fewest} seeds" if fewest == most else f"n = {fewest}–{most} seeds"
    assert header in synthetic and all(f"{m:.2f}" in synthetic for m in means), synthetic
    checked = " ".join(repro("check", "mcan-pa-table5-ablation").split())  # the same records, verified
    seeds = len(list((committed / "seeds").glob("*.json")))
    assert "10 row records" in checked and f"{seeds} seed records" in checked, checked
    assert not (work / "results").exists()  # reading the shipped copy writes nothing
