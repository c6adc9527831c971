"""Generated VQA / SNLI-VE / NLVR2 / RefCOCO+ files in ALBEF's layouts, their readers, Grad-CAM grounding,
and `repro run` at smoke scale filling Table 2's and Table 5's columns with a submittable VQA file."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from repro import specs
from repro.cli import app
from repro.errors import ReproError
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.columns import spec_tasks
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.data import tokenizer
from repro.families.ace_rpe.synthetic import SHAPES
from repro.families.ace_rpe.synthetic_tasks import TaskGeneratorConfig, _name, generate_tasks
from repro.families.ace_rpe.tasks import gradcam, score_heatmaps
from repro.families.ace_rpe.tasks_data import NLVRData, Refer, TaskCollate, VEData, VQATest, VQATrain, read_dets
from repro.metrics.grounding import iou
from repro.paths import REPO_DIR, data_dir, resolve_command
from repro.train.stage_plan import read_stages
from tests.families.ace_rpe.tiny import TINY_SIZES, tiny_batch


def test_generated_task_files_are_albef_layouts_the_readers_accept(tmp_path):
    root = generate_tasks(tmp_path, TaskGeneratorConfig.from_mapping({"seed": 3, "train_items": 6, "test_items": 3}))
    tok = tokenizer(root / "vocab")
    vqa = VQATrain(root / "vqa_train.json", root, 32)
    item = vqa[0]
    assert all(a.endswith("[SEP]") for a in item["answers"]) and sum(item["weights"]) == pytest.approx(1.0)
    test = VQATest(root / "vqa_test.json", root, 32)
    server = json.loads((root / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json").read_text())["questions"]
    assert [q["question_id"] for q in server] == [e["question_id"] for e in test.entries] and len(server) == 6
    ve = VEData(root / "ve_train.json", root, 32)
    assert sorted({ve[i]["label"] for i in range(len(ve))}) == [0, 1, 2] and ve.entries[0]["image"].count(".") == 0
    nlvr = NLVRData(root / "nlvr_dev.json", root, 32)
    assert nlvr[0]["image"][0].shape == (3, 32, 32) and nlvr[0]["label"] in (0, 1)
    batch = TaskCollate(tok, 16)([vqa[0], vqa[1]])
    assert batch["answer_owner"].tolist() == sorted(batch["answer_owner"].tolist())
    assert tok.unk_token_id not in batch["input_ids"] and tok.unk_token_id not in batch["answer_ids"]
    # RefCOCO+: every test ref has its split, gold box and image size; a proposal covers the gold box
    refer, dets = Refer(root / "refcoco+"), read_dets(root / "refcoco+" / "dets.json")
    tests = json.loads((root / "refcoco+_test.json").read_text())
    assert {refer.refs[e["ref_id"]][0] for e in tests} == {"testA", "testB"}
    for entry in tests:
        _, box, image_id, _ = refer.refs[entry["ref_id"]]
        assert max(iou(box, d[:4]) for d in dets[str(image_id)]) >= 0.5


def test_task_readers_refuse_what_is_not_albefs_layout(tmp_path):
    (tmp_path / "ve.json").write_text(json.dumps([{"image": "1", "sentence": "a dog", "label": "maybe"}]))
    with pytest.raises(ReproError, match="label 'maybe' is not one of"):
        VEData(tmp_path / "ve.json", tmp_path, 32)
    (tmp_path / "nlvr.json").write_text(json.dumps([{"images": ["a.png"], "sentence": "x", "label": "True"}]))
    with pytest.raises(ReproError, match="needs two images"):
        NLVRData(tmp_path / "nlvr.json", tmp_path, 32)
    (tmp_path / "refs(unc).p").write_bytes(pickle.dumps([{"ref_id": 1}]))
    (tmp_path / "instances.json").write_text(json.dumps({"images": [], "annotations": []}))
    with pytest.raises(ReproError, match="refer toolkit's layout"):
        Refer(tmp_path)


def test_gradcam_is_the_itm_gradient_weighted_cross_attention_on_the_patch_grid():
    torch.manual_seed(0)
    model = build_model(ALBEFConfig(arch="albef"), TINY_SIZES, task="retrieval").eval()
    batch = tiny_batch()
    heat = gradcam(model, batch, layer=1)
    assert heat.shape == (4, 4, 4) and (heat >= 0).all() and heat.sum() > 0
    assert not model.fusion.layer[1].crossattention.self.save_attention  # the hook is off again
    with torch.no_grad():  # recording the map does not change the ITM logits
        again = model.itm_logits(
            model.text_embeds(batch["input_ids"], batch["attention_mask"]),
            batch["attention_mask"],
            model.image_embeds(batch["image"]),
        )
    assert torch.isfinite(again).all()


def test_smoke_run_fills_the_task_columns_and_writes_a_submittable_vqa_file(sandbox, runner):
    text = (REPO_DIR / "experiments" / "ace-rpe" / "ace-rpe-table2-pe.yaml").read_text()
    grounding = (
        "  - {name: Val, metric: grounding, split: val, better: higher}\n"
        "  - {name: TestB, metric: grounding, split: testB, better: higher}\nrows:"
    )
    text = text.replace("\nrows:", "\n" + grounding, 1)
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    (folder / "ace-rpe-table2-pe.yaml").write_text(text)
    specs.clear_cache()
    out = runner.invoke(app, ["run", "ace-rpe-table2-pe", "--scale", "smoke", "--rows", "ACE-RPE + Lace"])
    assert out.exit_code == 0, out.output
    record = json.loads(
        (sandbox / "results" / "ace-rpe" / "ace-rpe-table2-pe" / "ACE-RPE_+_Lace.smoke.json").read_text()
    )
    columns = {"VQA dev", "VQA std", "SNLI-VE dev", "SNLI-VE test", "NLVR dev", "NLVR test", "Val", "TestB"}
    assert set(record["metrics"]) == columns and all(0 <= v <= 100 for v in record["metrics"].values())
    steps = record["extra"]["train"][0]
    assert all(
        steps[part]["steps"] > 0 for part in ("pretrain", "vqa", "snli-ve", "nlvr2_assign", "nlvr2", "grounding")
    )
    # the tasks train the scale's task_recipe (two epochs of the 8 items at batch 8), NLVR2's text assignment its
    # assign_recipe (one epoch of the pre-training pairs, as the pre-training's one epoch), not the tasks' count
    assert {steps[part]["steps"] for part in ("vqa", "snli-ve", "nlvr2", "grounding")} == {2}
    assert steps["nlvr2_assign"]["steps"] == steps["pretrain"]["steps"]
    # `repro run`'s progress counts each stage by the steps it planned, which are the steps it trained
    workdir = data_dir() / "runs" / "ace-rpe-table2-pe" / "smoke" / "ACE-RPE_+_Lace" / "seed0"
    planned = {name: weight for name, weight in read_stages(workdir)}
    assert list(planned) == ["pretrain", "vqa", "snli-ve", "nlvr2_assign", "nlvr2", "grounding"]
    assert planned == {part: steps[part]["steps"] for part in planned}
    (file,) = record["extra"]["predictions"]
    assert record["extra"]["vqa_model"][0][file]["model"] == "albef-ace-rpe-vqa"
    command, std = record["extra"]["submit"][0][file]
    assert command.startswith("repro submit vqa2-test-dev ") and std.startswith("repro submit vqa2-test-std ")
    assert file == "ace-rpe/ace-rpe-table2-pe/predictions/ACE-RPE_+_Lace.smoke.seed0.test2015.json"
    assert " --questions $REPRO_DATA_DIR/" in command  # stored portably, run with this machine's paths:
    args = resolve_command(command, [file]).split()[1:] + ["--dry-run"]
    submitted = runner.invoke(app, args)
    assert submitted.exit_code == 0 and "passed every check" in submitted.output, submitted.output


def test_each_table_fine_tunes_the_models_of_its_columns():
    tasks = {ident: spec_tasks(specs.resolve(ident)) for ident in ("ace-rpe-table1-pe", "ace-rpe-table5-grounding")}
    assert tasks == {"ace-rpe-table1-pe": ["retrieval"], "ace-rpe-table5-grounding": ["grounding"]}
    assert spec_tasks(specs.resolve("ace-rpe-table6-shared")) == ["retrieval", "nlvr2"]


def test_heat_on_the_named_object_picks_its_proposal_and_elsewhere_misses(tmp_path):
    """ALBEF's box selection on the generated RefCOCO+ files: heat on the gold box hits every
    reference; heat on another object's box hits none."""
    root = generate_tasks(tmp_path, TaskGeneratorConfig.from_mapping({"seed": 5, "train_items": 1, "test_items": 4}))
    refer, dets = Refer(root / "refcoco+"), read_dets(root / "refcoco+" / "dets.json")
    entries = json.loads((root / "refcoco+_val.json").read_text()) + json.loads(
        (root / "refcoco+_test.json").read_text()
    )
    ids = [e["ref_id"] for e in entries]

    def grid(box):  # at the image's resolution (the resize keeps it); sum / area^0.5 favours a tight box
        heat = torch.zeros(32, 32)
        heat[int(box[1]) : int(box[1] + box[3]), int(box[0]) : int(box[0] + box[2])] = 1
        return heat

    gold = [grid(refer.refs[r][1]) for r in ids]
    result = score_heatmaps(gold, ids, refer, dets)
    assert result.aggregate == {"overall": 100.0, "val": 100.0, "testA": 100.0, "testB": 100.0}
    others = []
    for r in ids:  # the proposal of another object (not overlapping the gold box)
        box, image_id = refer.refs[r][1], refer.refs[r][2]
        other = next(d for d in dets[str(image_id)] if d[4] > 0.5 and iou(box, d[:4]) == 0)
        others.append(grid(other))
    assert score_heatmaps(others, ids, refer, dets).aggregate["overall"] == 0.0


