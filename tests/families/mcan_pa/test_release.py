"""Tables I-III at the smoke scale: data generated in the releases' layouts, read by the real readers,
run by the paper's protocol; the test files pass `repro submit --dry-run`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from repro import specs
from repro.cli import app
from repro.datasets.vqa import prepare_vqa, read_cocoqa_split
from repro.families.mcan_pa.official import OfficialConfig, generate_official
from repro.paths import REPO_DIR

TINY = OfficialConfig(train_images=4, val_images=2, test_images=4, questions_per_image=3, vg_questions_per_image=1)


def _sandbox_with(sandbox, *names):
    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{name}.yaml", folder)
    specs.clear_cache()
    return sandbox


@pytest.mark.parametrize(
    "dataset, prefix, task_type",
    [("vqa2", "v2_OpenEnded_mscoco", "Open-Ended"), ("vqa1", "OpenEnded_mscoco", "OpenEnded")],
)
def test_vqa_release_layout(tmp_path, dataset, prefix, task_type):
    root = generate_official(tmp_path / "r", dataset, TINY)
    folder = root / dataset
    test = json.loads((folder / f"{prefix}_test2015_questions.json").read_text())
    dev = json.loads((folder / f"{prefix}_test-dev2015_questions.json").read_text())
    assert test["task_type"] == task_type and test["data_subtype"] == "test2015"
    dev_ids, test_ids = ({q["question_id"] for q in f["questions"]} for f in (dev, test))
    assert dev_ids and dev_ids < test_ids
    # the test answers are only where a server keeps them, never beside the release files
    assert not list(folder.glob("*test*annotations*"))
    server = json.loads((root / "server" / "test2015_annotations.json").read_text())["annotations"]
    assert {a["question_id"] for a in server} == {q["question_id"] for q in test["questions"]}

    prepared = prepare_vqa(dataset, folder, tmp_path / "p", vg_dir=root / "vg-qa")
    stats = json.loads((prepared / "manifest.json").read_text())["stats"]
    assert {"train", "val", "test", "test-dev", "vg"} <= set(stats)
    assert stats["test"]["answers"] is False and stats["vg"]["answers"] is True


def test_cocoqa_release_layout_is_what_the_reader_takes(tmp_path):
    root = generate_official(tmp_path / "r", "coco-qa", TINY)
    for split in ("train", "test"):
        questions = read_cocoqa_split(root / "coco-qa" / split)
        assert questions and {q.answer_type for q in questions} <= {"object", "number", "color", "location"}
        lines = (root / "coco-qa" / split / "questions.txt").read_text().splitlines()
        assert all(line == line.lower() and not line.endswith("?") for line in lines)
        assert all(len(q.answer.split()) == 1 and not q.answer.isdigit() for q in questions)
    assert (root / "features" / "train2014.store").is_dir() and (root / "features" / "val2014.store").is_dir()


def test_vqa1_smoke_fills_both_splits_and_its_files_pass_submit(sandbox, runner):
    _sandbox_with(sandbox, "mcan-pa-table2-vqa1")
    out = runner.invoke(app, ["run", "table2-vqa1", "--scale", "smoke"], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    record = json.loads((sandbox / "results/mcan-pa/mcan-pa-table2-vqa1/MCAN+PA_ours.smoke.json").read_text())
    assert len(record["metrics"]) == 8  # Y/N, Num, Other, All on test-dev and on test-std
    assert all(0.0 <= v <= 100.0 for v in record["metrics"].values())
    assert record["extra"]["train"][0]["steps"] > 0

    # the records name their files portably (relative to the results root, the data dir as a variable)
    folder = sandbox / "results/mcan-pa/mcan-pa-table2-vqa1"
    for stored in (record, json.loads((folder / "seeds/MCAN+PA_ours.smoke.seed0.json").read_text())):
        words = [w for text in _strings(stored) for w in text.split()]
        # (a lone "/" is prose: lscpu's "Enhanced / Automatic IBRS" in the environment's collect_env report)
        paths = [w for w in words if (w.startswith("/") and w != "/") or str(sandbox) in w]
        assert not paths, "an absolute path in a record"
    assert record["extra"]["predictions"] == [
        f"mcan-pa/mcan-pa-table2-vqa1/predictions/MCAN+PA_ours.smoke.seed0.{name}.json"
        for name in ("test-dev2015", "test2015")
    ]
    stored_commands = [c for per_file in record["extra"]["submit"][0].values() for c in per_file]
    assert all(" --questions $REPRO_DATA_DIR/" in c for c in stored_commands)

    commands = re.findall(r"`(repro submit [^`]+)`", out.output)
    assert sorted(c.split()[2] for c in commands) == ["vqa1-test", "vqa1-test-dev"]
    for command in commands:  # the hint names this machine's files
        assert (folder / "predictions").samefile(Path(command.split()[4]).parent)
        assert Path(command.split()[6]).is_file() and "$" not in command
    for command in commands:
        done = runner.invoke(app, [*command.split()[1:], "--dry-run"])
        assert done.exit_code == 0 and "passed every check" in done.output, done.output
    # the test-dev file is not a test2015 submission
    dev, test = sorted(commands, key=lambda c: c.split()[2])[::-1]
    wrong = runner.invoke(app, ["submit", "vqa1-test", "--predictions", dev.split()[4], *test.split()[5:], "--dry-run"])
    assert wrong.exit_code == 2 and "missing" in wrong.output


def _strings(value):
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_cocoqa_smoke_scores_types_and_wups(sandbox, runner):
    from repro.metrics import wordnet

    if wordnet.locate() is None:
        pytest.skip("WordNet 3.0 is not installed (make wordnet): COCO-QA's WUPS columns need it")
    _sandbox_with(sandbox, "mcan-pa-table1-cocoqa")
    out = runner.invoke(app, ["run", "table1-cocoqa", "--scale", "smoke"], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    record = json.loads((sandbox / "results/mcan-pa/mcan-pa-table1-cocoqa/MCAN+PA_ours.smoke.json").read_text())
    assert record["split"] == "test"
    assert set(record["metrics"]) == {"Accuracy", "Object", "Number", "Color", "Location", "W@0.9", "W@0.0"}
    m = record["metrics"]
    assert m["W@0.0"] >= m["W@0.9"] >= m["Accuracy"]  # WUPS only adds partial credit to exact matches


def test_table4_vlbert_row_runs_with_its_own_sizes(sandbox, runner):
    _sandbox_with(sandbox, "mcan-pa-table4-pretraining")
    out = runner.invoke(app, ["run", "table4-pretraining", "--scale", "smoke", "--rows", "VL-BERT_BASE+PA†"])
    assert out.exit_code == 0, out.output
    folder = sandbox / "results/mcan-pa/mcan-pa-table4-pretraining"
    record = json.loads((folder / "VL-BERT_BASE+PA-dagger.smoke.json").read_text())
    assert set(record["metrics"]) == {"test-dev All"} and 0 <= record["metrics"]["test-dev All"] <= 100
    assert record["extra"]["train"][0]["steps"] > 0
