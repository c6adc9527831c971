"""One process (or one torchrun rank) of the ace-rpe paper-scale tests: `run_row` at paper scale on the
fixture files under $REPRO_DATA_DIR, with tiny sizes and short recipes; its RowRun saved per rank.

    python -m tests.families.ace_rpe.paper_worker OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.families.ace_rpe.tiny import TINY_SIZES

SETTINGS = {
    "sizes": {k: v for k, v in TINY_SIZES.items() if k != "vocab_size" and not k.endswith("_id")},
    "pretrain_image_size": 16,  # pre-training at 2 x 2 patches, fine-tuning at 4 x 4 (ALBEF: 256, then 384 px)
    "max_tokens": 12,
    "pretrain_recipe": {"epochs": 2, "batch_size": 4, "num_workers": 0},
    "recipe": {"epochs": 1, "batch_size": 4, "num_workers": 0},
}


def run(out: Path, row: str = "None") -> dict:
    from repro import families
    from repro.families.base import RunContext
    from repro.specs import resolve

    spec = resolve("ace-rpe-table1-pe")
    spec_row = spec.row(row)
    ctx = RunContext(
        spec=spec,
        row=spec_row,
        config=spec_row.config,
        scale="paper",
        settings=SETTINGS,
        seed=0,
        workdir=out / "work",
        progress=False,
    )
    result = families.for_row(spec_row).run_row(ctx)
    record = {"metrics": result.metrics, "training": result.training, "split": result.split}
    (out / f"rank{os.environ.get('RANK', '0')}.json").write_text(json.dumps(record))
    return record


if __name__ == "__main__":
    run(Path(sys.argv[1]))
