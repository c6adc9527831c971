"""One paper-scale row of four families on files in the official layouts, run by `repro run` as one process and as two
gloo ranks of a torchrun job (`python -m torch.distributed.run --standalone --nproc_per_node=2 -m repro run ...`,
watched by `tests.torchrun_ranks`), on the same global batch: after the same SGD step from the same weights both
end with the same weights (so the same gradients), and the two ranks with identical ones.

The step is plain SGD (`recipe.optimizer.name=sgd`, no momentum) at a constant rate: Adam's first step is about
lr * sign(g), which turns float noise in a gradient that is zero in exact arithmetic into a whole step. Dropout is
off (`sizes.dropout=0`) where the family has one; one step (`recipe.max_steps=1`) unless the limited training set
splits evenly into global batches (DistributedSampler pads a short last batch with repeated samples).

Tolerance: the ranks sum half the batch each and gloo adds the halves, so the gradient is the one process's sum in
another order; fp32 (eps 1.2e-7) over these few terms differs in the last bits, a relative 1e-6 of the gradient.
A step moves a weight by lr * g; we allow 1e-5 of the model's largest move (lr * max |g|: the rounding of a sum
scales with its largest terms, not with each tensor's own), plus 4 ulps of the tensor's largest weight (the rounding
of w - lr g itself), and check that the step moved some weight by more than 0.01, so a gradient off by a factor (a
loss averaged over the local batch instead of the global one, a gradient left out of the all-reduce) fails.

ace-rpe is not here: its paper-scale sizes and pre-training settings come from the scale's settings, which a spec
cannot set for `paper` and overrides reach only in part, so a tiny ALBEF is not reachable from `repro run`; its
paper-scale `run_row` runs as two torchrun ranks in tests/families/ace_rpe/test_paper_scale.py, and its heads'
gradients are compared with one process's in tests/test_train_ddp.py (as in ALBEF's code, ITC's in-batch negatives
and ITM's hard negatives come from each rank's half of the batch, so its pre-training is not one process's anyway).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from repro.paths import REPO_DIR

pytestmark = pytest.mark.slow  # four pairs of runs: 4.5 min on a loaded 2-core machine, about 100 s idle

SGD = ["recipe.optimizer.name=sgd", "recipe.schedule.name=constant", "recipe.schedule.base_lr=0.5"]
TIMINGS: dict[str, float] = {}


def _env(root: Path, results: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), os.environ.get("PYTHONPATH", "")])}
    env.update(
        OMP_NUM_THREADS="1",
        CUDA_VISIBLE_DEVICES="",  # gloo ranks on the CPU, on a GPU machine too
        COLUMNS="200",
        REPRO_EXPERIMENTS=str(root / "experiments"),
        REPRO_DATA_DIR=str(root / "data"),
        REPRO_RESULTS=str(root / results),
        REPRO_SCRATCH=str(root / "scratch"),
    )
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _spec(root: Path, family: str, spec: str) -> None:
    folder = root / "experiments" / family
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_DIR / "experiments" / family / f"{spec}.yaml", folder)


def _pair(root: Path, spec: str, row: str, args: list[str], single: bool = True) -> tuple[list, list, list, dict]:
    """`repro run` as one process (unless not `single`) and as two torchrun ranks; (one process's models or None,
    rank 0's, rank 1's, the torchrun run's seed record). Each entry of a list: one trained model's {"initial",
    "final"} weights."""
    run = ["run", spec, "--scale", "paper", "--rows", row, "--seeds", "0", *args, *(SGD if single else [])]
    launch = {
        "one": [sys.executable, "-m", "tests.torchrun_ranks"],
        "two": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        + ["-m", "tests.torchrun_ranks"],
    }
    started = time.perf_counter()
    for name, head in launch.items():
        if name == "one" and not single:
            continue
        cmd = [*head, str(root / f"dump-{name}"), *run, "--workdir", str(root / f"work-{name}")]
        done = subprocess.run(
            cmd, cwd=REPO_DIR, env=_env(root, f"results-{name}"), capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (name, done.stdout[-2000:], done.stderr[-4000:])
    TIMINGS[spec] = round(time.perf_counter() - started, 1)
    one, *ranks = (
        torch.load(root / f"dump-{n}" / f"rank{r}.pt") if single or n == "two" else None
        for n, r in (("one", 0), ("two", 0), ("two", 1))
    )
    logs = list((root / "work-two").rglob("run.log"))  # each training says how many processes took part
    assert logs and all("fp32, 2 process(es)" in log.read_text() for log in logs)
    assert done.stdout.count(f"plan: {spec} at scale paper") == 1  # rank 0 alone prints
    assert [(root / "dump-two" / f"rank{r}.group").read_text() for r in (0, 1)] == ["False", "False"]  # left
    [record] = (root / "results-two").rglob("seeds/*.seed0.json")
    assert not list((root / "results-two").rglob("*.seed1.json"))
    return one, ranks[0], ranks[1], json.loads(record.read_text())


def _same_step(one: list, rank0: list, rank1: list) -> dict[str, float]:
    """The checks of the module's docstring; the largest differences seen (printed by the test)."""
    assert len(one) == len(rank0) == len(rank1) >= 1
    worst = {"abs": 0.0, "rel": 0.0, "moved": 0.0}
    for a, b, c in zip(one, rank0, rank1):
        assert a["initial"].keys() == b["initial"].keys()
        floats = [k for k, w in a["initial"].items() if w.is_floating_point()]
        step = max((a["final"][k] - a["initial"][k]).abs().max().item() for k in floats)  # lr * max |g|
        for key, w0 in a["initial"].items():
            assert torch.equal(w0, b["initial"][key]), key  # the same start (rank 0's, DDP broadcasts it)
            assert torch.equal(b["final"][key], c["final"][key]), key  # the ranks stay identical
            if key not in floats:
                assert torch.equal(a["final"][key], b["final"][key]), key
                continue
            diff = (a["final"][key] - b["final"][key]).abs().max().item()
            ulps = 4 * torch.finfo(torch.float32).eps * a["final"][key].abs().max().item()  # rounding w - lr g
            assert diff <= 1e-5 * step + ulps, (key, diff, step)
            worst["abs"] = max(worst["abs"], diff)
            worst["rel"] = max(worst["rel"], diff / step)
        worst["moved"] = max(worst["moved"], step)
    assert worst["moved"] > 1e-2  # the step did move the weights, far more than the tolerance
    return worst


def test_mcan_pa(tmp_path):
    """Table V's MCAN+PA row on VQA v2's json files and the bottom-up TSVs (`repro prepare vqa2 bottom-up-36`):
    train + val + Visual Genome (2 + 2 + 1 questions with --limit 2); one step of the global batch 4."""
    from tests._vqa_fixtures import write_vg, write_vqa2
    from tests.families.mcan_pa.test_run import _bottom_up_tsv

    data = tmp_path / "data"
    _spec(tmp_path, "mcan-pa", "mcan-pa-table5-ablation")
    write_vqa2(data / "vqa2")
    write_vg(data / "vg-qa")
    _bottom_up_tsv(data / "bottom-up-36" / "trainval_resnet101_faster_rcnn_genome_36.tsv", range(1, 7))
    _bottom_up_tsv(data / "bottom-up-36" / "test2015_resnet101_faster_rcnn_genome_36.tsv", range(1, 4))
    for name in ("vqa2", "bottom-up-36"):
        done = subprocess.run(
            [sys.executable, "-m", "repro", "prepare", name],
            cwd=REPO_DIR,
            env=_env(tmp_path, "results"),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    tiny = [
        "sizes.d_model=16",
        "sizes.layers=1",
        "sizes.heads=2",
        "sizes.ffn=16",
        "sizes.geometry_dim=16",
        "sizes.dropout=0.0",
    ]
    one, rank0, rank1, record = _pair(
        tmp_path,
        "mcan-pa-table5-ablation",
        "MCAN+PA (ours)",
        ["--limit", "2", *tiny, "recipe.batch_size=4", "recipe.max_steps=1"],
    )
    print("mcan-pa", _same_step(one, rank0, rank1), TIMINGS)
    assert record["training"]["steps"] == 1 and record["training"]["global_batch"] == 4


def test_dsganet(tmp_path):
    """Table 6's row 4 (objects with bbox + depth DAA, BERT questions) on the prepared VQA v2 questions and object
    stores with depth (`tests/families/dsganet/test_paper_scale.py`'s files); 8 train questions, one global batch."""
    from repro.datasets.vqa import prepare_vqa
    from repro.families.dsganet.synthetic import generate
    from tests.families.dsganet.test_paper_scale import CFG, TINY

    _spec(tmp_path, "dsganet", "dsganet-table6-relations")
    paths = generate(tmp_path / "generated", CFG)
    release = tmp_path / "data"
    (release / "vqa2").mkdir(parents=True)
    for key in ("train_questions", "train_annotations", "val_questions", "val_annotations"):
        shutil.copy(paths[key], release / "vqa2")
    stores = release / "prepared" / "features" / "openvqa-features"
    stores.mkdir(parents=True)
    shutil.copytree(paths["train_features"], stores / "train2014.store")
    shutil.copytree(paths["val_features"], stores / "val2014.store")
    prepare_vqa("vqa2", release / "vqa2", release / "prepared" / "vqa2", glove=None)
    questions = json.loads(next((release / "vqa2").glob("*train2014_questions.json")).read_text())["questions"]
    words = sorted({w for q in questions for w in q["question"].lower().rstrip("?").split()})
    (release / "bert-base-uncased").mkdir()
    (release / "bert-base-uncased" / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words]))
    one, rank0, rank1, record = _pair(
        tmp_path, "dsganet-table6-relations", "4", ["--limit", "8", *TINY, "model.dropout=0.0"]
    )
    print("dsganet", _same_step(one, rank0, rank1), TIMINGS)
    assert record["training"]["steps"] == 1