def _statement(text: str) -> tuple[str, str, str]:
    """("C S", relation, "C S") of "... a C S <relation> a C S"."""
    words = f" {text}".split(" a ", 1)[1].split(" ")
    return " ".join(words[:2]), " ".join(words[2:-3]), " ".join(words[-2:])


def _holds(scene, a: str, relation: str, b: str) -> bool:
    from repro.families.ace_rpe.synthetic import _relation

    named = [(x, y) for x in scene for y in scene if x is not y and _name(x) == a and _name(y) == b]
    return any(_relation(x, y) == relation for x, y in named)


def _shown(scene, name: str) -> bool:
    return any(_name(o) == name for o in scene)


def _generate_recording_scenes(tmp_path, monkeypatch, cfg: dict):
    """The generated files and the objects drawn in each image, by its path."""
    from repro.families.ace_rpe import synthetic_tasks

    scenes = {}
    monkeypatch.setattr(synthetic_tasks, "_draw", lambda scene, cfg, path: scenes.__setitem__(path, scene))
    return generate_tasks(tmp_path, TaskGeneratorConfig.from_mapping(cfg)), scenes


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_false_statements_reverse_the_relation_or_name_an_absent_object_as_absent_share_says(
    tmp_path, monkeypatch, share
):
    cfg = {"seed": 1, "grid": 3, "objects": 2, "train_items": 40, "test_items": 2}
    root, scenes = _generate_recording_scenes(
        tmp_path, monkeypatch, {**cfg, "absent_share": share, "distinct_nlvr": True}
    )
    nlvr = json.loads((root / "nlvr_train.json").read_text())
    assert 0 < sum(e["label"] == "False" for e in nlvr) < len(nlvr)
    for entry in nlvr:
        pair = [scenes[root / p] for p in entry["images"]]
        named = pair[0] if entry["sentence"].startswith("the left") else pair[1]
        a, relation, b = _statement(entry["sentence"])
        assert _holds(named, a, relation, b) == (entry["label"] == "True")
        if entry["label"] == "False":  # share 1: an object neither image shows; share 0: the relation reversed
            assert (not any(_shown(s, a) for s in pair)) == (share == 1.0)
    noes = 0
    for entry in json.loads((root / "vqa_train.json").read_text()):
        if entry["question"].startswith("is there"):
            a, relation, b = _statement(entry["question"])
            scene = scenes[root / entry["image"]]
            answer = max(set(entry["answer"]), key=entry["answer"].count)
            assert _holds(scene, a, relation, b) == (answer == "yes")
            if answer == "no":
                noes += 1
                assert (not _shown(scene, a)) == (share == 1.0)
    assert noes


