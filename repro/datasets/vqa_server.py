"""VQA's evaluation servers, seen from a run: the test question files they score, the prediction file a run
writes for each with its `repro submit` commands, and on generated data the scores the server would give.

A prediction file is the server's format, `[{"question_id": int, "answer": str}, ...]`, one record per
question of the released file; a run names it with `RunContext.predictions_file(<released split>)`. VQA v2's
server takes every test2015 question for both phases (test-dev is a part of test2015, test-std the rest);
VQA v1's takes test-dev2015 and test2015 apart. The real test answers are hidden, so only generated data
(a release layout written with its answers, `repro.families.mcan_pa.official`) is scored here, split into
the two phases as the server splits it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.utils import write_json_atomic

# The test question files the servers score, as (prepared split, released split) -> `repro submit` targets.
TEST_FILES = {
    "vqa2": {("test", "test2015"): ("vqa2-test-dev", "vqa2-test-std")},
    "vqa1": {("test-dev", "test-dev2015"): ("vqa1-test-dev",), ("test", "test2015"): ("vqa1-test",)},
}
PHASES = ("test-dev", "test-std")


def question_file(root: Path, dataset: str, split: str) -> Path:
    """The released question file of a prepared split, under `root/<dataset>` (where its zip unpacks)."""
    from repro.datasets.vqa import VQA_FILES, find_file

    name = VQA_FILES[dataset][split][0]
    return find_file(root / dataset, name) or root / dataset / name


def write_test_file(
    out: Path, answers: Mapping[int, str], targets: Sequence[str], questions: Path | None = None
) -> list[str]:
    """Write the answers to a test split at `out` in the server's format; returns the `repro submit` command of
    each target, with `--questions` where the question file is not where `repro submit` looks (generated data).
    Under torchrun every rank holds the gathered answers and rank 0 alone writes them."""
    from repro.train.distributed import is_main_process

    if is_main_process():
        write_json_atomic(out, [{"question_id": q, "answer": a} for q, a in answers.items()])
    flag = "" if questions is None else f" --questions {questions}"
    return [f"repro submit {target} --predictions {out}{flag}" for target in targets]


def phases(
    test: Mapping[int, str], test_dev_ids: Collection[int], test_dev: Mapping[int, str] | None = None
) -> dict[str, dict[int, str]]:
    """test2015's answers as the server splits them: test-dev (the answers of its own file when the release
    has one, as VQA v1's does; else the test2015 answers of its questions) and test-std (the rest)."""
    dev = dict(test_dev or {q: a for q, a in test.items() if q in test_dev_ids})
    return {"test-dev": dev, "test-std": {q: a for q, a in test.items() if q not in test_dev_ids}}


def server_scores(
    answers: Mapping[str, Mapping[int, str]], gold: Mapping[int, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The server's scores of generated data: for each phase, the VQA accuracy of its answers (in their order)
    against the annotations `gold` by question id (the official format: `answers` as `[{"answer": ...}]`, with
    `answer_type` and `question_type` where known, which add the per-type scores)."""
    from repro.datasets.vqa_scoring import vqa_scores

    return {phase: vqa_scores(list(a), list(a.values()), gold).aggregate for phase, a in answers.items()}
