"""`VQADataset`: prepared questions joined with a feature store, as tensors a VQA model reads.

Items are dicts that `torch.utils.data.default_collate` batches as they are:
`question_id` (int), `tokens` LongTensor [14], `features` FloatTensor [max_boxes, dim] (float32
from the float16 store), `boxes` FloatTensor [max_boxes, 4] pixels, `box_count` (int),
`image_size` FloatTensor [2] = (W, H), and where the split has answers `target` FloatTensor
[num_answers] of soft scores. Stores with DSGANet depth also give `depth_hist` [max_boxes, 16] and
`depth_peak` LongTensor [max_boxes].
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from repro.data.store import FeatureStore
from repro.datasets.vqa import load_split
from repro.errors import ReproError


class VQADataset(Dataset):
    def __init__(self, prepared_dir: Path, split: str, store: FeatureStore) -> None:
        self.prepared_dir, self.split, self.store = Path(prepared_dir), split, store
        try:
            self.token_vocab: dict[str, int] = json.loads((self.prepared_dir / "token_vocab.json").read_text())
            self.answer_vocab: list[str] = json.loads((self.prepared_dir / "answer_vocab.json").read_text())
        except (OSError, ValueError) as exc:
            raise ReproError(f"{self.prepared_dir}: not a prepared VQA folder ({exc}); run repro prepare") from None
        emb = self.prepared_dir / "embeddings.npy"
        self.embeddings: torch.Tensor | None = torch.from_numpy(np.load(emb)) if emb.is_file() else None
        data = load_split(self.prepared_dir, split)
        self.question_ids = data["question_id"]
        self.image_ids = data["image_id"]
        self.tokens = torch.from_numpy(data["tokens"].astype(np.int64))
        self.target_index = data.get("target_index")
        self.target_score = data.get("target_score")
        missing = [int(i) for i in np.unique(self.image_ids) if int(i) not in store]
        if missing:
            raise ReproError(
                f"{store.path}: no features for {len(missing)} image(s) of split {split!r} "
                f"(e.g. {', '.join(map(str, missing[:3]))}); prepare the matching feature store"
            )

    @property
    def num_tokens(self) -> int:
        return len(self.token_vocab)

    @property
    def num_answers(self) -> int:
        return len(self.answer_vocab)

    @property
    def has_answers(self) -> bool:
        return self.target_index is not None

    def __len__(self) -> int:
        return len(self.question_ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        image = self.store.get(int(self.image_ids[index]))
        item: dict[str, Any] = {
            "question_id": int(self.question_ids[index]),
            "tokens": self.tokens[index],
            "features": torch.from_numpy(image["features"]).float(),  # torch converts float16 fast
            "boxes": torch.from_numpy(image["boxes"]),
            "box_count": image["count"],
            "image_size": torch.tensor([image["width"], image["height"]], dtype=torch.float32),
        }
        if "depth_hist" in image:
            item["depth_hist"] = torch.from_numpy(image["depth_hist"])
            item["depth_peak"] = torch.from_numpy(image["depth_peak"].astype(np.int64))
        if self.target_index is not None:
            target = torch.zeros(self.num_answers, dtype=torch.float32)
            idx, score = self.target_index[index], self.target_score[index]
            keep = idx >= 0
            target[torch.from_numpy(idx[keep].astype(np.int64))] = torch.from_numpy(score[keep])
            item["target"] = target
        return item
