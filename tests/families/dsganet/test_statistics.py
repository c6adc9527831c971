"""Tables II and III counted from files in the official layouts (the smoke-scale fixtures), by hand."""

import json

import pytest

from repro.cli import app
from repro.datasets import gqa, vqa
from repro.errors import ReproError
from repro.families.dsganet.synthetic import write_stats_fixture


def test_vqa2_counts_images_questions_answers(tmp_path):
    root = write_stats_fixture("vqa2", tmp_path / "vqa2")
    s = vqa.statistics("vqa2", root)["splits"]
    assert {k: s["train"][k] for k in ("images", "questions", "answers")} == {
        "images": 4,
        "questions": 12,
        "answers": 120,
    }
    assert {k: s["val"][k] for k in ("images", "questions", "answers")} == {"images": 2, "questions": 6, "answers": 60}
    # test is all of test2015; the test-dev2015 file (a part of it) is not counted again; no public answers
    assert s["test"]["images"] == 3 and s["test"]["questions"] == 6 and "answers" not in s["test"]
    assert s["all"]["images"] == 9 and s["all"]["questions"] == 24 and "answers" not in s["all"]


def test_gqa_counts_images_questions_vocabulary(tmp_path):
    root = write_stats_fixture("gqa", tmp_path / "gqa")
    s = gqa.statistics(root)["splits"]
    # train words: is the cup red what on table who wearing hat color car behind tree (a question asked twice)
    assert (s["train"]["images"], s["train"]["questions"], s["train"]["vocab"]) == (3, 6, 14)
    assert (s["val"]["images"], s["val"]["questions"], s["val"]["vocab"]) == (2, 4, 11)
    assert (s["test-dev"]["images"], s["test-dev"]["questions"], s["test-dev"]["vocab"]) == (1, 3, 8)
    assert (s["test"]["images"], s["test"]["questions"], s["test"]["vocab"]) == (2, 2, 7)
    assert (s["all"]["images"], s["all"]["questions"], s["all"]["vocab"]) == (8, 15, 30)  # union of the words


def test_missing_split_leaves_all_empty_and_bad_file_is_one_error(tmp_path):
    root = write_stats_fixture("gqa", tmp_path / "gqa")
    (root / gqa.BALANCED_FILES["test"]).unlink()
    s = gqa.statistics(root)["splits"]
    assert not s["test"]["present"] and "questions" not in s["all"]
    (root / gqa.BALANCED_FILES["val"]).write_text(json.dumps([1, 2]))
    with pytest.raises(ReproError, match="val_balanced_questions.json"):
        gqa.statistics(root)


def test_smoke_run_fills_table2_and_paper_scale_needs_the_downloads(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    result = runner.invoke(app, ["run", "dsganet-table2-vqa2-stats", "--scale", "smoke"])
    assert result.exit_code == 0, result.output
    record = json.loads(next((tmp_path / "results").rglob("All*.json")).read_text())
    assert record["metrics"] == {"#Images": 9.0, "#Questions": 24.0}
    paper = runner.invoke(app, ["run", "dsganet-table3-gqa-stats"])
    assert paper.exit_code != 0 and "repro download gqa" in paper.output and "Traceback" not in paper.output
