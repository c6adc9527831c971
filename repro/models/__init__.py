"""Models. `build_model(config, num_tokens, num_answers)` turns a spec row's `model` mapping into a module.

Configs of `mcan-pa` Table V:
  {arch: mcan}                                   MCAN
  {arch: mcan, position_embedding: bert}         MCAN+PE
  {arch: mcan, positional: [pwa, poa]}           any subset of PWA, POA, PMA (fusion Eq. 8)
  {arch: mcan, positional: [pwa, poa, pma], fusion: relation-network}   MCAN+PA*
  {arch: mcan, positional: [pwa, poa, pma], fusion: eq8}                MCAN+PA
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from repro.errors import ReproError

ARCHS = ("mcan",)
POSITIONAL = ("pwa", "poa", "pma")
POSITION_EMBEDDINGS = ("bert", "none")
_MCAN_KEYS = {"arch", "positional", "fusion", "position_embedding"}


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ReproError(f"model {what} {value!r} is unknown; one of {', '.join(allowed)}")
    return value


def paper_sizes(arch: str = "mcan") -> dict[str, Any]:
    """The sizes a model has at the paper's settings."""
    from repro.models.mcan import PAPER_SIZES

    _choice(arch, ARCHS, "arch")
    return dict(PAPER_SIZES)


def build_model(config: dict, num_tokens: int, num_answers: int, embeddings: torch.Tensor | None = None,
                sizes: dict | None = None) -> nn.Module:
    """Build the model a spec row names. `sizes` overrides paper sizes (d_model, layers, heads, ...)."""
    if not isinstance(config, dict):
        raise ReproError(f"model config must be a mapping, got {type(config).__name__}")
    if "arch" not in config:
        raise ReproError(f"model config {config!r} has no 'arch'; one of {', '.join(ARCHS)}")
    arch = _choice(config["arch"], ARCHS, "arch")
    unknown = sorted(set(config) - _MCAN_KEYS)
    if unknown:
        raise ReproError(f"unknown model config key(s) {', '.join(map(repr, unknown))} for arch {arch!r}; "
                         f"known: {', '.join(sorted(_MCAN_KEYS))}")

    positional = config.get("positional", [])
    if isinstance(positional, str):
        positional = [positional]
    if not isinstance(positional, list):
        raise ReproError(f"model positional must be a list of {', '.join(POSITIONAL)}, got {positional!r}")
    for name in positional:
        _choice(name, POSITIONAL, "positional module")
    if len(set(positional)) != len(positional):
        raise ReproError(f"model positional {positional!r} names a module twice")
    fusion = config.get("fusion")
    if fusion is not None:
        from repro.models.positional import FUSIONS

        _choice(fusion, FUSIONS, "fusion")
        if not positional:
            raise ReproError(f"model fusion {fusion!r} needs positional modules (pwa, poa, pma)")
    pe = config.get("position_embedding", "none")
    _choice(pe, POSITION_EMBEDDINGS, "position_embedding")

    full = paper_sizes(arch)
    for key, value in (sizes or {}).items():
        if key not in full:
            raise ReproError(f"unknown model size {key!r}; known: {', '.join(sorted(full))}")
        full[key] = value
    if full["d_model"] % full["heads"]:
        raise ReproError(f"model size d_model={full['d_model']} is not divisible by heads={full['heads']}")
    if "poa" in positional and full["geometry_dim"] % 8:
        raise ReproError(f"POA needs geometry_dim divisible by 8, got {full['geometry_dim']}")
    if num_tokens < 2 or num_answers < 1:
        raise ReproError(f"model needs at least 2 tokens and 1 answer, got {num_tokens} and {num_answers}")

    from repro.models.mcan import MCAN

    order = tuple(p for p in POSITIONAL if p in positional)
    return MCAN(num_tokens, num_answers, full, positional=order, fusion=fusion or "eq8",
                position_embedding=None if pe == "none" else pe, embeddings=embeddings)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (the GloVe table is trainable in MCAN and counted, MODELS.md §1.2)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