def test_relation_only_snli_ve_has_no_neutral_statement_and_both_objects_in_every_scene(tmp_path, monkeypatch):
    cfg = {"seed": 2, "grid": 3, "objects": 2, "train_items": 30, "test_items": 2, "ve_relation_only": True}
    root, scenes = _generate_recording_scenes(tmp_path, monkeypatch, cfg)
    entries = json.loads((root / "ve_train.json").read_text())
    assert sorted({e["label"] for e in entries}) == ["contradiction", "entailment"]
    for entry in entries:
        scene = scenes[root / f"{entry['image']}.jpg"]
        a, relation, b = _statement(entry["sentence"])
        assert _shown(scene, a) and _shown(scene, b)
        assert _holds(scene, a, relation, b) == (entry["label"] == "entailment")


def test_distance_statements_say_next_to_or_far_from_as_the_scene_has_it(tmp_path, monkeypatch):
    from repro.families.ace_rpe.synthetic import DISTANCE_WORDS

    cfg = {"seed": 2, "grid": 3, "objects": 2, "train_items": 60, "test_items": 2}
    root, scenes = _generate_recording_scenes(
        tmp_path, monkeypatch, {**cfg, "ve_relation_only": True, "ve_distance": True}
    )
    entries = json.loads((root / "ve_train.json").read_text())
    assert sorted({e["label"] for e in entries}) == ["contradiction", "entailment"]
    for entry in entries:
        scene = scenes[root / f"{entry['image']}.jpg"]
        a, relation, b = _statement(entry["sentence"])
        (x,) = [o for o in scene if _name(o) == a]
        (y,) = [o for o in scene if _name(o) == b]
        assert x is not y and relation in ("next to", "far from")
        near = max(abs(x[2] - y[2]), abs(x[3] - y[3])) == 1  # neighbouring cells, diagonals included
        assert ((relation == "next to") == near) == (entry["label"] == "entailment")
    # half the items of each label say "next to": the words alone do not tell the label
    for label in ("entailment", "contradiction"):
        told = [_statement(e["sentence"])[1] for e in entries if e["label"] == label]
        assert told.count("next to") == told.count("far from") == 15
    vocab = (root / "vocab" / "vocab.txt").read_text().split()
    assert set(DISTANCE_WORDS) <= set(vocab)
    # VQA's files (drawn before SNLI-VE's) are those of the same settings without it; its words join the vocabulary
    plain, _ = _generate_recording_scenes(tmp_path / "plain", monkeypatch, {**cfg, "ve_relation_only": True})
    assert (root / "vqa_train.json").read_bytes() == (plain / "vqa_train.json").read_bytes()
    assert not set(DISTANCE_WORDS) & set((plain / "vocab" / "vocab.txt").read_text().split())


