"""The optimisers a recipe may name: `OPTIMIZERS`, the one table of them (recipes are checked against it and
the trainer builds from it); adding one is one entry. torch is imported only when an optimiser is built."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Optimizer:
    torch_class: str  # its class in torch.optim; the learning rate comes from the recipe's schedule
    keys: frozenset[str]  # what a recipe's `optimizer:` may give besides its name


OPTIMIZERS: dict[str, Optimizer] = {
    "adam": Optimizer("Adam", frozenset({"betas", "eps", "weight_decay"})),
    "adamw": Optimizer("AdamW", frozenset({"betas", "eps", "weight_decay"})),
    "adamax": Optimizer("Adamax", frozenset({"betas", "eps", "weight_decay"})),
    "sgd": Optimizer("SGD", frozenset({"momentum", "weight_decay"})),
}
