"""TGIF-QA readers on the real question files (shared/data/tgif-qa) and on a written sample."""

from __future__ import annotations

import pytest

from repro.datasets import tgif
from repro.errors import ReproError
from repro.paths import REPO_DIR

REAL = REPO_DIR.parent / "shared" / "data" / "tgif-qa"  # the real files, in the shared folder beside the checkout
needs_real = pytest.mark.skipif(not (REAL / "Test_action_question.csv").is_file(), reason="real TGIF-QA files absent")


@needs_real
def test_real_test_files_read_with_their_official_layouts():
    action = tgif.read_questions(REAL / "Test_action_question.csv")
    assert len(action) == 2274 and len(action[0].candidates) == 5 and 0 <= action[0].label <= 4
    frameqa = tgif.read_questions(REAL / "Test_frameqa_question.csv")
    assert len(frameqa) == 13691 and {q.type for q in frameqa} <= {0, 1, 2, 3}
    count = tgif.read_questions(REAL / "Test_count_question.csv")
    labels = {q.label for q in count}
    assert labels == {0, 2, 3, 4, 5, 6, 7, 8, 9, 10}  # no 1 in the files: 0 stands where 1 is expected


@needs_real
def test_statistics_test_split_matches_table_1_and_missing_files_are_marked(monkeypatch):
    monkeypatch.setenv("REPRO_TGIF_DIR", str(REAL))
    cells = tgif.statistics()["cells"]
    printed = {"action": (2274, 614), "transition": (6232, 4881), "count": (3554, 2580), "frameqa": (13691, 10028)}
    for task, (qa, gifs) in printed.items():
        cell = cells[task]["test"]
        assert cell["qa_pairs"] == qa
        assert cell["distinct"]["question"] == gifs  # the printed GIF column counts distinct questions
    assert cells["action"]["test"]["distinct"]["gif_name"] == 2274  # not the 614 printed
    assert cells["frameqa"]["test"]["distinct"]["key"] == 7132
    assert not cells["transition"]["train"]["present"] and not cells["frameqa"]["total"]["present"]
    assert cells["action"]["total"]["qa_pairs"] == 22749 and cells["action"]["total"]["distinct"]["question"] == 3851


def test_reader_checks_the_header_and_tokenizes_like_the_paper(tmp_path):
    path = tmp_path / "Test_count_question.csv"
    path.write_text("gif_name\tquestion\tanswer\tvid_id\tkey\ng1\tHow many times does he nod ?\t3\tCOUNT1\t7\n")
    (q,) = tgif.read_questions(path)
    assert (q.task, q.key, q.label) == ("count", 7, 3)
    assert tgif.tokenize(q.question) == ["how", "many", "times", "does", "he", "nod"]
    bad = tmp_path / "Test_action_question.csv"
    bad.write_text("gif_name\tquestion\tanswer\n")
    with pytest.raises(ReproError, match="official action layout"):
        tgif.read_rows(bad)
    with pytest.raises(ReproError, match="unknown TGIF-QA task"):
        tgif.file_name("Train", "trans")
