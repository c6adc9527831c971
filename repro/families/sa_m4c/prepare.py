"""Paper-scale data of sa-m4c: where the real files live and which one is missing."""

from __future__ import annotations

from pathlib import Path

from repro.errors import ReproError
from repro.families.base import RowRun, RunContext
from repro.paths import data_dir
from repro.specs import Spec


def raw_dir() -> Path:
    """The TextVQA files of `repro download textvqa`."""
    return data_dir() / "textvqa"


def paper_data(spec: Spec) -> dict[str, Path]:
    """The real data a paper-scale run reads; a ReproError naming the first missing file and its command."""
    from repro.families.sa_m4c.data import QUESTIONS_FILE

    for split in ("train", "val", "test"):
        path = raw_dir() / QUESTIONS_FILE.format(split=split)
        if not path.is_file():
            raise ReproError(f"{spec.id}: paper scale needs {path}; run `repro download textvqa`")
    raise ReproError(
        f"{spec.id}: paper-scale training of M4C / SA-M4C is not implemented yet (the M4C feature preparation "
        f"into the feature store is missing)"
    )


def run_paper(ctx: RunContext, data: dict[str, Path]) -> RowRun:  # noqa: ARG001
    raise ReproError(f"{ctx.spec.id}: paper-scale training of M4C / SA-M4C is not implemented yet")
