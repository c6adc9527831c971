"""Table 2's and Table 5's heads at paper scale on tiny files in ALBEF's official layouts (`task_fixtures.py`):
what is missing is named with its command; with the files in place a row fine-tunes VQA (train + val + VG),
SNLI-VE, NLVR2 (after text assignment at the pre-training size) and RefCOCO+ grounding for a step or two,
writes a test2015 file `repro submit vqa2-test-dev --dry-run` passes, and every evaluation feeds the model on
its device."""

from __future__ import annotations

import json

import pytest
import torch

from repro import families, specs
from repro.cli import app
from repro.errors import ReproError
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.config import ALBEFConfig
from repro.families.ace_rpe.data import tokenizer
from repro.families.ace_rpe.sources import paper_task_files
from repro.families.ace_rpe.tasks import classify_eval_data, evaluate_accuracy, evaluate_vqa, vqa_eval_data
from repro.families.base import RunContext
from repro.paths import REPO_DIR
from tests.families.ace_rpe.paper_worker import SETTINGS
from tests.families.ace_rpe.task_fixtures import TEST2015, write_task_files
from tests.families.ace_rpe.test_paper_scale import write_albef_files
from tests.families.ace_rpe.tiny import TINY_SIZES
from tests.test_devices import Reached, device_checked

TASK_SETTINGS = {**SETTINGS, "task_recipe": {"epochs": 1, "batch_size": 4, "num_workers": 0}}
EXPERIMENTS = REPO_DIR / "experiments" / "ace-rpe"


@pytest.fixture
def paper_data(sandbox):
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    for ident in ("ace-rpe-table2-pe", "ace-rpe-table5-grounding"):
        (folder / f"{ident}.yaml").write_text((EXPERIMENTS / f"{ident}.yaml").read_text())
    specs.clear_cache()
    return sandbox / "data"


def _released(data):
    """ALBEF_4M.pth at the tiny sizes: the rows start from it (no pre-training corpus needed but NLVR2's)."""
    from tests.families.ace_rpe.test_keymap import albef_state

    vocab = len((data / "bert-base-uncased" / "vocab.txt").read_text().split())
    (data / "albef-checkpoints").mkdir(exist_ok=True)
    torch.save({"model": albef_state("pretrain", 2, vocab)}, data / "albef-checkpoints" / "ALBEF_4M.pth")


def _ctx(ident: str, row: str, workdir, limit=None) -> RunContext:
    spec = specs.resolve(ident)
    spec_row = spec.row(row)
    config = spec_row.config.model_copy(update={"init": "albef"})
    return RunContext(
        spec=spec,
        row=spec_row,
        config=config,
        scale="paper",
        settings=TASK_SETTINGS,
        seed=0,
        workdir=workdir,
        progress=False,
        limit=limit,
    )


def test_paper_task_files_name_the_first_missing_file_and_its_command(paper_data):
    with pytest.raises(ReproError, match=r"albef-data/data/vqa_train.json is missing: get it with `repro download"):
        paper_task_files(["vqa"])
    write_task_files(paper_data)
    (paper_data / "vqa2" / "v2_OpenEnded_mscoco_test2015_questions.json").unlink()
    with pytest.raises(ReproError, match=r"test2015_questions.json is missing: get it with `repro download vqa2`"):
        paper_task_files(["vqa", "snli-ve"])
    (paper_data / "refcoco-plus" / "refcoco+" / "refs(unc).p").unlink()
    with pytest.raises(ReproError, match=r"refs\(unc\).p is missing: get it with `repro download refcoco-plus`"):
        paper_task_files(["grounding"])
    with pytest.raises(ReproError, match=r"albef-data/data/coco.json is missing: get it with `repro download"):
        paper_task_files(["nlvr2"])  # NLVR2's text assignment reads the 4M corpus
    write_albef_files(paper_data, images=False)
    files = paper_task_files(["snli-ve", "nlvr2"])
    assert files.paper and [p.name for p, _ in files.assign][0] == "coco.json"


