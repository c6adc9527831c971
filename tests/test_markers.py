"""Test markers: `slow` (left out by `make test-fast`) and `gpu` (skipped without CUDA), registered and strict."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from repro.paths import REPO_DIR
from tests import conftest


def test_slow_and_gpu_are_registered_and_unknown_markers_are_refused(request):
    markers = {line.split(":", 1)[0] for line in request.config.getini("markers")}
    assert {"slow", "gpu"} <= markers
    assert "--strict-markers" in request.config.getini("addopts")  # a typo such as @pytest.mark.slwo is an error


class _Item:
    def __init__(self, *names: str):
        self.marks = [getattr(pytest.mark, name).mark for name in names]

    def get_closest_marker(self, name: str):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker) -> None:
        self.marks.append(marker.mark)


@pytest.mark.parametrize("cuda", [False, True])
def test_gpu_tests_skip_without_cuda_and_run_with_it(monkeypatch, cuda):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    gpu, cpu = _Item("gpu"), _Item()
    conftest.pytest_collection_modifyitems(None, [gpu, cpu])
    assert (gpu.get_closest_marker("skip") is not None) is (not cuda)
    assert cpu.get_closest_marker("skip") is None


def _marked_slow(path: Path) -> set[str]:
    """The tests of a file marked slow: all of them under a module-level `pytestmark`, else the decorated ones."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")}

    def slow(node: ast.expr) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "slow" for n in ast.walk(node))

    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            if slow(node.value):
                return tests
    decorated = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(map(slow, n.decorator_list))}
    return tests & decorated


# Representatives of each kind of slow test; `make test-fast` (-m "not slow") leaves them out.
SLOW = {
    "tests/test_synthetic_regression.py": "test_every_table5_row_reproduces_its_stored_fingerprint",  # reruns
    "tests/test_train_ddp.py": "test_two_ranks_end_identical_and_match_one_process",  # torchrun/DDP
    "tests/families/mcan_pa/test_ensemble.py": "test_seeds_trained_together_equal_their_lone_runs",  # together
    "tests/families/ace_rpe/test_paper_scale.py": "test_paper_scale_trains_both_recipes_as_two_ranks_of_a_torchrun_job",
}


def test_the_inner_loop_leaves_the_slow_tests_out():
    unmarked = [f"{path}::{test}" for path, test in SLOW.items() if test not in _marked_slow(REPO_DIR / path)]
    assert unmarked == [], "not marked slow: " + ", ".join(unmarked)
    assert 'pytest -q -m "not slow"' in (REPO_DIR / "Makefile").read_text()
