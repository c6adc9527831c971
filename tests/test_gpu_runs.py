"""On a CUDA device: every row of one smoke table per model kind trains and scores on the GPU (`--device cuda`),
in the recipes' fp32 and in bf16 autocast, and every score it writes is a finite number; seeds trained together
(`--ensemble`) too; fp16 with its grad scaler, resumed; a `--limit` paper-scale run on files in the official
layouts; released weights evaluated; GLPN's depth maps; and, where two GPUs are present, a torchrun job of two NCCL
ranks. Marked `gpu`: skipped where there is no CUDA device (tests/conftest.py); the rest of the suite runs these
paths on the CPU."""

from __future__ import annotations

import json
import math

import pytest

from repro import specs
from repro.cli import app

# One smoke table per model kind: MCAN and its positional modules, VL-BERT, M4C and SA-M4C (TextVQA and
# ST-VQA, the spatial subsets), PSAC's four TGIF-QA tasks, DSGANet, ALBEF with ACE-RPE (pre-training, the
# three downstream heads, grounding).
TABLES = [
    "mcan-pa-table5-ablation",
    "mcan-pa-table4-pretraining",
    "sa-m4c-table1-textvqa",
    "sa-m4c-table3-stvqa",
    "sa-m4c-sec6-spatial",
    "psac-table6-coatt",
    "dsganet-table8-gqa-ablation",
    "ace-rpe-table2-pe",
    "ace-rpe-table5-grounding",
]


