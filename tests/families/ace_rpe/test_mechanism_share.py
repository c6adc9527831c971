"""The README's share of items that need relative position, per column, is the one the generators give."""

import pytest

from repro.families.ace_rpe.synthetic import GeneratorConfig, named_objects, retrieval_share
from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig, generate_tasks, task_share
from repro.specs import resolve, scale_settings
from tests.families.mechanism_table import readme_rows, specs_with_claims

README = "repro/families/ace_rpe/README.md"
RETRIEVAL = ("ace-rpe-table1-pe", "ace-rpe-table8-mode")  # one generator, one README row per data set and direction
TASKS = (
    "ace-rpe-table2-pe",
    "ace-rpe-table5-grounding",
    "ace-rpe-control-relation",
    "ace-rpe-control-neighbours",
    "ace-rpe-control-anchors",
)
RETRIEVAL_NAMES = {"flickr30k": "flickr30k", "coco-retrieval": "coco"}
TASK_NAMES = {"vqa2": "vqa", "snli-ve": "ve", "nlvr2": "nlvr"}


def settings(ident: str) -> dict:
    return scale_settings(resolve(ident), "synthetic")


def task_key(column) -> str:
    if column.metric == "grounding":
        return f"grounding {column.split}"
    return f"{TASK_NAMES[column.dataset]} {'test' if column.split == 'test-p' else column.split}"


@pytest.mark.slow
def test_readme_shares_are_the_generators():
    assert set(RETRIEVAL) | set(TASKS) == specs_with_claims("ace-rpe")
    (cfg,) = {GeneratorConfig.from_mapping(settings(ident)["generator"]) for ident in RETRIEVAL}
    recall = retrieval_share(cfg)
    expected = {}
    for ident in RETRIEVAL:
        for column in resolve(ident).columns:
            if column.metric == "recall":
                direction = column.key.split("@")[0].upper()
                label = f"1, 8: {' '.join(column.name.split()[:2])}"
                expected[label] = recall[f"{RETRIEVAL_NAMES[column.dataset]} {direction}"]
            else:  # FLOPs, and Table 8's NLVR2 columns (no task_generator at this scale)
                assert column.metric == "flops" or "task_generator" not in settings(ident)
    for ident in TASKS:
        spec = resolve(ident)
        shares = task_share(TaskGeneratorConfig.from_mapping(settings(ident)["task_generator"]))
        for column in spec.columns:
            expected[f"{spec.table.removeprefix('Table ')}: {column.name}"] = shares[task_key(column)]
    assert readme_rows(README) == expected


def test_named_objects():
    assert named_objects("a red square left of a blue circle") == [("red", "square"), ("blue", "circle")]
    assert named_objects("the green triangle above the circle") == [("green", "triangle")]


def test_shares_follow_the_settings():
    small = {"image_size": 36, "grid": 3, "objects": 2, "train_items": 4, "test_items": 24}
    shares = task_share(TaskGeneratorConfig(**small, ve_relation_only=True))
    assert shares["ve dev"] == (24, 24)  # no neutral statement: where the shapes are decides every one
    shares = task_share(TaskGeneratorConfig(**small, absent_share=1.0))
    n, needing = shares["nlvr dev"]
    assert 0 < needing < n  # the true statements; every false one names an absent shape
    assert shares["grounding val"] == (24, 0)  # scenes of distinct shapes: the name picks the object
    recall = retrieval_share(GeneratorConfig(image_size=36, grid=3, objects=2, test_images=20, twins=False))
    assert recall["coco TR"][0] == 20 and recall["coco IR"][0] == 20 * 5


def test_tasks_without_images_are_the_same_files(tmp_path):
    cfg = TaskGeneratorConfig(image_size=36, grid=3, objects=2, train_items=6, test_items=4, absent_share=0.5)
    drawn, counted = {}, {}
    generate_tasks(tmp_path / "drawn", cfg, drawn)
    generate_tasks(tmp_path / "counted", cfg, counted, images=False)
    assert drawn == counted and drawn
    files = sorted(p.relative_to(tmp_path / "counted") for p in (tmp_path / "counted").rglob("*") if p.is_file())
    assert files and all(not str(p).startswith("images") for p in files)
    for p in files:
        assert (tmp_path / "drawn" / p).read_bytes() == (tmp_path / "counted" / p).read_bytes(), p
    assert len(list((tmp_path / "drawn" / "images").rglob("*.*"))) == len(drawn)