def test_next_only_statements_all_say_next_to_and_are_entailed_exactly_when_the_objects_are_neighbours(
    tmp_path, monkeypatch
):
    cfg = {"seed": 2, "grid": 3, "objects": 2, "train_items": 60, "test_items": 2}
    flags = {"ve_relation_only": True, "ve_distance": True, "ve_next_only": True}
    root, scenes = _generate_recording_scenes(tmp_path, monkeypatch, {**cfg, **flags})
    entries = json.loads((root / "ve_train.json").read_text())
    for entry in entries:
        scene = scenes[root / f"{entry['image']}.jpg"]
        a, relation, b = _statement(entry["sentence"])
        (x,) = [o for o in scene if _name(o) == a]
        (y,) = [o for o in scene if _name(o) == b]
        assert x is not y and relation == "next to"
        near = max(abs(x[2] - y[2]), abs(x[3] - y[3])) == 1
        assert near == (entry["label"] == "entailment")
    labels = [e["label"] for e in entries]
    assert labels.count("entailment") == labels.count("contradiction") == 30


def _neighbours(scene, a: str, b: str) -> bool:
    """Whether the objects named a and b (each once in the scene) stand in neighbouring cells, diagonals included."""
    (x,) = [o for o in scene if _name(o) == a]
    (y,) = [o for o in scene if _name(o) == b]
    assert x is not y
    return max(abs(x[2] - y[2]), abs(x[3] - y[3])) == 1


