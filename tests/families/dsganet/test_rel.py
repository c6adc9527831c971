"""The "Rel." subset from Visual Genome's top relationships (the paper's rule) and its accuracy from predictions."""

import json

import pytest

from repro.families.dsganet import rel


def _vg(tmp_path):
    rels = ["on"] * 5 + ["is"] * 4 + ["In Front  Of"] * 3 + ["has"] * 2 + ["have been"] * 2 + ["riding"]
    images = [{"image_id": 1, "relationships": [{"predicate": p} for p in rels[:8]]}]
    images.append({"image_id": 2, "relationships": [{"predicate": p} for p in rels[8:]]})
    path = tmp_path / "relationships.json"
    path.write_text(json.dumps(images))
    return path


def test_top_relationships_less_non_relational_words(tmp_path):
    path = _vg(tmp_path)
    # top 5 by count: on 5, is 4, in front of 3, has 2, have been 2 -> "is" and "have been" dropped
    assert rel.vg_relationship_phrases(path, top=5) == ("on", "in front of", "has")
    assert "riding" in rel.vg_relationship_phrases(path, top=6)


def test_rel_subset_and_accuracy_from_per_item_scores(tmp_path):
    questions = [
        {"question_id": 1, "question": "What is on the table?"},
        {"question_id": 2, "question": "What is in front of the car?"},
        {"question_id": 3, "question": "Is it front-facing?"},  # "front" alone is no phrase
        {"question_id": 4, "question": "What color is the bus?"},  # only "is", dropped as non-relational
        {"question_id": 5, "question": "Does the man have a hat?"},  # "have" is not "has"
    ]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps({"questions": questions}))
    subset = rel.rel_questions(path, ("on", "in front of", "has"))
    assert subset == {1, 2}
    acc, n = rel.rel_accuracy({1: 100.0, 2: 30.0, 3: 0.0, 4: 100.0}, subset)
    assert n == 2 and acc == pytest.approx(65.0)
    assert rel.rel_questions(path, ()) == set()
