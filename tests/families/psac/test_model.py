"""PSAC model, the paper's network: parameter counts against the official code's, forward shapes and losses of every
task and ablation (the official network: test_official.py)."""

from __future__ import annotations

import pytest
import torch

from repro.families.psac import build
from repro.families.psac.model import count_prediction, sinusoid

SMOKE = {
    "video_dim": 16,
    "frames": 6,
    "heads": 2,
    "vpsa_ffn": 8,
    "video_pos_dim": 0,
    "hidden": 8,
    "word_dim": 6,
    "char_dim": 4,
    "char_kernel": 2,
    "highway_layers": 1,
    "ds_convs": 1,
    "ds_kernel": 3,
    "qpsa_ffn": 8,
    "max_words": 7,
    "max_chars": 4,
    "classifier_hidden": 8,
    "bilstm_hidden": 4,
}
FULL = {
    "arch": "psac",
    "network": "paper",
    "video_encoder": "vpsa",
    "vpsa_layers": 1,
    "char_embedding": True,
    "co_attention": ["v2q", "q2v"],
}


def test_trainable_parameters_within_one_percent_of_the_official_code_per_task():
    infos = {m.task: m for m in build.describe(FULL)}
    assert sorted(infos) == sorted(build.TASKS)
    for task, info in infos.items():
        modules = dict(info.modules)
        without_tables = info.trainable_params - modules["char_table"]
        official = build.official_parameters(task)
        assert abs(without_tables - official) / official < 0.01, (task, without_tables, official)  # +0.95% / +0.89%
        assert info.total_params > info.trainable_params  # the frozen GloVe table
    assert build.official_parameters("action") == 26_154_037  # lixiangpengcs/PSAC: 19,514,416 + 6,113,282 + 526,339
    assert infos["frameqa"].trainable_params - infos["action"].trainable_params == 1024 * 1745 + 1745


@pytest.mark.parametrize(
    "model",
    [
        FULL,
        {"arch": "psac", "network": "paper", "video_encoder": "none", "co_attention": ["v2q", "q2v"]},
        {"arch": "psac", "network": "paper", "video_encoder": "vpsa", "vpsa_layers": 3},
        {"arch": "psac", "network": "paper", "video_encoder": "bilstm", "bilstm_hidden": 4},
        {"arch": "psac", "network": "paper", "char_embedding": False},
        {"arch": "psac", "network": "paper", "co_attention": []},
        {"arch": "psac", "network": "paper", "co_attention": ["q2v"]},
    ],
)
@pytest.mark.parametrize("task", build.TASKS)
def test_every_task_and_ablation_runs_forward_and_backward(model, task):
    torch.manual_seed(0)
    net = build.build_model(model, SMOKE, task=task, num_words=30, num_chars=12, num_answers=9)
    batch = build.example_batch(3, SMOKE, task=task, num_words=30, num_chars=12)
    out = net(batch)
    expected = {"action": (3, 5), "transition": (3, 5), "frameqa": (3, 9), "count": (3,)}[task]
    assert out.shape == expected
    batch["target"] = {
        "action": torch.tensor([0, 4, 2]),
        "transition": torch.tensor([1, 1, 3]),
        "frameqa": torch.tensor([0, 8, 3]),
        "count": torch.tensor([1.0, 4.0, 10.0]),
    }[task]
    loss = build.loss_step(task)(net, batch)
    loss.backward()
    assert torch.isfinite(loss)
    assert net.question_encoder.word_emb.weight.grad is None  # GloVe stays frozen


def test_vpsa_depth_and_word_only_question_change_the_modules():
    base = dict(build.parts(build.build_model(FULL, SMOKE, num_words=30, num_chars=12)))
    deep = dict(build.parts(build.build_model({**FULL, "vpsa_layers": 2}, SMOKE, num_words=30, num_chars=12)))
    assert deep["video_encoder"] == 2 * base["video_encoder"]
    words = dict(build.parts(build.build_model({**FULL, "char_embedding": False}, SMOKE, num_words=30, num_chars=12)))
    assert words["char_table"] == 0 and words["question_encoder"] < base["question_encoder"]
    none = dict(build.parts(build.build_model({**FULL, "video_encoder": "none", "vpsa_layers": 0}, SMOKE)))
    assert none["video_encoder"] == 0


def test_count_is_clipped_to_one_to_ten_then_rounded_and_scored_as_mse():
    assert count_prediction(torch.tensor([-3.0, 0.4, 2.6, 11.2])).tolist() == [1.0, 1.0, 3.0, 10.0]
    assert build.score("count", torch.tensor([[2.4], [7.0]]), torch.tensor([3, 5])) == pytest.approx((1 + 4) / 2)
    assert build.score("action", torch.tensor([[0.0, 1.0], [2.0, 1.0]]), torch.tensor([1, 1])) == 50.0


def test_hinge_loss_is_zero_once_the_right_candidate_leads_by_the_margin():
    class Fixed(torch.nn.Module):
        def forward(self, batch):
            return batch["scores"]

    step = build.loss_step("action")
    good = {"scores": torch.tensor([[3.0, 1.0, 0.5, 0.0, 1.9]]), "target": torch.tensor([0])}
    bad = {"scores": torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0]]), "target": torch.tensor([0])}
    assert step(Fixed(), good) == 0 and step(Fixed(), bad) > 0


def test_positional_matrix_follows_eq_5_and_6():
    p = sinusoid(4, 6)
    assert p[0].tolist() == pytest.approx([0, 1, 0, 1, 0, 1])
    assert p[3, 2].item() == pytest.approx(torch.sin(torch.tensor(3 / 10000 ** (2 / 6))).item())
    assert p[3, 3].item() == pytest.approx(torch.cos(torch.tensor(3 / 10000 ** (2 / 6))).item())


def test_repro_model_reports_four_task_models(runner):
    import json

    from repro.cli import app

    out = runner.invoke(app, ["model", "psac-table2-sota", "--row", "PSAC(R)", "--format", "json"])
    assert out.exit_code == 0, out.output
    models = json.loads(out.output)["models"]
    assert [m["task"] for m in models] == list(build.TASKS)