@pytest.mark.slow
def test_table2_heads_run_at_paper_scale_and_write_a_submittable_test2015_file(paper_data, tmp_path, runner):
    write_albef_files(paper_data)
    write_task_files(paper_data)
    _released(paper_data)
    ctx = _ctx("ace-rpe-table2-pe", "ACE-RPE + Lace", tmp_path / "work")
    (paper_data / "vg-images" / "image" / "0.jpg").rename(paper_data / "vg-images" / "away.jpg")
    with pytest.raises(ReproError, match=r"vg-images/image/0.jpg is missing \(the first image of vg_qa.json\)"):
        families.for_row(ctx.row).run_row(ctx)
    (paper_data / "vg-images" / "away.jpg").rename(paper_data / "vg-images" / "image" / "0.jpg")
    run = families.for_row(ctx.row).run_row(ctx)
    # SNLI-VE and NLVR2 scored here; VQA's test-dev and test-std by the server (no local number)
    assert set(run.metrics) == {"SNLI-VE dev", "SNLI-VE test", "NLVR dev", "NLVR test"}
    assert all(0 <= v <= 100 for v in run.metrics.values())
    training = run.training
    assert training["pretrain"]["steps"] == 0 and training["pretrain"]["checkpoint"].endswith("ALBEF_4M.pth")
    # 7 VQA questions (3 train + 2 val + 2 VG), batch 4: 2 steps; 3 SNLI-VE and NLVR2 items: 1 step each
    assert training["vqa"]["steps"] == 2 and training["snli-ve"]["steps"] == 1 and training["nlvr2"]["steps"] == 1
    assert training["nlvr2_assign"]["steps"] == 3  # 10 pre-training pairs of the 4M corpus, batch 4
    assert run.extra["vqa_train_files"] == ["vqa_train.json", "vqa_val.json", "vg_qa.json"]
    assert "vqa2_val" not in run.extra  # val is trained on (ALBEF's train_file): not scored
    (path,) = run.predictions
    answers = json.loads(open(path).read())
    assert sorted(a["question_id"] for a in answers) == [q for q, _ in TEST2015]  # all of test2015, not vqa_test.json
    assert path.endswith("predictions/ACE-RPE_+_Lace.seed0.test2015.json")  # a paper-scale name
    out = runner.invoke(app, ["submit", "vqa2-test-dev", "--dry-run", "--predictions", path], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "the file passed every check" in out.output and "note:" not in out.output
    assert run.extra["submit"][path] == [
        f"repro submit vqa2-test-dev --predictions {path}",
        f"repro submit vqa2-test-std --predictions {path}",
    ]


@pytest.mark.slow
def test_table5_grounding_at_paper_scale(paper_data, tmp_path):
    """RefCOCO+ grounding on ALBEF's files: fine-tuned from 2 x 2 patches to 4 x 4, scored on val, testA, testB."""
    write_albef_files(paper_data)
    write_task_files(paper_data)
    _released(paper_data)
    ctx = _ctx("ace-rpe-table5-grounding", "ACE-RPE(4M)", tmp_path / "grounding")
    run = families.for_row(ctx.row).run_row(ctx)
    assert {c.name for c in ctx.spec.columns if c.metric == "grounding"} <= set(run.metrics)
    assert all(0 <= run.metrics[c] <= 100 for c in ("Val", "TestA", "TestB"))
    assert run.training["grounding"]["steps"] == 1


@pytest.mark.slow
def test_vqa_with_limit_reads_the_first_entries_and_writes_a_partial_file(paper_data, tmp_path):
    """--limit 1: one question of each training file, one of test2015, in a `.partial` file."""
    from repro.families.ace_rpe import tasks
    from repro.families.ace_rpe.tasks_data import TaskCollate

    write_albef_files(paper_data, jsons=False, images=False)
    write_task_files(paper_data)
    tok = tokenizer(paper_data / "bert-base-uncased")
    sizes = {**TINY_SIZES, "vocab_size": len(tok)}
    ctx = _ctx("ace-rpe-table2-pe", "None", tmp_path / "work", limit=1)
    torch.manual_seed(0)
    weights = build_model(ctx.config, {**sizes, "image_size": 16}, task="pretrain").state_dict()  # 256 -> 384 px
    files = paper_task_files(["vqa"], limit=1)
    scores, training, path, extra = tasks.vqa([ctx], files, [weights], sizes, TaskCollate(tok, 12), 32, tok)[0]
    assert scores == {} and training["vqa"]["steps"] == 1  # 3 questions (one a file), batch 4
    assert path.endswith("None.seed0.test2015.partial.json") and len(json.loads(open(path).read())) == 1


def test_the_evaluation_of_each_head_feeds_the_model_on_its_device(paper_data):
    """`evaluate_vqa` and `evaluate_accuracy` on ALBEF's files: every tensor reaching the model is where the
    model is (`meta` here, standing in for a GPU)."""
    write_albef_files(paper_data, images=False)
    write_task_files(paper_data)
    tok = tokenizer(paper_data / "bert-base-uncased")
    files = paper_task_files(["vqa", "snli-ve", "nlvr2"])
    sizes = {**TINY_SIZES, "vocab_size": len(tok)}
    config = ALBEFConfig(arch="albef", position_embedding="ace-rpe")
    for split in ("test", "val"):
        data = vqa_eval_data(files, split, tok, 32)
        assert len(data.questions) == (3 if split == "test" else 2) and (data.questions.gold is None) == (
            split == "test"
        )
        with pytest.raises(Reached):
            evaluate_vqa(device_checked(build_model(config, sizes, task="vqa")), data)
    for task, split in (("snli-ve", "test"), ("nlvr2", "test-p")):
        data = classify_eval_data(files, task, split, tok, 32)
        with pytest.raises(Reached):
            evaluate_accuracy(device_checked(build_model(config, sizes, task=task)), data)


def test_vqa_val_is_scored_by_the_vqa_accuracy_where_it_is_held_out(paper_data):
    write_albef_files(paper_data, jsons=False, images=False)
    write_task_files(paper_data)
    tok = tokenizer(paper_data / "bert-base-uncased")
    files = paper_task_files(["vqa"])
    torch.manual_seed(0)
    model = build_model(ALBEFConfig(arch="albef"), {**TINY_SIZES, "vocab_size": len(tok)}, task="vqa")
    data = vqa_eval_data(files, "val", tok, 32)
    done = evaluate_vqa(model, data, "cpu")
    assert set(done["predictions"]) == {200, 201} and set(done["predictions"].values()) <= set(data.answers)
    gold = data.questions.gold
    expected = sum(min(1.0, gold[q].count(a) / 3) for q, a in done["predictions"].items()) / 2 * 100
    assert done["scores"]["overall"] == pytest.approx(expected, abs=1.0)


def test_the_plan_marks_a_heads_row_ready_once_its_files_and_first_images_are_in_place(paper_data):
    from repro.run import make_plan

    def missing() -> list[str]:
        plan = make_plan(specs.resolve("ace-rpe-table2-pe"), "paper", ["ACE-RPE + Lace"])
        (step,) = [s for s in plan.steps if s.kind == "train"]
        assert step.unsupported is None
        return list(step.missing)

    before = missing()
    assert {"repro download vqa2", "repro download vg-images", "repro download nlvr2"} <= set(before)
    write_albef_files(paper_data)
    write_task_files(paper_data)
    assert missing() == []
    (paper_data / "vg-images" / "image" / "0.jpg").unlink()  # the first image vg_qa.json names
    assert missing() == ["repro download vg-images"]