@pytest.fixture
def gpu_folders(tmp_path, monkeypatch):
    """The checkout's specs; results and generated data in this test's folder."""
    monkeypatch.setenv("REPRO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("REPRO_DATA_DIR", str(tmp_path / "data"))
    specs.clear_cache()
    yield tmp_path
    specs.clear_cache()


def _scores(runner, ident: str) -> list[float]:
    out = runner.invoke(app, ["table", ident, "--scale", "smoke", "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["rows"]
    return [v for row in rows if row["runnable"] for v in (row["reproduced"] or {}).values()]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("ident", TABLES)
def test_every_row_of_a_smoke_table_trains_and_scores_on_the_gpu(gpu_folders, runner, ident, precision):
    words = ["run", ident, "--scale", "smoke", "--device", "cuda", "--workdir", str(gpu_folders / "work")]
    if precision != "fp32":
        words.append(f"recipe.precision={precision}")
    out = runner.invoke(app, words, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output
    if precision == "fp32":  # a variant's records are kept apart; the spec's own table shows the plain run
        scores = _scores(runner, ident)
        assert scores and all(math.isfinite(v) for v in scores), scores


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize(
    "ident", ["mcan-pa-table5-ablation", "sa-m4c-table2-ablations", "psac-table6-coatt", "dsganet-table8-gqa-ablation"]
)
def test_seeds_trained_together_train_on_the_gpu(gpu_folders, runner, ident):
    # the LSTM and GRU question encoders under vmap: cuDNN's fused kernels on each seed's slice of the weights
    words = ["run", ident, "--scale", "smoke", "--device", "cuda", "--seeds", "0,1", "--ensemble"]
    out = runner.invoke(app, [*words, "--workdir", str(gpu_folders / "work")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    scores = _scores(runner, ident)
    assert scores and all(math.isfinite(v) for v in scores), scores


@pytest.mark.gpu
def test_a_run_on_the_gpu_resumes_from_its_checkpoint(tmp_path):
    # the checkpoint is loaded onto the GPU, its generator states with it
    import torch

    from repro.families import load_recipe
    from repro.train import fit
    from tests.test_train_resume import RECIPE, new_model
    from tests.tiny_vqa import TinyVQA

    (tmp_path / "tiny.yaml").write_text(RECIPE)
    recipe = load_recipe(str(tmp_path / "tiny.yaml")).replace(epochs=1)
    model = new_model()
    fit(model, TinyVQA(16), recipe, tmp_path / "run", progress=False, device="cuda")
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    state = fit(
        model, TinyVQA(16), recipe.replace(epochs=2), tmp_path / "run", resume=True, progress=False, device="cuda"
    )
    assert state.step == 4 and state.gpu_count == 1
    assert any(not torch.equal(weights[k], v) for k, v in model.state_dict().items())


@pytest.mark.gpu
def test_fp16_trains_with_a_grad_scaler_and_resumes_it(tmp_path):
    """fp16 autocast steps through torch's GradScaler, whose state the checkpoint keeps and a resumed run reads."""
    import torch

    from repro.families import load_recipe
    from repro.train import fit
    from repro.train.checkpoint import load_checkpoint
    from tests.test_train_resume import RECIPE, new_model
    from tests.tiny_vqa import TinyVQA

    (tmp_path / "tiny.yaml").write_text(RECIPE)
    recipe = load_recipe(str(tmp_path / "tiny.yaml")).replace(epochs=1, precision="fp16")
    model = new_model()
    state = fit(model, TinyVQA(16), recipe, tmp_path / "run", progress=False, device="cuda")
    assert state.precision == "fp16" and math.isfinite(state.final_loss)
    saved = load_checkpoint(tmp_path / "run" / "last.pt")
    assert saved["scaler"] is not None and saved["scaler"]["scale"] > 0
    resumed = fit(
        model, TinyVQA(16), recipe.replace(epochs=2), tmp_path / "run", resume=True, progress=False, device="cuda"
    )
    assert resumed.step == 4 and math.isfinite(resumed.final_loss)
    assert all(torch.isfinite(v).all() for v in model.state_dict().values() if v.is_floating_point())


def paper_scale_vqa2(root) -> None:
    """VQA v2 and Visual Genome's QA in the releases' layouts, bottom-up TSVs, prepared (`repro prepare`)."""
    import os
    import subprocess
    import sys

    from repro.paths import REPO_DIR
    from tests._vqa_fixtures import write_vg, write_vqa2
    from tests.families.mcan_pa.test_run import _bottom_up_tsv

    data = root / "data"
    write_vqa2(data / "vqa2")
    write_vg(data / "vg-qa")
    _bottom_up_tsv(data / "bottom-up-36" / "trainval_resnet101_faster_rcnn_genome_36.tsv", range(1, 7))
    _bottom_up_tsv(data / "bottom-up-36" / "test2015_resnet101_faster_rcnn_genome_36.tsv", range(1, 4))
    env = {**os.environ, "REPRO_DATA_DIR": str(data)}
    for name in ("vqa2", "bottom-up-36"):
        done = subprocess.run([sys.executable, "-m", "repro", "prepare", name], cwd=REPO_DIR, env=env, text=True)
        assert done.returncode == 0


TINY_MCAN = ["sizes.d_model=16", "sizes.layers=1", "sizes.heads=2", "sizes.ffn=16", "sizes.geometry_dim=16"]


def limited_paper_run(root, runner, device: str) -> None:
    """`repro run --limit 2` of Table V's MCAN+PA at paper scale on files in the official layouts, on `device`."""
    import shutil

    from repro.paths import REPO_DIR

    folder = root / "experiments" / "mcan-pa"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    specs.clear_cache()
    paper_scale_vqa2(root)
    words = ["run", "mcan-pa-table5-ablation", "--rows", "MCAN+PA (ours)", "--limit", "2", "--device", device]
    out = runner.invoke(app, [*words, *TINY_MCAN, "--workdir", str(root / "work")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    [log] = (root / "work").rglob("run.log")
    assert f"on {device}" in log.read_text()
    [record] = (root / "results").rglob("MCAN+PA_ours.seed0.json")
    assert json.loads(record.read_text())["training"]["steps"] >= 1
    assert list((root / "results").rglob("*.test2015.partial.json"))  # the test file, named partial


@pytest.mark.gpu
def test_a_limited_paper_scale_run_on_official_layout_files_trains_on_the_gpu(sandbox, runner):
    limited_paper_run(sandbox, runner, "cuda")


@pytest.mark.gpu
def test_released_weights_are_evaluated_on_the_gpu(sandbox, runner):
    """`repro run --weights FILE --device cuda`: an mcan-vqa checkpoint evaluated by the release protocol."""
    import shutil

    from repro.paths import REPO_DIR
    from tests.families.mcan_pa.test_weights_run import SPEC, _fixture_checkpoint

    folder = sandbox / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / f"{SPEC}.yaml", folder)
    specs.clear_cache()
    path, _ = _fixture_checkpoint(sandbox, specs.resolve(SPEC))
    words = ["run", SPEC, "--rows", "MCAN", "--scale", "smoke", "--weights", str(path), "--device", "cuda"]
    out = runner.invoke(app, words, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    [record] = (sandbox / "results" / "weights").rglob("MCAN.smoke.json")
    metrics = json.loads(record.read_text())["metrics"]
    assert metrics and all(0.0 <= v <= 100.0 for v in metrics.values())


@pytest.mark.gpu
def test_glpn_depth_maps_on_the_gpu_match_the_cpu(tmp_path):
    import numpy as np
    import torch
    from PIL import Image
    from transformers import GLPNConfig, GLPNForDepthEstimation

    from repro.datasets import depth_estimation

    torch.manual_seed(0)
    config = GLPNConfig(
        num_encoder_blocks=4,
        depths=[1, 1, 1, 1],
        sr_ratios=[8, 4, 2, 1],
        hidden_sizes=[8, 16, 24, 32],
        num_attention_heads=[1, 1, 1, 1],
        mlp_ratios=[2, 2, 2, 2],
        decoder_hidden_size=16,
        max_depth=10,
    )
    GLPNForDepthEstimation(config).save_pretrained(tmp_path / "glpn")
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for k in range(3):
        Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(images / f"img_{k}.png")
    maps = {}
    for device in ("cpu", "cuda"):
        out = depth_estimation.depth_maps(images, tmp_path / device, weights=tmp_path / "glpn", device=device)
        maps[device] = [np.asarray(Image.open(out / f"img_{k}.png"), dtype=np.int16) for k in range(3)]
    for cpu, gpu in zip(maps["cpu"], maps["cuda"]):
        assert np.abs(cpu - gpu).max() <= 1  # one gray level: TF32-free convolutions, another summation order


@pytest.mark.gpu
@pytest.mark.slow
def test_two_gpus_train_as_two_nccl_ranks_under_torchrun(tmp_path):
    """With two GPUs: the limited paper-scale run as a torchrun job of two ranks (NCCL), rank 0 writing the record."""
    import os
    import shutil
    import subprocess
    import sys

    import torch

    from repro.paths import REPO_DIR

    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two CUDA devices; this machine has {torch.cuda.device_count()}")
    folder = tmp_path / "experiments" / "mcan-pa"
    folder.mkdir(parents=True)
    shutil.copy(REPO_DIR / "experiments" / "mcan-pa" / "mcan-pa-table5-ablation.yaml", folder)
    paper_scale_vqa2(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), os.environ.get("PYTHONPATH", "")])}
    env.update(
        REPRO_EXPERIMENTS=str(tmp_path / "experiments"),
        REPRO_DATA_DIR=str(tmp_path / "data"),
        REPRO_RESULTS=str(tmp_path / "results"),
        CUDA_VISIBLE_DEVICES="0,1",
    )
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    words = ["run", "mcan-pa-table5-ablation", "--rows", "MCAN+PA (ours)", "--limit", "2", "--device", "cuda"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "repro"]
    command += [*words, *TINY_MCAN, "recipe.batch_size=4", "--workdir", str(tmp_path / "work")]
    done = subprocess.run(command, cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    [log] = (tmp_path / "work").rglob("run.log")
    assert "2 process(es)" in log.read_text() and "cuda" in log.read_text()
    assert len(list((tmp_path / "results").rglob("MCAN+PA_ours.seed0.json"))) == 1
    assert done.stdout.count("plan: mcan-pa-table5-ablation") == 1  # rank 0 alone prints


@pytest.mark.gpu
def test_the_memory_estimate_against_a_measured_step_on_this_gpu(capsys):
    """MCAN at the paper's sizes and batch 64 in fp32 on this GPU: the plan's memory estimate against
    `torch.cuda.max_memory_allocated` after a few steps (the step's time against the FLOP model is a benchmark's:
    `python -m benchmarks.bench_train --device cuda` prints the share of the GPU's peak)."""
    import torch

    from repro import families
    from repro.families.mcan_pa import build
    from repro.memory import row_estimate
    from repro.train.trainer import matmul_precision

    hooks = families.implementation(families.by_paper("mcan-pa"))
    config, recipe = {"arch": "mcan"}, families.load_recipe("mcan-pa/vqa2")
    estimate = row_estimate(hooks, build.as_config(config), recipe, gpus=1)
    torch.manual_seed(0)
    model = build.build_model(build.as_config(config), build.PAPER_NUM_TOKENS, build.PAPER_NUM_ANSWERS).cuda()
    batch = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in build.example_batch(64).items()}
    target = torch.rand(64, build.PAPER_NUM_ANSWERS, device="cuda")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    torch.cuda.reset_peak_memory_stats()
    with matmul_precision("fp32"):  # TF32 off, as the recipe trains
        for _ in range(3):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(batch), target, reduction="sum")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.cuda.synchronize()
    measured_gib = (torch.cuda.max_memory_allocated() + 0.5 * 2**30) / 2**30  # the estimate counts the context
    with capsys.disabled():
        print(
            f"\nmemory estimate on {torch.cuda.get_device_name()}: {estimate.gib:.2f} GiB, measured "
            f"{measured_gib:.2f} (ratio {estimate.gib / measured_gib:.2f})"
        )
    assert 0.5 < estimate.gib / measured_gib < 2.0
