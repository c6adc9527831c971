"""Tables II and III of DSGANet: statistics of the official VQA v2 and GQA files (`compute: {task: statistics}`
rows, no training)."""

from __future__ import annotations

from typing import Any

from repro.errors import ReproError
from repro.families.base import RowRun, RunContext
from repro.paths import data_dir

# What each column counts (the paper does not define them; see the specs' notes).
STATISTICS_MEANING = {
    "vqa2": {
        "images": "distinct image_id of the split's question file",
        "questions": "questions in the split's question file (test: all of test2015)",
        "answers": "human answers in the split's annotation file (10 per question)",
    },
    "gqa": {
        "images": "distinct imageId of the split's balanced question file",
        "questions": "questions in the split's balanced question file",
        "vocab": "distinct question words (MCAN's tokenisation), per split; all: their union",
    },
}


def statistics(ctx: RunContext) -> RowRun:
    """One row of Table II (VQA v2) or III (GQA balanced) counted from the official files: at paper scale
    those under `<data_dir>/<dataset>` (`repro download`), at smoke scale tiny files in the same layouts
    that this writes. Cells whose file is missing stay empty and are listed in `info.missing`."""
    from repro.datasets import gqa, vqa
    from repro.families.dsganet.synthetic import write_stats_fixture

    dataset = ctx.spec.datasets[0]
    if dataset not in STATISTICS_MEANING:
        raise ReproError(f"{ctx.spec.id}: no statistics for dataset {dataset!r}")
    if ctx.scale == "paper":
        root = data_dir() / dataset
        if not root.is_dir():
            raise ReproError(f"{root}: no such folder; run repro download {dataset} first")
    else:
        root = write_stats_fixture(dataset, data_dir() / "synthetic" / f"dsganet-{dataset}-stats")
    stats = gqa.statistics(root) if dataset == "gqa" else vqa.statistics(dataset, root)
    split = str((ctx.row.compute or {}).get("split", "all"))
    cell = stats["splits"].get(split)
    if cell is None:
        raise ReproError(f"{ctx.spec.id}: unknown split {split!r}; one of {', '.join(stats['splits'])}")
    metrics = {c.name: float(cell[c.key]) for c in ctx.spec.columns if cell.get(c.key) is not None}
    info: dict[str, Any] = {"source": stats["root"], "meaning": STATISTICS_MEANING[dataset], "missing": []}
    if not cell["present"]:
        missing = [s["file"] for s in stats["splits"].values() if not s["present"] and s["file"].endswith(".json")]
        info["missing"] = sorted(set(missing))
    return RowRun(metrics=metrics, split=split, info=info)
