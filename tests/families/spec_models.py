"""Helpers of the family config tests: every `model:` mapping of the shipped specs, by family."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import yaml

from repro.families import arch_of

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def by_arch(configs) -> dict[str, type]:
    return {arch_of(cls): cls for cls in configs}


def _models(node, found):
    """Every `model:` mapping anywhere in a loaded spec (rows, or nested in `compute`)."""
    if isinstance(node, dict):
        if isinstance(node.get("model"), dict):
            found.append(node["model"])
        for value in node.values():
            _models(value, found)
    elif isinstance(node, list):
        for value in node:
            _models(value, found)
    return found


def spec_models() -> list[tuple[Path, dict, dict]]:
    out = []
    for path in sorted(EXPERIMENTS.glob("*/*.yaml")):
        spec = yaml.safe_load(path.read_text())
        for model in _models(spec, []):
            out.append((path, spec, model))
    return out


def _rows(paper: str, spec_id: str) -> dict[str, dict]:
    spec = yaml.safe_load((EXPERIMENTS / paper / f"{spec_id}.yaml").read_text())
    return {row["name"]: row["model"] for row in spec["rows"] if "model" in row}


def rows_of(paper: str):
    """`rows(spec_id)` -> {row name: model mapping} for one paper's specs."""
    return partial(_rows, paper)


def same(config_value, spec_value) -> bool:
    if isinstance(spec_value, list):  # a set of choices: order and container do not matter
        return sorted(config_value) == sorted(spec_value)
    return config_value == spec_value
