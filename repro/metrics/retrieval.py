"""Image-text retrieval recall R@1/5/10 in both directions, as ALBEF's `itm_eval` computes it.

Function API::

    from repro.metrics import retrieval
    result = retrieval.evaluate(scores_i2t, scores_t2i, img2txt, txt2img)
    result.aggregate["tr@1"], result.aggregate["ir@5"], result.aggregate["r_mean"]

`scores_i2t` is (images x texts), `scores_t2i` (texts x images); ALBEF fills them separately (ITC
top-k re-scored by ITM, the rest at -100), so one is not the other's transpose. `img2txt[i]` lists
the text indices of image i (5 captions per image in Flickr30K/COCO), `txt2img[j]` is the image of
text j.

Rules from `itm_eval`: each row is ordered by `np.argsort(row)[::-1]` (numpy's default sort, then
reversed, so tied scores come out in that order, kept); an image's rank is the best position of
any of its texts; a text's rank is the position of its image; R@K = 100 * share of ranks < K
(text retrieval `tr@K` from image queries, image retrieval `ir@K` from text queries);
`tr_mean`/`ir_mean` average R@1, R@5, R@10 and `r_mean` averages those two.

Per-item values are the 0-based ranks, keyed "image:<i>" and "text:<j>".

`evaluate_rankings` is the generic form: any queries with a set of relevant ids and a ranked list
of returned ids; it gives `r@1`, `r@5`, `r@10` and per-query ranks.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from repro.errors import ReproError
from repro.metrics.base import MetricResult

KS = (1, 5, 10)


def _order(row: np.ndarray) -> np.ndarray:
    return np.argsort(row)[::-1]


def image_ranks(scores_i2t: np.ndarray, img2txt: Sequence[Sequence[int]]) -> np.ndarray:
    ranks = np.zeros(scores_i2t.shape[0])
    for index, row in enumerate(scores_i2t):
        position = np.empty(len(row), dtype=np.int64)
        position[_order(row)] = np.arange(len(row))
        ranks[index] = min(position[i] for i in img2txt[index]) if len(img2txt[index]) else 1e20
    return ranks


def text_ranks(scores_t2i: np.ndarray, txt2img: Sequence[int]) -> np.ndarray:
    ranks = np.zeros(scores_t2i.shape[0])
    for index, row in enumerate(scores_t2i):
        ranks[index] = np.flatnonzero(_order(row) == txt2img[index])[0]
    return ranks


def _recalls(ranks: np.ndarray, prefix: str) -> dict[str, float]:
    out = {f"{prefix}@{k}": 100.0 * len(np.where(ranks < k)[0]) / len(ranks) for k in KS}
    out[f"{prefix}_mean"] = (out[f"{prefix}@1"] + out[f"{prefix}@5"] + out[f"{prefix}@10"]) / 3
    return out


def evaluate(scores_i2t, scores_t2i, img2txt: Sequence[Sequence[int]], txt2img: Sequence[int]) -> MetricResult:
    i2t = np.asarray(scores_i2t, dtype=np.float64)
    t2i = np.asarray(scores_t2i, dtype=np.float64)
    n_img, n_txt = len(img2txt), len(txt2img)
    if i2t.shape != (n_img, n_txt) or t2i.shape != (n_txt, n_img):
        raise ReproError(
            f"recall: score matrices {i2t.shape} and {t2i.shape} do not fit {n_img} images "
            f"and {n_txt} texts (need ({n_img}, {n_txt}) and ({n_txt}, {n_img}))"
        )
    if any(not 0 <= j < n_txt for texts in img2txt for j in texts) or any(not 0 <= i < n_img for i in txt2img):
        raise ReproError("recall: an image-text link points outside the score matrices")
    tr, ir = image_ranks(i2t, img2txt), text_ranks(t2i, txt2img)
    aggregate = {**_recalls(tr, "tr"), **_recalls(ir, "ir")}
    aggregate["r_mean"] = (aggregate["tr_mean"] + aggregate["ir_mean"]) / 2
    per_item = {f"image:{i}": float(r) for i, r in enumerate(tr)}
    per_item.update({f"text:{j}": float(r) for j, r in enumerate(ir)})
    return MetricResult("recall", aggregate, per_item, n_img + n_txt)


def evaluate_rankings(
    relevant: Sequence[Sequence[Hashable]],
    ranked: Sequence[Sequence[Hashable]],
    query_ids: Sequence[Hashable] | None = None,
) -> MetricResult:
    """R@K over queries: rank = first position of any relevant id in the returned list (absent: miss)."""
    if len(relevant) != len(ranked):
        raise ReproError(f"recall: {len(relevant)} annotated queries but {len(ranked)} rankings")
    ranks = []
    for rel, returned in zip(relevant, ranked):
        rel = set(rel)
        ranks.append(next((pos for pos, item in enumerate(returned) if item in rel), float("inf")))
    arr = np.asarray(ranks, dtype=np.float64)
    ids = list(query_ids) if query_ids is not None else list(range(len(ranks)))
    aggregate = {f"r@{k}": 100.0 * float(np.sum(arr < k)) / len(arr) if len(arr) else float("nan") for k in KS}
    return MetricResult("recall", aggregate, dict(zip(ids, ranks)), len(ranks))
