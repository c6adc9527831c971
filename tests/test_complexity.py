"""Model complexity (mcan-pa Table VI): parameters and FLOPs at the paper's settings."""

import pytest
import torch

from repro.complexity import complexity
from repro.errors import ReproError
from repro.families.mcan_pa.build import build_model, example_batch
from repro.families.mcan_pa.config import McanConfig
from repro.nn.measure import count_flops, count_parameters
from tests.tiny_vqa import TINY_SIZES


def test_mcan_flops_match_table6_within_5_percent():
    torch.manual_seed(0)
    model = build_model({"arch": "mcan"}, 20572, 3129)
    flops = count_flops(model, example_batch())
    assert abs(flops / 5.35e9 - 1) < 0.05


def test_flops_count_every_matmul_of_a_tiny_model():
    torch.manual_seed(0)
    mcan = build_model({"arch": "mcan"}, 30, 7, sizes=TINY_SIZES)
    pa = build_model({"arch": "mcan", "positional": ["pwa", "poa", "pma"]}, 30, 7, sizes=TINY_SIZES)
    batch = example_batch(1, TINY_SIZES, num_tokens=30)
    base = count_flops(mcan, batch)
    # the classifier alone: 2 * 24 * 7 multiply-adds; image projection 2 * 5 * 12 * 16
    assert base > 2 * 24 * 7 + 2 * 5 * 12 * 16
    # POA's W^G alone adds 2 * N^2 * geometry_dim * layers * heads
    n, g = TINY_SIZES["max_boxes"], TINY_SIZES["geometry_dim"]
    assert count_flops(pa, batch) - base >= 2 * n * n * g * TINY_SIZES["layers"] * TINY_SIZES["heads"]
    assert count_flops(mcan, batch, backward=True) > 2 * base


@pytest.mark.slow
def test_complexity_reports_params_flops_and_time_at_paper_sizes():
    out = complexity(McanConfig(arch="mcan"), repeats=1)
    torch.manual_seed(0)
    assert out["params"] == count_parameters(build_model({"arch": "mcan"})) == 57_812_491
    assert out["flops"] > 0 and out["inference_s"] > 0 and out["flops_g"] == out["flops"] / 1e9
    with pytest.raises(ReproError, match="repeats"):
        complexity(McanConfig(arch="mcan"), repeats=0)
