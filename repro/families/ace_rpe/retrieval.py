"""ALBEF's retrieval evaluation (`Retrieval.py` evaluation()): ITC similarity for all pairs, the top k of
each query re-scored by the ITM head (k = 128 for Flickr30K, 256 for COCO; at most the gallery); the
recalls are `repro.metrics.retrieval`'s."""

from __future__ import annotations

import torch

from repro.families.ace_rpe.data import load_image


@torch.no_grad()
def score_matrices(model, test, tok, size: int, k: int, batch_size: int = 64, max_tokens: int = 30):
    """ALBEF's score matrices: ITC similarity for all pairs, the top k of each row re-scored by the ITM
    head's positive logit, every other entry -100. Under torchrun each rank re-scores its share of the
    rows and the matrices are summed over the ranks, as ALBEF's evaluation() does."""
    import torch.distributed as dist

    model.eval()
    device = next(model.parameters()).device
    text_embeds, text_masks, text_feats = [], [], []
    for start in range(0, len(test.texts), batch_size):
        enc = tok(
            test.texts[start : start + batch_size],
            padding="max_length",
            truncation=True,
            max_length=max_tokens,
            return_tensors="pt",
        ).to(device)
        embeds = model.text_embeds(enc["input_ids"], enc["attention_mask"])
        text_embeds.append(embeds)
        text_masks.append(enc["attention_mask"])
        text_feats.append(model.text_feat(embeds))
    text_embeds, text_masks, text_feats = torch.cat(text_embeds), torch.cat(text_masks), torch.cat(text_feats)
    image_embeds, image_feats = [], []
    for start in range(0, len(test.images), batch_size):
        images = torch.stack([load_image(p, size) for p in test.images[start : start + batch_size]]).to(device)
        embeds = model.image_embeds(images)
        image_embeds.append(embeds)
        image_feats.append(model.image_feat(embeds))
    image_embeds, image_feats = torch.cat(image_embeds), torch.cat(image_feats)
    ranks = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    rank = dist.get_rank() if ranks > 1 else 0
    sims = image_feats @ text_feats.T
    i2t = torch.zeros(sims.shape, device=device)  # rows of other ranks stay 0 until the sum
    t2i = torch.zeros(sims.T.shape, device=device)
    for scores, query_is_image in ((i2t, True), (t2i, False)):
        rows = list(range(rank, scores.shape[0], ranks))
        if not rows:
            continue
        similarity = sims[rows] if query_is_image else sims.T[rows]
        top = similarity.topk(min(k, scores.shape[1]), dim=1).indices  # (queries, k)
        queries = torch.tensor(rows, device=device)[:, None].expand_as(top).reshape(-1)
        candidates = top.reshape(-1)
        images, texts = (queries, candidates) if query_is_image else (candidates, queries)
        logits = torch.cat(
            [  # the ITM head on (text, image) pairs, `batch_size` pairs at a time
                model.itm_logits(text_embeds[t], text_masks[t], image_embeds[i])[:, 1]
                for i, t in zip(images.split(batch_size), texts.split(batch_size))
            ]
        )
        scores[rows] = -100.0
        scores[queries, candidates] = logits
    if ranks > 1:
        dist.all_reduce(i2t)
        dist.all_reduce(t2i)
    return i2t.cpu().numpy(), t2i.cpu().numpy()
