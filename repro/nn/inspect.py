"""Looking inside a model: the attention maps of every `MultiHeadAttention` it runs.

`scaled_dot_product_attention` never materialises the map, so a forward hook recomputes it from the
module's own projections, scale, bias and key mask: softmax(q·kᵀ·scale + bias + mask), per head, the
map the module used (dropout aside: record in eval mode).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from repro.nn.attention import MultiHeadAttention, attention_bias


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Inside the block, each forward of a MultiHeadAttention stores its map [B, heads, Nq, Nk] under the
    module's name (the last call wins)."""
    maps: dict[str, torch.Tensor] = {}
    handles = []

    def hook(name: str):
        def record(module: MultiHeadAttention, args, kwargs, output) -> None:
            query, key = args[0], args[1]
            q, k = module.split(module.q(query)), module.split(module.k(key))
            scale = kwargs.get("scale") or 1.0 / math.sqrt(module.d_head)
            logits = q @ k.transpose(-1, -2) * scale
            mask = attention_bias(kwargs.get("bias"), kwargs.get("key_padding_mask"), logits.dtype)
            maps[name] = torch.softmax(logits if mask is None else logits + mask, dim=-1).detach()

        return record

    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            handles.append(module.register_forward_hook(hook(name), with_kwargs=True))
    try:
        yield maps
    finally:
        for handle in handles:
            handle.remove()
