"""VQA's evaluation servers from a run's side: the test file and its submit commands, test2015 split into the
server's phases, and generated data scored as the server scores it (with and without answer types)."""

from __future__ import annotations

import json

import pytest

from repro.datasets import vqa_server


def test_a_test_file_is_the_servers_format_with_a_submit_command_per_target(tmp_path):
    out = tmp_path / "predictions" / "MCAN.smoke.seed0.test2015.json"
    targets = vqa_server.TEST_FILES["vqa2"][("test", "test2015")]
    commands = vqa_server.write_test_file(out, {7: "yes", 3: "2"}, targets)
    assert json.loads(out.read_text()) == [{"question_id": 7, "answer": "yes"}, {"question_id": 3, "answer": "2"}]
    assert commands == [f"repro submit {t} --predictions {out}" for t in ("vqa2-test-dev", "vqa2-test-std")]
    questions = tmp_path / "v2_OpenEnded_mscoco_test2015_questions.json"
    [dev, _] = vqa_server.write_test_file(out, {7: "yes"}, targets, questions)
    assert dev.endswith(f"--predictions {out} --questions {questions}")


def test_test2015_splits_into_the_servers_phases():
    test = {1: "a", 2: "b", 3: "c", 4: "d"}
    assert vqa_server.phases(test, {2, 4}) == {"test-dev": {2: "b", 4: "d"}, "test-std": {1: "a", 3: "c"}}
    own = {4: "x", 2: "y"}  # VQA v1: test-dev2015 predicted from its own file
    assert vqa_server.phases(test, {2, 4}, own) == {"test-dev": own, "test-std": {1: "a", 3: "c"}}


def test_generated_answers_scored_per_phase_with_and_without_answer_types():
    def gold(answer: str, **types) -> dict:
        return {"answers": [{"answer": answer}] * 10, **types}

    typed = {
        1: gold("yes", answer_type="yes/no", question_type="is"),
        2: gold("2", answer_type="number", question_type="how many"),
    }
    scores = vqa_server.server_scores({"test-dev": {1: "yes"}, "test-std": {2: "3"}}, typed)
    dev, std = scores["test-dev"], scores["test-std"]
    assert dev["overall"] == dev["yes/no"] == pytest.approx(100.0)
    assert std["overall"] == 0.0 and "per_question_type" in std
    plain = {q: {"answers": g["answers"]} for q, g in typed.items()}  # answers alone: the overall score only
    scores = vqa_server.server_scores({"test-dev": {1: "yes", 2: "2"}}, plain)
    assert scores == {"test-dev": {"overall": pytest.approx(100.0)}}
