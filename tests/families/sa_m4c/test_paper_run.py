"""sa-m4c at paper scale end to end on files in the released layouts (`paper_fixtures.py`): the TextVQA questions,
MMF's imdb `.npy` files, `detectron.lmdb` and `textvqa.ocr_en` OCR-box features, SA-M4C's Google OCR imdb files
and ResNeXt LMDBs, the answer vocabulary, BERT and FastText; converted by the run itself (`prepare.paper_data`),
trained with `--limit N`, val scored and the test answers written where `repro submit --dry-run` accepts them."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest

from repro import specs
from repro.cli import app
from repro.paths import REPO_DIR

pytest.importorskip("lmdb")

from tests.families.sa_m4c.paper_fixtures import write_sa_m4c_paper_fixtures  # noqa: E402

SPEC = "sa-m4c-table1-textvqa"
ROWS = "6 M4C†,11 SA-M4C (ours)"  # M4C on MMF's ResNet-101 objects and SA-M4C on its release's ResNeXt-152 ones


def quick(info) -> list[str]:
    """One epoch of batch 4, and the MMT as wide as the fixtures' BERT (the released one is BERT-base, 768)."""
    bert = info.bert
    return [
        "recipe.epochs=1",
        "recipe.batch_size=4",
        "recipe.eval_batch_size=4",
        "recipe.num_workers=0",
        f"sizes.hidden_size={bert['hidden_size']}",
        f"sizes.heads={bert['heads']}",
        f"sizes.ff_size={bert['ff_size']}",
        "sizes.text_bert_layers=1",
        "sizes.decode_steps=3",
    ]


@pytest.fixture
def t1_sandbox(sandbox):
    folder = sandbox / "experiments" / "sa-m4c"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "sa-m4c" / f"{SPEC}.yaml", folder)
    specs.clear_cache()
    return sandbox


def test_the_released_layouts_convert_into_what_a_row_reads(t1_sandbox):
    """Each (OCR system, detector) of the fixtures converts: Rosetta-en tokens from MMF's imdb files with the
    `textvqa.ocr_en` OCR-box features, Google OCR from SA-M4C's imdb files; every question's image has its OCR
    tokens and both feature stores."""
    from repro.data.store import FeatureStore
    from repro.families.sa_m4c.data import OCR_FILES, image_key, read_ocr
    from repro.families.sa_m4c.prepare import missing_input, prepare_paper, read_imdb

    info = write_sa_m4c_paper_fixtures(t1_sandbox / "data", dim=16, models=False)
    for ocr, det in (("rosetta-en", "resnet-101"), ("google", "resnet-101"), ("google", "resnext-152")):
        path, command = missing_input(ocr, det)  # only BERT and FastText are left out
        assert (path.name, command) == ("pytorch_model.bin", "repro download bert-base-uncased"), (ocr, det)
        root = prepare_paper(ocr, det)
        for split in ("train", "val", "test"):
            tokens = read_ocr(root / OCR_FILES[ocr].format(split=split))
            assert sorted(tokens) == sorted(info.images[split]), (ocr, split)
            for kind in ("objects", "ocr"):
                store = FeatureStore.open(root / f"{split}.{kind}.store")
                assert sorted(store.image_ids.tolist()) == sorted(image_key(i) for i in info.images[split])
                assert store.dim == 16
            image = info.images[split][0]
            regions = FeatureStore.open(root / f"{split}.ocr.store").get(image_key(image))
            assert regions["count"] == len(tokens[image][0])  # one OCR-box feature per token, in token order
    annotations = t1_sandbox / "data" / "textvqa-mmf" / "textvqa" / "defaults" / "annotations"
    imdb = read_imdb(annotations / "imdb_val_ocr_en.npy")
    assert [r["question_id"] for r in imdb] == info.questions["val"]
    converted = read_ocr(prepare_paper("rosetta-en", "resnet-101") / OCR_FILES["rosetta-en"].format(split="val"))
    first = imdb[0]
    assert converted[first["image_id"]][0] == first["ocr_tokens"]
    np.testing.assert_allclose(converted[first["image_id"]][1], first["ocr_normalized_boxes"], atol=1e-6)


@pytest.mark.slow  # two rows, each converted, trained and decoded: about 30 s on 2 cores
def test_paper_scale_rows_run_with_a_limit_and_their_test_answers_pass_the_submit_checks(t1_sandbox, runner):
    pytest.importorskip("fasttext")  # M4C's OCR word vectors are a FastText model (`pip install 'repro[sa-m4c]'`)
    info = write_sa_m4c_paper_fixtures(t1_sandbox / "data")
    args = ["run", SPEC, "--scale", "paper", "--rows", ROWS, "--limit", "6", *quick(info)]
    plan = runner.invoke(app, [*args, "--dry-run"], env={"COLUMNS": "200"})
    assert plan.exit_code == 0, plan.output
    lines = plan.output.splitlines()
    assert "missing" not in plan.output, plan.output
    assert all(any(row in line and "ready" in line for line in lines) for row in ROWS.split(",")), plan.output

    out = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    results = next((t1_sandbox / "results" / "variants").glob(f"*/sa-m4c/{SPEC}"))
    for slug in ("6_M4C-dagger", "11_SA-M4C_ours"):
        record = json.loads((results / "seeds" / f"{slug}.seed0.json").read_text())
        assert record["scale"] == "paper" and record["split"] == "val"
        assert record["variant"]["limit"] == 6 and record["variant"]["partial"] is True
        accuracy = record["metrics"]["Accu. on val"]
        assert math.isfinite(accuracy) and 0.0 <= accuracy <= 100.0
        assert record["training"]["steps"] == 2  # the first 6 of 8 train questions, batch 4
        assert math.isfinite(record["training"]["final_loss"])
        predictions = results / "predictions" / f"{slug}.seed0.test.partial.json"
        assert record["predictions"] == [str(predictions.relative_to(results.parent.parent))]
        answers = json.loads(predictions.read_text())
        assert sorted(a["question_id"] for a in answers) == info.questions["test"]  # 4 test questions <= the limit

    said = " ".join(out.output.split())
    assert said.count("only the server scores test; submit with") == 2  # the file's split, not the spec's (val)
    commands = re.findall(r"`(repro submit [^`]+)`", said)
    assert len(commands) == 2 and all(c.split()[2] == "textvqa-test" for c in commands), out.output
    for command in commands:
        done = runner.invoke(app, [*command.split()[1:], "--dry-run"], env={"COLUMNS": "200"})
        assert done.exit_code == 0 and "passed every check" in done.output, done.output
        assert "a submission of it is refused" in " ".join(done.output.split())  # partial: never sent for real
