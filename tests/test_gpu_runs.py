"""On a CUDA device: every row of one smoke table per model kind trains and scores on the GPU (`--device cuda`),
in the recipes' fp32 and in bf16 autocast, and every score it writes is a finite number; seeds trained together
(`--ensemble`) too. Marked `gpu`: skipped where there is no CUDA device (tests/conftest.py); the rest of the suite
runs these paths on the CPU."""

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
