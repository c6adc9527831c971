"""Peak memory per GPU of a paper-scale training run, estimated without allocating anything.

The estimate is the model's state plus the activations autograd saves for the backward pass:

  weights + gradients + optimiser states   every parameter's bytes; the trainable ones again for their
                                           gradient and once per optimiser state (Adam, AdamW, Adamax: 2;
                                           SGD with momentum: 1; plain SGD: 0), all fp32 as the trainer keeps them
  activations                              the tensors saved for backward by one forward pass on the family's
                                           example batch (`Hooks.example_batch`, every token and region present),
                                           each storage once, parameters left out (counted above), measured for
                                           one sample and times the per-GPU batch (the recipe's global batch
                                           over the unit's GPUs); halved under bf16/fp16 autocast
  ALLOWANCE_GIB                            the CUDA context and kernels, a fixed allowance

The model is built on PyTorch's `meta` device and the forward pass runs there: shapes only, no memory. The
allocator's fragmentation, the transient buffers of backward and the optimiser step are not counted: an
estimate of what a GPU must hold, not a guarantee that it fits.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

ALLOWANCE_GIB = 0.5  # the CUDA context (~0.3-0.5 GiB) and cuBLAS/cuDNN workspaces
GIB = 2**30
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "adamax": 2}  # exp_avg and exp_avg_sq (Adamax: exp_inf)
HALF = ("bf16", "fp16")  # autocast: activations in 16 bits, weights, gradients and states fp32


def optimizer_states(optimizer: dict[str, Any]) -> int:
    """Tensors the optimiser keeps per parameter: 2 for the Adam family, 1 for SGD with momentum, else 0."""
    name = str(optimizer.get("name", "")).lower()
    if name == "sgd":
        return 1 if float(optimizer.get("momentum", 0.0) or 0.0) else 0
    return OPTIMIZER_STATES.get(name, 2)


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int  # bytes of every parameter and buffer
    trainable: int  # bytes of the trainable parameters (each has a gradient and the optimiser's states)
    states: int  # optimiser states per trainable parameter
    per_sample: int  # saved-activation bytes of one sample
    batch: int  # per-GPU batch
    precision: str = "fp32"

    @property
    def model_bytes(self) -> int:
        return self.weights + self.trainable * (1 + self.states)

    @property
    def activation_bytes(self) -> float:
        scale = 0.5 if self.precision in HALF else 1.0
        return self.per_sample * self.batch * scale

    @property
    def gib(self) -> float:
        """Weights, gradients, optimiser states and saved activations, plus ALLOWANCE_GIB."""
        return (self.model_bytes + self.activation_bytes) / GIB + ALLOWANCE_GIB


@contextmanager
def _masks_built() -> Iterator[None]:
    """transformers leaves out the attention mask of a batch where every token is present, which it decides by
    reading the mask's values; a meta tensor has none to read ("Tensor.item() cannot be called on meta tensors"),
    so within this the mask is built, as for a padded batch (a mask's bytes, next to nothing of the estimate)."""
    masking = sys.modules.get("transformers.masking_utils")
    skip = getattr(masking, "_ignore_bidirectional_mask_sdpa", None)
    if skip is None:
        yield
        return
    masking._ignore_bidirectional_mask_sdpa = lambda *args, **kwargs: False
    try:
        yield
    finally:
        masking._ignore_bidirectional_mask_sdpa = skip


def saved_bytes(model: nn.Module, batch: dict[str, torch.Tensor]) -> int:
    """Bytes of the tensors one training-mode forward pass of `model` on `batch` saves for backward, each storage
    counted once, the model's parameters and buffers left out; the batch itself is counted (it stays on the GPU)."""
    own = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers()]}
    seen: dict[int, int] = {}

    def add(tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        if storage._cdata not in own:
            seen[storage._cdata] = storage.nbytes()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        add(tensor)
        return tensor

    for value in batch.values():
        if isinstance(value, torch.Tensor):
            add(value)
    was_training = model.training
    model.train()
    try:
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _masks_built():
            model(batch)
    finally:
        model.train(was_training)
    return sum(seen.values())


def on_meta(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def estimate(
    build: Callable[[], nn.Module],
    example_batch: Callable[[int], dict[str, torch.Tensor]],
    *,
    batch: int,
    optimizer: dict[str, Any],
    precision: str = "fp32",
) -> MemoryEstimate:
    """The estimate for the model `build()` makes (on `meta`) trained with `optimizer` at `batch` per GPU;
    `example_batch(n)` makes a batch of n samples (on any device: it is moved to `meta`)."""
    with torch.device("meta"):
        model = build()
    model.to("meta")
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return MemoryEstimate(
        weights=weights,
        trainable=trainable,
        states=optimizer_states(optimizer),
        per_sample=saved_bytes(model, on_meta(example_batch(1))),
        batch=batch,
        precision=precision,
    )


def row_estimate(
    hooks: Any, config: Any, recipe: Any, gpus: int, *, build: Callable | None = None, example: Callable | None = None
) -> MemoryEstimate | None:
    """A family's row at paper sizes under `recipe` on `gpus` GPUs (`build` and `example`: a stage's own model and
    batch, else the family's `build_model` and `example_batch`); None where the family has no example batch."""
    if example is None and hooks.example_batch is None:
        return None
    takes_config = example is None and "config" in inspect.signature(hooks.example_batch).parameters

    def family_example(n: int) -> dict[str, torch.Tensor]:
        return hooks.example_batch(n, seed=0, **({"config": config} if takes_config else {}))

    precision = "fp32" if recipe.precision == "auto" else recipe.precision
    return estimate(
        build or (lambda: hooks.build_model(config)),
        example or family_example,
        batch=max(1, recipe.batch_size // max(gpus, 1)),
        optimizer=recipe.optimizer,
        precision=precision,
    )
