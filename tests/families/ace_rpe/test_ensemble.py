"""ace-rpe's seeds trained together: ALBEF's pre-training and retrieval steps mapped over stacked seeds (momentum
copies and queues included) are each seed's own step; `repro run --ensemble` trains the stages that map together
and the others one seed at a time."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

from repro.cli import app
from repro.families.ace_rpe.build import build_model
from repro.families.ace_rpe.config import ALBEFConfig
from tests.conftest import copy_spec
from tests.families.ace_rpe.tiny import TINY_SIZES, tiny_batch


@pytest.mark.parametrize(("position", "task"), [("ace-rpe", "pretrain"), ("none", "retrieval")])
def test_a_mapped_step_is_each_seeds_own_step_queues_and_momentum_included(position, task, monkeypatch):
    # ITM's hard negatives drawn as the likeliest (vmap draws no "same" multinomial from per-seed weights); the
    # other draws (MLM, MIM) are the same for each seed as for its lone step
    monkeypatch.setattr(torch, "multinomial", lambda weights, n: weights.topk(n, dim=-1).indices)
    config = ALBEFConfig(arch="albef", position_embedding=position, anchor_loss=position == "ace-rpe")
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(build_model(config, TINY_SIZES, task=task))
    batch = tiny_batch()
    params, buffers = stack_module_state(models)
    params = {k: v.detach().requires_grad_(models[0].get_parameter(k).requires_grad) for k, v in params.items()}
    base = copy.deepcopy(models[0]).to("meta")
    stacked = {k: v.expand(2, *v.shape).contiguous() for k, v in batch.items()}
    torch.manual_seed(7)
    together = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), randomness="same")(params, buffers, stacked)
    together.sum().backward()
    for k, model in enumerate(models):
        torch.manual_seed(7)
        alone = model(batch)
        alone.backward()
        assert together[k].item() == pytest.approx(alone.item(), rel=1e-5)
        grad = model.fusion.layer[0].crossattention.self.query.weight.grad
        assert torch.allclose(params["fusion.layer.0.crossattention.self.query.weight"].grad[k], grad, atol=1e-5)
        for name, value in model.named_buffers():  # the queues and their pointer moved as the lone step moved them
            assert torch.allclose(buffers[name][k], value, atol=1e-6), name
        momentum = dict(model.named_parameters())["fusion_m.layer.0.crossattention.self.key.weight"]
        assert torch.allclose(params["fusion_m.layer.0.crossattention.self.key.weight"][k], momentum, atol=1e-6)


RUN = ["run", "ace-rpe-table2-pe", "--scale", "smoke", "--rows", "ACE-RPE", "--seeds", "0,1"]


@pytest.mark.slow
def test_repro_run_trains_the_stages_that_map_together_and_the_others_alone(sandbox, runner):
    copy_spec(sandbox, "ace-rpe", "ace-rpe-table2-pe")
    folder = sandbox / "results" / "ace-rpe" / "ace-rpe-table2-pe" / "seeds"
    sides = {}
    for side, extra in (("together", ["--ensemble"]), ("lone", [])):  # together first: it pre-trains
        out = runner.invoke(app, [*RUN, *extra, "--workdir", str(sandbox / side)])
        assert out.exit_code == 0, out.output
        sides[side] = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}
        shutil.move(str(folder.parent), str(sandbox / f"results-{side}"))
    lone, together = sides["lone"], sides["together"]
    assert sorted(together) == sorted(lone) and len(lone) == 2
    for name in lone:
        a, b = lone[name]["training"], together[name]["training"]
        assert {k: v["steps"] for k, v in b.items() if isinstance(v, dict)} == {
            k: v["steps"] for k, v in a.items() if isinstance(v, dict)
        }
        assert b["ensemble"] == [0, 1] and "ensemble" not in a
        for stage in ("pretrain", "snli-ve", "nlvr2"):
            assert b[stage]["ensemble"] == [0, 1], stage
        for stage in ("vqa", "nlvr2_assign"):  # transformers' decoder masks and the pair sampling branch on data
            assert "ensemble" not in b[stage], stage
        # the lone run reads the pre-training the seeds stored together
        assert b["pretrain"]["reused"] is False and a["pretrain"]["reused"] is True
        assert a["pretrain"]["hash"] == b["pretrain"]["hash"] and a["pretrain"]["trained_by"]["together"] == 2
        assert set(together[name]["metrics"]) == set(lone[name]["metrics"])