def test_next_only_vqa_asks_whether_two_shown_objects_are_neighbours_and_the_answer_is_where_they_are(
    tmp_path, monkeypatch
):
    from repro.families.ace_rpe.synthetic import DISTANCE_WORDS, named_objects
    from repro.families.ace_rpe.synthetic_tasks import task_share

    cfg = {"seed": 2, "grid": 3, "objects": 2, "train_items": 60, "test_items": 10, "vqa_next_only": True}
    root, scenes = _generate_recording_scenes(tmp_path, monkeypatch, cfg)
    answers = []
    for entry in json.loads((root / "vqa_train.json").read_text()):
        assert entry["question"].startswith("is the ") and " next to the " in entry["question"]
        a, b = (" ".join(pair) for pair in named_objects(entry["question"]))
        answer = max(set(entry["answer"]), key=entry["answer"].count)
        assert _neighbours(scenes[root / entry["image"]], a, b) == (answer == "yes")
        answers.append(answer)
    assert answers.count("yes") == answers.count("no") == 30  # the words alike, the answers half each
    assert set(DISTANCE_WORDS) <= set((root / "vocab" / "vocab.txt").read_text().split())
    # every test question needs where the two shapes are: both are in the image whatever the answer
    share = task_share(TaskGeneratorConfig.from_mapping(cfg))
    assert share["vqa test-dev"] == share["vqa test-std"] == (10, 10)


def test_next_only_nlvr_names_the_image_that_shows_both_objects_and_is_true_when_they_are_neighbours(
    tmp_path, monkeypatch
):
    from repro.families.ace_rpe.synthetic import named_objects
    from repro.families.ace_rpe.synthetic_tasks import task_share

    cfg = {"seed": 2, "grid": 3, "objects": 2, "train_items": 60, "test_items": 10, "nlvr_next_only": True}
    root, scenes = _generate_recording_scenes(tmp_path, monkeypatch, cfg)
    entries = json.loads((root / "nlvr_train.json").read_text())
    sides = []
    for entry in entries:
        side = 0 if entry["sentence"].startswith("the left image shows a ") else 1
        assert " next to a " in entry["sentence"]
        a, b = (" ".join(pair) for pair in named_objects(entry["sentence"]))
        named, other = (scenes[root / p] for p in (entry["images"][side], entry["images"][1 - side]))
        assert _neighbours(named, a, b) == (entry["label"] == "True")
        assert not {_name(o) for o in other} & {a, b}  # the other image shows neither: it tells which is meant
        sides.append(side)
    labels = [e["label"] for e in entries]
    assert labels.count("True") == labels.count("False") == 30
    assert 0 < sum(sides) < len(sides)  # both sides are named
    share = task_share(TaskGeneratorConfig.from_mapping(cfg))
    assert share["nlvr dev"] == share["nlvr test"] == (10, 10)


