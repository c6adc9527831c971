"""The "Rel." subset of DSGANet (Sec. V-D): the questions that name a spatial relationship, and the VQA
accuracy on them (the "Rel." column of Tables VI and VII).

The paper's rule takes the top-100 relationships of Visual Genome less the words unrelated to relations;
at paper scale that list is computed from `relationships.json` when it is downloaded, otherwise (and on the
generated questions) the fixed `REL_PHRASES` stand in.
"""

from __future__ import annotations

import json
from pathlib import Path

from repro.errors import ReproError
from repro.paths import data_dir

# The "Rel." subset (Sec. V-D): questions with one of the top-100 Visual Genome relationship words or phrases,
# less non-relational words. The paper does not print its list; these are frequent VG spatial predicates.
REL_PHRASES = (
    "on",
    "in",
    "behind",
    "in front of",
    "next to",
    "near",
    "above",
    "under",
    "below",
    "beside",
    "on top of",
    "inside",
    "by",
    "beneath",
    "over",
    "against",
    "along",
    "across",
    "between",
    "around",
    "left of",
    "right of",
    "underneath",
    "outside",
    "on side of",
    "at",
)

# The paper's rule (Sec. V-D): the top-100 relationships of Visual Genome, less the words or phrases unrelated
# to relations ("is, am, are, have been, etc."): forms of "be" and the perfect "have/has/had been" are dropped;
# "has"/"have" stay (possession is a Visual Genome relationship).
REL_TOP = 100
NON_RELATIONAL = ("is", "am", "are", "was", "were", "be", "been", "being", "have been", "has been", "had been")
VG_RELATIONSHIPS = (
    "relationships.json"  # Visual Genome 1.4, <data_dir>/visual-genome (`repro download vg-relationships`)
)


def vg_relationship_phrases(path: Path, top: int = REL_TOP) -> tuple[str, ...]:
    """The `top` most frequent Visual Genome predicates (lower case, spaces collapsed; ties in first-seen
    order), less NON_RELATIONAL: the paper's list of relationship words or phrases."""
    from collections import Counter

    try:
        images = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReproError(f"{path}: not a readable Visual Genome relationships file ({exc})") from None
    if not isinstance(images, list):
        raise ReproError(f"{path}: expected a list of images with 'relationships'")
    counts: Counter[str] = Counter()
    for image in images:
        for rel in (image.get("relationships") or []) if isinstance(image, dict) else []:
            predicate = " ".join(str(rel.get("predicate", "")).lower().split()) if isinstance(rel, dict) else ""
            if predicate:
                counts[predicate] += 1
    return tuple(p for p, _ in counts.most_common(top) if p not in NON_RELATIONAL)


def rel_phrases(scale: str) -> tuple[tuple[str, ...], str]:
    """The phrases of the "Rel." subset and where they come from: at paper scale the Visual Genome rule when
    relationships.json is downloaded, else (and for generated questions) the fixed REL_PHRASES."""
    from repro.datasets.vqa import find_file

    folder = data_dir() / "vg-relationships"
    path = find_file(folder, VG_RELATIONSHIPS) if scale == "paper" and folder.is_dir() else None
    if path is not None:
        return vg_relationship_phrases(path), str(path)
    return REL_PHRASES, "REL_PHRASES"


def rel_questions(questions_file: Path, phrases: tuple[str, ...] = REL_PHRASES) -> set[int]:
    """Question ids of the "Rel." subset: questions that contain one of `phrases` as whole words."""
    import re

    if not phrases:
        return set()
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True)) + r")\b", re.IGNORECASE
    )
    questions = json.loads(Path(questions_file).read_text())["questions"]
    return {int(q["question_id"]) for q in questions if pattern.search(q["question"])}


def rel_accuracy(per_item: dict, subset: set[int]) -> tuple[float, int]:
    """Mean per-question score (VQA accuracy, percent) over the predicted questions in the Rel. subset."""
    scores = [per_item[q] for q in per_item if int(q) in subset]
    return (sum(scores) / len(scores) if scores else float("nan")), len(scores)