# psac's other random draws besides model.dropout (each rank draws its own masks, one process draws another set)
NO_PSAC_DROPOUT = ["sizes.attention_dropout=0.0", "sizes.classifier_dropout=0.0", "sizes.char_dropout=0.0"]


def test_psac(tmp_path):
    """Table 2's PSAC(R) on TGIF-QA's question files and PSAC's HDF5 ResNet features (`repro prepare tgif-qa`):
    the four tasks' models, each one step on its first 4 Train questions."""
    from tests.families.psac.paper_fixtures import write_psac_paper_fixtures
    from tests.families.psac.test_paper_run import QUICK

    _spec(tmp_path, "psac", "psac-table2-sota")
    write_psac_paper_fixtures(tmp_path / "data", train=4, test=2)
    done = subprocess.run(
        [sys.executable, "-m", "repro", "prepare", "tgif-qa"],
        cwd=REPO_DIR,
        env=_env(tmp_path, "results"),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    one, rank0, rank1, record = _pair(
        tmp_path,
        "psac-table2-sota",
        "PSAC(R)",
        ["--limit", "4", *QUICK, "recipe.batch_size=4", "model.dropout=0.0", *NO_PSAC_DROPOUT],
    )
    for b, c in zip(rank0, rank1):  # DDP syncs every task's gradients (find_unused_parameters: unused_bias)
        assert all(torch.equal(w, c["final"][k]) for k, w in b["final"].items())
    print("psac", _same_step(one, rank0, rank1), TIMINGS)
    assert len(one) == 4 and all(run["steps"] == 1 for run in record["training"]["per_task"].values())


def test_sa_m4c(tmp_path):
    """Table 1's row 6 (M4C on MMF's imdb files, Rosetta-en OCR and its `textvqa.ocr_en` features, detectron.lmdb)
    converted by the run itself; 4 train questions, one global batch."""
    pytest.importorskip("fasttext")
    pytest.importorskip("lmdb")
    from tests.families.sa_m4c.paper_fixtures import write_sa_m4c_paper_fixtures
    from tests.families.sa_m4c.test_paper_run import quick

    _spec(tmp_path, "sa-m4c", "sa-m4c-table1-textvqa")
    info = write_sa_m4c_paper_fixtures(tmp_path / "data", dim=16)
    one, rank0, rank1, record = _pair(
        tmp_path, "sa-m4c-table1-textvqa", "6 M4C†", ["--limit", "4", *quick(info), "sizes.dropout=0.0"]
    )
    print("sa-m4c", _same_step(one, rank0, rank1), TIMINGS)
    assert record["training"]["steps"] == 1
