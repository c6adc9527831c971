"""psac's Table 1 (`compute: {task: statistics}`): TGIF-QA's QA pairs and GIFs per task, counted from the
question files present."""

from __future__ import annotations

from typing import Any

from repro.families.base import RowRun, RunContext


def statistics(ctx: RunContext) -> RowRun:
    """Table 1 from the question files present: QA pairs and distinct GIFs per task for the row's split.

    A GIF column is filled with the count of distinct `question` strings, the one definition that
    reproduces the printed GIF numbers (see README); the distinct gif_name / key / vid_id counts are kept
    in the record's `info`. Cells whose file is missing stay empty and are listed in `info.missing`.
    """
    from repro.datasets.tgif import statistics as tgif_statistics
    from repro.datasets.tgif import tgif_dir

    split = str((ctx.row.compute or {}).get("split", "all"))
    split = {"all": "total"}.get(split, split)
    stats = tgif_statistics(tgif_dir())
    metrics: dict[str, float] = {}
    info: dict[str, Any] = {
        "source": stats["root"],
        "gif_definition": "distinct question strings",
        "missing": [],
        "distinct": {},
    }
    for col in ctx.spec.columns:
        task, _, what = col.key.partition("/")
        cell = stats["cells"][task][split]
        if not cell["present"]:
            info["missing"].append(f"{col.name}: {cell['file']} is not in {stats['root']}")
            continue
        if what == "qa-pairs":
            metrics[col.name] = float(cell["qa_pairs"])
        else:
            metrics[col.name] = float(cell["distinct"]["question"])
            info["distinct"][col.name] = cell["distinct"]
    return RowRun(metrics=metrics, split=split, info=info)
