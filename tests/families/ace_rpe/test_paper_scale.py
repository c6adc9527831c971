"""The paper-scale path on tiny files in ALBEF's exact layout: what is missing is named with its command;
with the files present both recipes (pre-training, retrieval fine-tuning) run, in one process and as two
ranks of a torchrun job (gloo on CPU)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repro import specs
from repro.cli import app
from repro.errors import ReproError
from repro.families.ace_rpe.build import build_model, stages
from repro.families.ace_rpe.data import augment
from repro.families.ace_rpe.keymap import transfer
from repro.paths import REPO_DIR
from tests.families.ace_rpe.tiny import TINY_SIZES

EXPERIMENTS = REPO_DIR / "experiments" / "ace-rpe"

WORDS = "a dog man woman red blue runs sits on the grass street with ball".split()


def _image(path: Path, seed: int) -> None:
    from PIL import Image

    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (40, 30), tuple(rng.randrange(256) for _ in range(3))).save(path)


def _caption(rng: random.Random) -> str:
    return "A " + " ".join(rng.choice(WORDS) for _ in range(5)) + "."


def write_albef_files(data: Path, vocab: bool = True, jsons: bool = True, images: bool = True) -> None:
    """`repro download albef-data bert-base-uncased deit-b16` laid out (tiny weights), plus the user's images,
    a few of each."""
    from tests.families.ace_rpe.test_keymap import deit_and_bert

    rng = random.Random(0)
    if vocab:
        (data / "bert-base-uncased").mkdir(parents=True, exist_ok=True)
        specials = ["[PAD]", *(f"[unused{i}]" for i in range(3)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        (data / "bert-base-uncased" / "vocab.txt").write_text("\n".join(specials + WORDS) + "\n")
        deit, bert = deit_and_bert(len(specials + WORDS))
        torch.save(bert, data / "bert-base-uncased" / "pytorch_model.bin")
        (data / "deit-b16").mkdir(parents=True, exist_ok=True)
        torch.save({"model": deit}, data / "deit-b16" / "deit_base_patch16_224-b5f2ef4d.pth")
    albef = data / "albef-data" / "data"
    albef.mkdir(parents=True, exist_ok=True)
    mine = data / "my-images"  # pre-training images where the user keeps them (absolute paths in the jsons)
    files: dict[str, list] = {}
    for n, name in enumerate(("coco", "vg", "cc3m_train", "cc3m_val", "sbu")):
        files[f"{name}.json"] = [
            {"image": str(mine / name / f"{i}.jpg"), "caption": [_caption(rng)] if i else _caption(rng)}
            for i in range(2)
        ]
        if images:
            for i in range(2):
                _image(mine / name / f"{i}.jpg", 10 * n + i)
    layouts = {  # ALBEF's image names, relative to the data set's folder
        "flickr30k": (
            "flickr30k",
            lambda i: f"flickr30k-images/{1000092795 + i}.jpg",
            lambda i: f"flickr30k-images/{2000 + i}.jpg",
        ),
        "coco": (
            "coco-images",
            lambda i: f"train2014/COCO_train2014_{i:012d}.jpg",
            lambda i: f"val2014/COCO_val2014_{391895 + i:012d}.jpg",
        ),
    }
    for name, (folder, train_name, test_name) in layouts.items():
        files[f"{name}_train.json"] = [
            {"image": train_name(i), "caption": _caption(rng), "image_id": str(i)} for i in range(3) for _ in range(2)
        ]
        files[f"{name}_test.json"] = [
            {"image": test_name(i), "caption": [_caption(rng) for _ in range(5)]} for i in range(3)
        ]
        if images:
            for i in range(3):
                _image(data / folder / train_name(i), 100 + i)
                _image(data / folder / test_name(i), 200 + i)
    if jsons:
        for name, entries in files.items():
            (albef / name).write_text(json.dumps(entries))


@pytest.fixture
def table1(sandbox):
    folder = sandbox / "experiments" / "ace-rpe"
    folder.mkdir(parents=True)
    (folder / "ace-rpe-table1-pe.yaml").write_text((EXPERIMENTS / "ace-rpe-table1-pe.yaml").read_text())
    specs.clear_cache()
    return sandbox


@pytest.mark.slow
def test_paper_scale_names_the_first_missing_file_and_the_command_that_gets_it(runner, table1):
    def run():
        out = runner.invoke(app, ["run", "ace-rpe-table1-pe", "--rows", "None"], env={"COLUMNS": "300"})
        assert out.exit_code == 2 and "Traceback" not in out.output
        return " ".join(out.output.split())

    data = table1 / "data"
    assert "bert-base-uncased/vocab.txt is missing: get it with `repro download bert-base-uncased`" in run()
    write_albef_files(data, jsons=False, images=False)
    assert "albef-data/data/flickr30k_train.json is missing: get it with `repro download albef-data`" in run()
    write_albef_files(data, images=False)
    deit = data / "deit-b16" / "deit_base_patch16_224-b5f2ef4d.pth"
    deit.rename(deit.with_suffix(".away"))
    assert "deit-b16/deit_base_patch16_224-b5f2ef4d.pth is missing: get it with `repro download deit-b16`" in run()
    deit.with_suffix(".away").rename(deit)
    assert f"{data}/my-images/coco/0.jpg is missing (the first image of coco.json)" in run()


@pytest.mark.slow
def test_paper_scale_trains_both_recipes_as_two_ranks_of_a_torchrun_job(table1, tmp_path):
    """Pre-training then both fine-tunings at paper scale on the fixture files, under torch.distributed
    (gloo, 2 CPU processes): tiny sizes and recipes (`paper_worker.SETTINGS`), the paper-scale data path."""
    write_albef_files(table1 / "data")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), os.environ.get("PYTHONPATH", "")])}
    env["OMP_NUM_THREADS"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo ranks on the CPU, on a GPU machine too
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd += ["-m", "tests.families.ace_rpe.paper_worker", str(tmp_path)]
    done = subprocess.run(cmd, cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1]  # the same weights and the same score matrices on both ranks
    record = ranks[0]
    assert len(record["metrics"]) == 12 and all(0 <= v <= 100 for v in record["metrics"].values())
    training = record["training"]
    assert {part: training[part]["world_size"] for part in training} == {"pretrain": 2, "flickr30k": 2, "coco": 2}
    # 10 pre-training pairs (5 files of 2), global batch 4 = 2 per rank: 3 steps per epoch, 2 epochs
    assert training["pretrain"]["steps"] == 6 and training["flickr30k"]["steps"] == 2
    assert [Path(p).name for p in training["pretrain"]["initial"]] == [
        "deit_base_patch16_224-b5f2ef4d.pth",
        "pytorch_model.bin",
    ]


@pytest.mark.slow
def test_a_row_starts_from_albefs_released_checkpoint_in_place_of_pre_training(table1, tmp_path):
    """`init: albef`: no pre-training corpus needed, ALBEF_4M.pth (ALBEF's key names) loaded by the key map,
    then fine-tuning and evaluation as usual; without the file, one line naming it and its command."""
    from repro import families
    from repro.families.ace_rpe.keymap import new_key_allowed
    from repro.families.base import RunContext
    from tests.families.ace_rpe.paper_worker import SETTINGS
    from tests.families.ace_rpe.test_keymap import albef_state

    data = table1 / "data"
    write_albef_files(data)
    for name in ("coco", "vg", "cc3m_train", "cc3m_val", "sbu"):
        (data / "albef-data" / "data" / f"{name}.json").unlink()  # the corpus is not needed
    spec = specs.resolve("ace-rpe-table1-pe")
    row = spec.row("ACE-RPE")
    config = row.config.model_copy(update={"init": "albef"})
    ctx = RunContext(spec=spec, row=row, config=config, scale="paper", settings=SETTINGS, seed=0, workdir=tmp_path)
    hooks = families.for_row(row)
    with pytest.raises(ReproError, match=r"albef-checkpoints/ALBEF_4M.pth is missing: get it with `repro download"):
        hooks.run_row(ctx)
    vocab = len((data / "bert-base-uncased" / "vocab.txt").read_text().split())
    (data / "albef-checkpoints").mkdir()
    torch.save({"model": albef_state("pretrain", 2, vocab)}, data / "albef-checkpoints" / "ALBEF_4M.pth")
    run = hooks.run_row(ctx)
    pretrain = run.training["pretrain"]
    assert pretrain["checkpoint"].endswith("ALBEF_4M.pth") and pretrain["steps"] == 0
    assert any(".position." in key for key in pretrain["new"]) and all(new_key_allowed(k) for k in pretrain["new"])
    assert len(run.metrics) == 12 and run.training["flickr30k"]["steps"] > 0
    plan = stages(config, spec)
    assert plan[0][0] == "load" and "ALBEF_4M.pth" in plan[0][1]


def test_fine_tuning_takes_pre_trained_weights_at_another_resolution():
    """Pre-training at 256 px, fine-tuning at 384: ViT, APE and RPE patch tables resized, the rest copied."""
    torch.manual_seed(0)
    for pe in ("ape", "rpe"):
        config = {"arch": "albef", "position_embedding": pe, "anchor_loss": False}
        small = build_model(config, {**TINY_SIZES, "image_size": 16}, task="pretrain")  # 2 x 2 patches
        large = build_model(config, {**TINY_SIZES, "image_size": 32}, task="retrieval")  # 4 x 4
        before = {k: v.clone() for k, v in large.state_dict().items()}
        transfer(small.state_dict(), large)
        got, had = large.state_dict(), small.state_dict()
        assert torch.equal(got["itm_head.weight"], had["itm_head.weight"])
        pos = "visual_encoder.embeddings.position_embeddings"
        assert got[pos].shape == (1, 17, 32) and torch.equal(got[pos][:, 0], had[pos][:, 0])
        table = "fusion.position.image_absolute.weight" if pe == "ape" else "fusion.position.image_relative.weight"
        assert got[table].shape[0] == (17 if pe == "ape" else 49) and not torch.equal(got[table], before[table])
        # bicubic resizing keeps a table's scale: the resized one is close to the pre-trained one on average
        assert abs(float(got[table].std()) - float(had[table].std())) < 0.5 * float(had[table].std())


def test_albef_augmentations_crop_flip_and_randaugment_with_pil():
    from PIL import Image

    img = Image.new("RGB", (60, 40), (0, 0, 0))
    img.paste((255, 0, 0), (0, 0, 30, 40))  # left half red
    outs = [augment(img, 24, 0.5, random.Random(seed)) for seed in range(40)]
    assert all(o.size == (24, 24) for o in outs)
    left_red = [o.getpixel((1, 12))[0] > 128 for o in outs]
    assert any(left_red) and not all(left_red)  # flipped (or cropped) in some draws only


@pytest.mark.slow
def test_paper_scale_downstream_heads_name_what_is_missing_before_any_training(runner, sandbox):
    """Tables 2 and 5 run at paper scale: on an empty data folder each stops in one line, before pre-training,
    naming the first missing file and the command that gets it; then the heads' own files (ALBEF's json files,
    VQA v2's test2015 questions, RefCOCO+'s refer annotations); the plan no longer leaves columns empty."""
    env = {"COLUMNS": "300", "REPRO_EXPERIMENTS": str(REPO_DIR / "experiments")}
    specs.clear_cache()

    def run(ident: str, row: str) -> str:
        out = runner.invoke(app, ["run", ident, "--rows", row], env=env)
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output
        return " ".join(out.output.split())

    for ident, row in (("ace-rpe-table2-pe", "ACE-RPE + Lace"), ("ace-rpe-table5-grounding", "ACE-RPE(4M)")):
        assert "bert-base-uncased/vocab.txt is missing: get it with `repro download bert-base-uncased`" in run(
            ident, row
        )
    write_albef_files(sandbox / "data", jsons=False, images=False)
    text = run("ace-rpe-table2-pe", "ACE-RPE + Lace")
    assert "albef-data/data/vqa_train.json is missing: get it with `repro download albef-data`" in text
    assert "albef-data/data/refcoco+_train.json is missing" in run("ace-rpe-table5-grounding", "ACE-RPE(4M)")
    out = runner.invoke(app, ["run", "ace-rpe-table8-mode", "--dry-run"], env=env)
    text = " ".join(out.output.split())
    assert out.exit_code == 0 and "left empty" not in text and "`repro download nlvr2`" in text
