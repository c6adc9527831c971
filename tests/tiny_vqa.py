"""A tiny VQA-shaped dataset and model sizes for model and training tests (CPU, well under a second)."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

TINY_SIZES = {
    "d_model": 16,
    "layers": 2,
    "heads": 2,
    "ffn": 32,
    "flat_out": 24,
    "flat_mlp": 16,
    "embed_dim": 8,
    "max_tokens": 6,
    "max_boxes": 5,
    "feature_dim": 12,
    "geometry_dim": 16,
}
NUM_TOKENS, NUM_ANSWERS = 30, 7

TABLE5_CONFIGS = {
    "MCAN": {"arch": "mcan"},
    "MCAN+PE": {"arch": "mcan", "position_embedding": "bert"},
    "MCAN+PWA": {"arch": "mcan", "positional": ["pwa"]},
    "MCAN+POA": {"arch": "mcan", "positional": ["poa"]},
    "MCAN+PMA": {"arch": "mcan", "positional": ["pma"]},
    "MCAN+PWA+POA": {"arch": "mcan", "positional": ["pwa", "poa"]},
    "MCAN+PWA+PMA": {"arch": "mcan", "positional": ["pwa", "pma"]},
    "MCAN+POA+PMA": {"arch": "mcan", "positional": ["poa", "pma"]},
    "MCAN+PA*": {"arch": "mcan", "positional": ["pwa", "poa", "pma"], "fusion": "relation-network"},
    "MCAN+PA": {"arch": "mcan", "positional": ["pwa", "poa", "pma"], "fusion": "eq8"},
}


class TinyVQA(Dataset):
    """Random questions (some padded), regions (some padded) with pixel boxes, soft answer scores."""

    def __init__(self, n: int = 24, seed: int = 0, sizes: dict | None = None):
        s = sizes or TINY_SIZES
        g = torch.Generator().manual_seed(seed)
        t, m, f = s["max_tokens"], s["max_boxes"], s["feature_dim"]
        self.tokens = torch.randint(1, NUM_TOKENS, (n, t), generator=g)
        lengths = torch.randint(2, t + 1, (n,), generator=g)
        self.tokens[torch.arange(t)[None, :] >= lengths[:, None]] = 0
        counts = torch.randint(1, m + 1, (n,), generator=g)
        present = torch.arange(m)[None, :] < counts[:, None]
        self.features = torch.rand(n, m, f, generator=g) * present[..., None]
        xy = torch.rand(n, m, 2, generator=g) * 300
        wh = 5 + torch.rand(n, m, 2, generator=g) * 200
        self.boxes = torch.cat([xy, xy + wh], -1) * present[..., None]
        self.counts = counts
        self.image_size = torch.tensor([[640.0, 480.0]]).repeat(n, 1)
        self.target = (torch.rand(n, NUM_ANSWERS, generator=g) > 0.7).float() * 0.9

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "tokens": self.tokens[i],
            "features": self.features[i],
            "boxes": self.boxes[i],
            "box_count": self.counts[i],
            "image_size": self.image_size[i],
            "target": self.target[i],
            "question_id": torch.tensor(1000 + i),
        }


def tiny_batch(n: int = 4, seed: int = 0) -> dict[str, torch.Tensor]:
    data = TinyVQA(n, seed)
    return {k: torch.stack([data[i][k] for i in range(n)]) for k in data[0]}