@pytest.mark.parametrize("name", ["vqa_next_only", "nlvr_next_only"])
def test_next_only_vqa_and_nlvr_need_a_grid_with_far_cells(name):
    with pytest.raises(ReproError, match=f"{name} needs a grid of 3 or more, got 2"):
        TaskGeneratorConfig.from_mapping({"grid": 2, name: True}).check()


def test_distance_statements_need_a_grid_with_far_cells():
    with pytest.raises(ReproError, match="ve_distance needs a grid of 3 or more, got 2"):
        TaskGeneratorConfig.from_mapping({"grid": 2, "ve_relation_only": True, "ve_distance": True}).check()


def test_next_only_needs_the_distance_statements():
    with pytest.raises(ReproError, match="ve_next_only needs ve_distance and ve_relation_only"):
        TaskGeneratorConfig.from_mapping({"grid": 3, "ve_distance": True, "ve_next_only": True}).check()


@pytest.mark.parametrize(
    ("cfg", "digest"),
    [
        ({}, "662576a0fcdbab2a7794aefea0f5f4e3c17cd879560a1d7b6050f7e88d4473f7"),
        (
            {"absent_share": 0.75, "distinct_nlvr": True, "ve_relation_only": True},
            "fa7a140de1916826145a8bab3d049adc45aa433a18eae0c74618b8df20e010bb",
        ),
    ],
)
def test_settings_left_at_their_defaults_write_the_files_of_before_they_existed(tmp_path, cfg, digest):
    """The json, pickle and vocabulary files of two configurations, byte for byte those written before `ve_distance`
    was added (the digest of each file's relative path and bytes, in sorted order; the images are drawn from the
    same scenes these files name)."""
    import hashlib

    base = {"seed": 3, "grid": 3, "objects": 2, "train_items": 12, "test_items": 4}
    root = generate_tasks(tmp_path, TaskGeneratorConfig.from_mapping({**base, **cfg}))
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix not in (".png", ".jpg") and path.name != "complete.json":
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    assert h.hexdigest() == digest


@pytest.mark.parametrize("shape_only", [False, True])
def test_grounding_expressions_name_the_gold_object_and_the_context_object_in_full_or_by_shape(
    tmp_path, monkeypatch, shape_only
):
    from repro.families.ace_rpe.synthetic import _relation

    cfg = {"seed": 4, "image_size": 36, "grid": 3, "objects": 3, "train_items": 30, "test_items": 4}
    root, scenes = _generate_recording_scenes(tmp_path, monkeypatch, {**cfg, "context_shape_only": shape_only})
    refer = Refer(root / "refcoco+")
    entries = [e for s in ("train", "val", "test") for e in json.loads((root / f"refcoco+_{s}.json").read_text())]
    assert len(entries) == 30 + 3 * 4
    for entry in entries:
        head, context = entry["text"].rsplit(" the ", 1)
        words = head.split(" ")
        target, relation = " ".join(words[1:3]), " ".join(words[3:])
        assert words[0] == "the"
        scene = scenes[root / entry["image"]]
        (a,) = [o for o in scene if _name(o) == target]  # the name alone picks the gold object
        cell = 36 / 3
        assert refer.refs[entry["ref_id"]][1][:2] == pytest.approx(
            [a[3] * cell + 0.15 * cell, a[2] * cell + 0.15 * cell]
        )
        context_objects = [o for o in scene if o is not a and (o[1] if shape_only else _name(o)) == context]
        assert any(_relation(a, b) == relation for b in context_objects)
        assert (context in SHAPES) == shape_only


def test_a_switch_of_the_task_generator_is_true_or_false():
    with pytest.raises(ReproError, match="context_shape_only: expected true/false, got text yes"):
        TaskGeneratorConfig.from_mapping({"context_shape_only": "yes"})
