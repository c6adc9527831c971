"""A unit that trains in stages (psac's tasks, ace-rpe's pre-training, fine-tunings and heads: one folder each under
the unit's workdir) writes its plan here, so that `repro run`'s progress (`repro.monitor`) counts the stages by their
share of the unit rather than the current stage as the whole unit."""

from __future__ import annotations

import json
from pathlib import Path

STAGES = "stages.json"  # a staged unit's stages, in its workdir


def write_stages(workdir: Path, stages: list[tuple[str, float]]) -> None:
    """Tell the monitor that the unit in `workdir` trains in stages: (folder under `workdir` where the stage's
    train.jsonl goes, its weight: e.g. its planned optimisation steps), in training order."""
    from repro.utils import write_json_atomic

    workdir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(workdir / STAGES, {"stages": [[str(name), float(weight)] for name, weight in stages]})


def read_stages(workdir: Path) -> list[tuple[str, float]]:
    """The stages `write_stages` wrote ([] for a unit of one stage, or a file that does not read as one)."""
    try:
        stages = json.loads((workdir / STAGES).read_text(encoding="utf-8"))["stages"]
        out = [(str(name), float(weight)) for name, weight in stages]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return out if out and all(w >= 0 for _, w in out) and sum(w for _, w in out) > 0 else []
