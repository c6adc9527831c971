"""One rank of the DDP tests of task heads: `torchrun --nproc_per_node=2 -m tests.ddp_heads_worker WORKDIR`, or
one process with the global batch (`python -m tests.ddp_heads_worker WORKDIR`).

Two models train by `repro.train.fit`, each loss through the wrapped module's forward: ace-rpe's SNLI-VE head
(the loss is TaskALBEF.forward) and a model whose loss leaves a module out (`find_unused_parameters`). Each
saves its weights after two SGD steps and its gradients to WORKDIR/<model>.rank<R>.pt (`single` for one
process)."""

import os
import sys
from pathlib import Path

import torch
from torch import nn

from repro.families.ace_rpe.build import build_model, loss_step
from repro.families.ace_rpe.config import ALBEFConfig
from repro.train import fit
from repro.train.recipe import Recipe
from tests.families.ace_rpe.tiny import TINY_SIZES

GLOBAL_BATCH = 4


class SwitchedOff(nn.Module):
    """A model with a module its loss never uses (a row that switches a module off)."""

    find_unused_parameters = True

    def __init__(self) -> None:
        super().__init__()
        self.used, self.off = nn.Linear(6, 3), nn.Linear(6, 3)

    def forward(self, batch):
        return nn.functional.cross_entropy(self.used(batch["x"]), batch["label"])


def data(name: str) -> list[dict]:
    g = torch.Generator().manual_seed(7)
    if name == "switched-off":
        return [{"x": torch.randn(6, generator=g), "label": torch.tensor(i % 3)} for i in range(2 * GLOBAL_BATCH)]
    ids = torch.randint(5, 40, (2 * GLOBAL_BATCH, 7), generator=g)
    ids[:, 0] = 2
    return [
        {
            "image": torch.randn(3, 32, 32, generator=g),
            "input_ids": ids[i],
            "attention_mask": torch.ones(7, dtype=torch.long),
            "label": torch.tensor(i % 3),
        }
        for i in range(2 * GLOBAL_BATCH)
    ]


def model(name: str) -> nn.Module:
    torch.manual_seed(0)
    if name == "switched-off":
        return SwitchedOff()
    return build_model(ALBEFConfig(arch="albef"), {**TINY_SIZES, "alpha": 0.0}, task="snli-ve")


def main(workdir: Path) -> None:
    rank = os.environ.get("RANK", "single")
    recipe = Recipe(
        name="ddp-heads",
        optimizer={"name": "sgd"},
        schedule={"name": "constant", "base_lr": 0.05},
        epochs=1,
        batch_size=GLOBAL_BATCH,
        loss="per-task",
        seed=3,
        precision="fp32",
    )
    for name in ("snli-ve", "switched-off"):
        net = model(name)
        grads = {}
        fit(
            net,
            data(name),
            recipe,
            workdir / f"{name}.{rank}",
            progress=False,
            loss_step=loss_step("snli-ve"),
            on_step=lambda step, net=net, grads=grads: grads.update(
                {step: {k: p.grad.clone() for k, p in net.named_parameters() if p.grad is not None}}
            ),
        )
        torch.save({"weights": net.state_dict(), "grads": grads}, workdir / f"{name}.rank{rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
