"""The golden tensors: tiny official-layout checkpoints with the inputs and outputs the official code produced.

The folder is `REPRO_GOLDEN_TENSORS` (default: `shared/reference/golden-tensors` beside the checkout); the tests
take every size from the fixture's config.json, so another set made the same way passes the same tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from repro.paths import REPO_DIR


def golden_root() -> Path:
    return Path(os.environ.get("REPRO_GOLDEN_TENSORS") or REPO_DIR.parent / "shared" / "reference" / "golden-tensors")


def fixture(name: str) -> Path:
    """The fixture folder `name`; the test skips (with the reason) when it is absent."""
    folder = golden_root() / name
    if not (folder / "checkpoint.pth").is_file():
        pytest.skip(f"no golden-tensor fixture {folder} (set REPRO_GOLDEN_TENSORS)")
    return folder


def config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def tensors(folder: Path, name: str) -> dict:
    return torch.load(folder / name, map_location="cpu", weights_only=True)


def assert_close(ours: torch.Tensor, official: torch.Tensor, what: str, atol: float = 1e-5) -> None:
    """Equal within fp32 rounding of a reimplementation (the README expects about 1e-6)."""
    assert tuple(ours.shape) == tuple(official.shape), f"{what}: shape {tuple(ours.shape)} != {tuple(official.shape)}"
    diff = (ours.float() - official.float()).abs().max().item()
    assert diff <= atol, f"{what}: max abs difference {diff:.3g} > {atol}"


class Capture:
    """Forward outputs of named submodules (first element of a tuple)."""

    def __init__(self, model: torch.nn.Module, names: dict[str, str]):
        self.out: dict[str, torch.Tensor] = {}
        modules = dict(model.named_modules())
        self.handles = [modules[ours].register_forward_hook(self._hook(official)) for official, ours in names.items()]

    def _hook(self, name):
        def hook(module, args, output):
            self.out[name] = output[0] if isinstance(output, tuple) else output

        return hook

    def close(self):
        for h in self.handles:
            h.remove()
