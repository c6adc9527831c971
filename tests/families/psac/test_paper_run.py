"""psac at paper scale end to end on files in the official layouts (`paper_fixtures.py`): `repro prepare tgif-qa`
reads PSAC's HDF5 frame features, `repro run ... --scale paper --limit N` trains each of the four TGIF-QA tasks'
models on the first N Train questions and scores them on the first N Test questions."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from repro import specs
from repro.cli import app
from repro.paths import REPO_DIR
from tests.families.psac.paper_fixtures import write_psac_paper_fixtures

SPEC, ROW = "psac-table2-sota", "PSAC(R)"
# a few minutes of CPU become seconds: one epoch, a narrower question path and answer MLP, 8 of the clips' frames
# (the video width stays the released features' 2048)
QUICK = [
    "recipe.epochs=1",
    "sizes.frames=8",
    "sizes.hidden=32",
    "sizes.vpsa_ffn=16",
    "sizes.qpsa_ffn=16",
    "sizes.classifier_hidden=16",
    "sizes.video_pos_dim=16",
    "sizes.ds_convs=1",
]


@pytest.mark.slow  # four models with the released features' 2048-d video encoder: about 25 s on 2 cores
def test_paper_scale_runs_all_four_tasks_on_the_official_layouts_with_a_limit(sandbox, runner):
    info = write_psac_paper_fixtures(sandbox / "data", train=6, test=4)
    folder = sandbox / "experiments" / "psac"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "psac" / f"{SPEC}.yaml", folder)
    specs.clear_cache()

    args = ["run", SPEC, "--scale", "paper", "--rows", ROW, "--limit", "3", *QUICK]
    refused = runner.invoke(app, args)  # the frame store is not prepared yet: one line naming the command
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert "repro prepare tgif-qa" in " ".join(refused.output.split())
    prepared = runner.invoke(app, ["prepare", "tgif-qa"])
    assert prepared.exit_code == 0, prepared.output

    out = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    seeds = list((sandbox / "results").glob(f"variants/*/psac/{SPEC}/seeds/PSAC_R.seed0.json"))
    assert len(seeds) == 1, list((sandbox / "results").rglob("*.json"))
    record = json.loads(seeds[0].read_text())
    assert record["scale"] == "paper" and record["split"] == "test"
    assert record["variant"]["limit"] == 3 and record["variant"]["partial"] is True
    metrics = record["metrics"]
    assert set(metrics) == {"Action", "Trans", "FrameQA", "Count"}
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert all(0.0 <= metrics[k] <= 100.0 for k in ("Action", "Trans", "FrameQA"))
    assert metrics["Count"] >= 0.0  # an MSE
    per_task = record["training"]["per_task"]
    assert set(per_task) == {"action", "transition", "frameqa", "count"}
    for task, run in per_task.items():
        assert (run["train_questions"], run["test_questions"]) == (3, 3), task  # the first 3 of 6 and of 4
        assert run["steps"] == 1 and math.isfinite(run["final_loss"]), task
    assert info.counts[("Train", "action")] == 6  # the files hold more than the limit took


def test_the_limit_keeps_the_first_questions_of_each_split_and_the_whole_files_vocabulary(sandbox, runner):
    """`--limit N` at the reader: each split's first N questions, in file order, their frames found by key in the
    prepared store; the vocabulary (and so the model) is that of the whole files."""
    from repro.datasets.prepare import feature_store_dir
    from repro.datasets.tgif import read_questions
    from repro.families.psac.build import paper_sizes
    from repro.families.psac.data import load_task

    info = write_psac_paper_fixtures(sandbox / "data", train=6, test=4)
    assert runner.invoke(app, ["prepare", "tgif-qa"]).exit_code == 0
    store = feature_store_dir("tgif-qa") / "resnet.store"
    sizes = paper_sizes()
    for task in ("action", "transition", "count", "frameqa"):
        whole_vocab, whole = load_task(info.questions, task, sizes, store=store)
        vocab, limited = load_task(info.questions, task, sizes, store=store, limit=3)
        assert vocab == whole_vocab
        for split, n in (("Train", 6), ("Test", 4)):
            assert len(whole[split]) == n and len(limited[split]) == 3
            assert limited[split].questions == read_questions(info.questions / f"{split}_{task}_question.csv")[:3]
            item = limited[split][2]
            assert item["video"].shape == (sizes["frames"], 2048) and item["video"].abs().sum() > 0


def test_the_word_table_at_paper_scale_is_glove_6b(sandbox):
    """The official code's frozen word table: each vocabulary word's GloVe 6B vector, zeros for <pad>, <unk> and a
    word GloVe lacks; without the file, one line naming the download."""
    from repro.datasets.tgif import read_questions
    from repro.errors import ReproError
    from repro.families.psac.data import build_vocab, glove_table
    from tests.families.psac.paper_fixtures import NOT_IN_GLOVE

    info = write_psac_paper_fixtures(sandbox / "data")
    vocab = build_vocab("action", read_questions(info.questions / "Total_action_question.csv"))
    table = glove_table(vocab.words, 300)
    assert table.shape == (len(vocab.words), 300)
    assert NOT_IN_GLOVE in vocab.words and table[vocab.words[NOT_IN_GLOVE]].abs().sum() == 0
    assert table[0].abs().sum() == 0 and table[1].abs().sum() == 0  # <pad>, <unk>
    np.testing.assert_allclose(table[vocab.words["the"]].numpy(), info.glove["the"], atol=1e-5)
    (info.root / "glove-6b" / "glove.6B.300d.txt").unlink()
    with pytest.raises(ReproError, match="repro download glove-6b"):
        glove_table(vocab.words, 300)
