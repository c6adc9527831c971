"""A tiny ALBEF configuration and batch for the ace-rpe tests (random weights, no download)."""

import torch

TINY_SIZES = {
    "hidden_size": 32,
    "heads": 2,
    "intermediate_size": 64,
    "image_layers": 2,
    "text_layers": 2,
    "fusion_layers": 2,
    "image_size": 32,
    "patch_size": 8,
    "vocab_size": 40,
    "max_positions": 16,
    "embed_dim": 16,
    "queue_size": 8,
    "dropout": 0.0,
    "pad_token_id": 0,
    "cls_token_id": 2,
    "sep_token_id": 3,
    "mask_token_id": 4,
}


def tiny_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (4, 7), generator=g)
    ids[:, 0] = 2
    mask = torch.ones(4, 7, dtype=torch.long)
    mask[1, 5:] = 0
    ids[1, 5:] = 0
    return {
        "image": torch.randn(4, 3, 32, 32, generator=g),
        "input_ids": ids,
        "attention_mask": mask,
        "idx": torch.tensor([0, 0, 1, 2]),
    }
