"""Cross-modal position embeddings of the ACE-RPE paper (Sec. 3.2, 4.3, A.1-A.4) for ALBEF's fusion encoder.

ALBEF's fusion layers let text tokens (queries) attend to image patches (keys, values), so of the
paper's two directions only F_t2i exists. Every variant returns an `Injection` that the fusion
layers read (`repro.families.ace_rpe.model.fusion_layer`):

- `ape`, `rpe`, `ape+rpe` (Sec. 4.3): per-modality embeddings added once to the fusion encoder's
  inputs (text states and image patch embeddings), the two modalities' embeddings side by side;
- `uniform` (the † row) and `ace-rpe` (Eq. 3-8): a G-vector P(x_m, y_n) for every token-patch pair,
  embedded by W (Eq. 8) in each fusion layer's cross-attention, in bias mode (Eq. 9) or contextual
  mode (Eq. 10-12) on the query, key and/or value.

E_ace = P W is linear in P, so the averages of Eq. 10 and the attention-weighted sum of Eq. 12 are
taken over P (B x N x M x G) before W: the M x N x D tensor of Eq. 9 is never built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Injection:
    """What a position embedding hands the fusion encoder for one batch."""

    text_add: torch.Tensor | None = None  # (B, N, D) added to the fusion input text states (APE/RPE)
    image_add: torch.Tensor | None = None  # (B, M+1, D) added to the image embeddings (APE/RPE)
    pairs: torch.Tensor | None = None  # P: (B, N, M+1, G), zero on the [CLS] rows/columns (ACE-RPE, Uniform)
    text_mask: torch.Tensor | None = None  # (B, N) 1 for real tokens: Eq. 10's average over words


# --- anchor locating and anchor-based relative positions (Eq. 3-7) ---------------------------------


def multi_group_similarity(patches: torch.Tensor, tokens: torch.Tensor, groups: int) -> torch.Tensor:
    """S_G(x_m, y_n) of Eq. 3: cosine similarity in each of G groups of D/G channels; (B, N, M, G)."""
    b, m, d = patches.shape
    n = tokens.shape[1]
    x = F.normalize(patches.reshape(b, m, groups, d // groups), dim=-1)
    y = F.normalize(tokens.reshape(b, n, groups, d // groups), dim=-1)
    return torch.einsum("bmgc,bngc->bnmg", x, y)


def soft_shrink(similarity: torch.Tensor, delta: float, tau: float) -> torch.Tensor:
    """Ŝ_G of Eq. 4: kept at or above delta, delta * exp(tau (S - delta)) below it."""
    below = delta * torch.exp(tau * (similarity.clamp(max=delta) - delta))
    return torch.where(similarity >= delta, similarity, below)


def anchors(shrunk: torch.Tensor, delta: float, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """A_G(x, y) of Eq. 5: per group, the patches some (real) token reaches with Ŝ >= delta; (B, M, G) bool."""
    hit = shrunk >= delta
    if token_mask is not None:
        hit = hit & token_mask.bool()[:, :, None, None]
    return hit.any(dim=1)


def max_distance(delta: float, bt: int, bp: int) -> float:
    """The cap of P_ace: the longest path through an anchor (D_G <= 1/delta, then the two neighbourhoods)."""
    return 1.0 / delta + math.hypot(bt // 2, bt // 2) + bp // 2


def anchor_relative_position(
    shrunk: torch.Tensor, grid: int, bt: int, bp: int, cap: float, token_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """P_ace of Eq. 7 from Ŝ_G (B, N, M, G): min over patches x_i in the Bt x Bt square around x_m
    and tokens y_j within Bp // 2 of y_n of D_p2p(x_m, x_i) + D_G(x_i, y_j) + D_t2t(y_j, y_n), per group.

    D_G = 1 / Ŝ_G (Eq. 6); D_p2p is the Euclidean grid distance, D_t2t the token distance |j - n|.
    Paths that reach no anchor are capped at `cap`, so every far pair shares one distance.
    """
    b, n, m, g = shrunk.shape
    dist = 1.0 / shrunk.clamp(min=1.0 / cap)  # Eq. 6, capped (clamped first: no infinite gradient)
    if token_mask is not None:  # padding is no route
        dist = dist.masked_fill(~token_mask.bool()[:, :, None, None], cap)
    r, s = bp // 2, bt // 2
    offsets = [(dy, dx) for dy in range(-s, s + 1) for dx in range(-s, s + 1)]
    with torch.no_grad():  # the minima and which D_G each one took; the gradient flows through that D_G below
        # text neighbourhood: min over j of D_G(x_i, y_j) + |j - n|
        padded = F.pad(dist, (0, 0, 0, 0, r, r), value=cap)
        via_text, text_pick = torch.stack([padded[:, r + o : r + o + n] + abs(o) for o in range(-r, r + 1)]).min(0)
        # patch neighbourhood on the grid: min over i of D_p2p(x_m, x_i) + the above
        padded = F.pad(via_text.reshape(b, n, grid, grid, g), (0, 0, s, s, s, s), value=cap)
        moved = [
            padded[:, :, s + dy : s + dy + grid, s + dx : s + dx + grid] + math.hypot(dx, dy) for dy, dx in offsets
        ]
        best, patch_pick = torch.stack(moved).min(0)
        best, patch_pick = best.reshape(b, n, m, g), patch_pick.reshape(b, n, m, g)
        # the patch x_i and token y_j on each pair's shortest path (off the grid or text: a capped constant)
        cells = torch.arange(m, device=dist.device)[None, None, :, None]
        step = torch.tensor(offsets, device=dist.device)[patch_pick]  # (B, N, M, G, 2)
        row, col = cells // grid + step[..., 0], cells % grid + step[..., 1]
        on_path = (row >= 0) & (row < grid) & (col >= 0) & (col < grid)
        patch = row.clamp(0, grid - 1) * grid + col.clamp(0, grid - 1)
        token = torch.arange(n, device=dist.device)[None, :, None, None] + text_pick.gather(2, patch) - r
        on_path &= (token >= 0) & (token < n) & (best < cap)
        index = (token.clamp(0, n - 1) * m + patch).reshape(b, n * m, g)
    taken = dist.reshape(b, n * m, g).gather(1, index).reshape(b, n, m, g)
    # the value of the minimum, the gradient of the D_G it took (as the minimum's own gradient)
    return best.clamp(max=cap) + torch.where(on_path, taken - taken.detach(), torch.zeros_like(taken))


# --- the embeddings ------------------------------------------------------------------------------------


class ACERPE(nn.Module):
    """ACE-RPE (Eq. 3-8) or its anchor-free Uniform† variant; W of Eq. 8 per fusion layer or shared (Table 6)."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        layers: int,
        *,
        groups: int,
        mode: str,
        shared: bool,
        apply_to: tuple[str, ...],
        anchored: bool,
        delta: float = 0.05,
        tau: float = 1e4,
        bt: int = 5,
        bp: int = 9,
    ) -> None:
        super().__init__()
        self.groups, self.mode, self.apply_to, self.anchored = groups, mode, tuple(apply_to), anchored
        self.delta, self.tau, self.bt, self.bp = delta, tau, bt, bp
        self.heads, self.layers, self.shared = heads, layers, shared
        count = 1 if shared else layers
        self.W = nn.ParameterList([nn.Parameter(torch.randn(groups, hidden) * 0.02) for _ in range(count)])  # Eq. 8
        if mode == "bias":  # W_E of Eq. 9, one vector per W
            self.W_E = nn.ParameterList([nn.Parameter(torch.randn(hidden) * 0.02) for _ in range(count)])

    def weight(self, layer: int) -> torch.Tensor:
        return self.W[0 if self.shared else layer]

    def forward(self, text: torch.Tensor, text_mask: torch.Tensor, image: torch.Tensor) -> Injection:
        b, n, _ = text.shape
        m = image.shape[1] - 1
        if self.anchored:
            grid = math.isqrt(m)
            shrunk = soft_shrink(multi_group_similarity(image[:, 1:], text, self.groups), self.delta, self.tau)
            cap = max_distance(self.delta, self.bt, self.bp)
            body = anchor_relative_position(shrunk, grid, self.bt, self.bp, cap, text_mask)
        else:  # †: one uniform distance for every word and patch
            body = text.new_ones(b, n, m, self.groups)
        pairs = F.pad(body, (0, 0, 1, 0))  # image [CLS] column: no position
        pairs = torch.cat([torch.zeros_like(pairs[:, :1]), pairs[:, 1:]], dim=1)  # text [CLS] row: none
        return Injection(pairs=pairs, text_mask=text_mask)

    # Called by each fusion layer with the injection's P.
    def logit_bias(self, inj: Injection, layer: int) -> torch.Tensor | None:
        """Bias mode, Eq. 9: E_ace W_E = P (W W_E), one scalar per token-patch pair; (B, 1, N, M+1)."""
        if self.mode != "bias":
            return None
        k = 0 if self.shared else layer
        return (inj.pairs @ (self.W[k] @ self.W_E[k]))[:, None]

    def query_add(self, inj: Injection, layer: int) -> torch.Tensor | None:
        """Contextual mode, Eq. 10 (text side): y_n + mean over patches of E_ace(x_m, y_n); (B, N, D)."""
        if self.mode != "contextual" or "query" not in self.apply_to:
            return None
        return inj.pairs.mean(dim=2) @ self.weight(layer)

    def key_add(self, inj: Injection, layer: int) -> torch.Tensor | None:
        """Contextual mode, Eq. 10 (image side): x_m + mean over the words of E_ace(x_m, y_n); (B, M+1, D)."""
        if self.mode != "contextual" or "key" not in self.apply_to:
            return None
        w = inj.text_mask.to(inj.pairs.dtype)
        mean = torch.einsum("bnmg,bn->bmg", inj.pairs, w) / w.sum(1).clamp(min=1)[:, None, None]
        return mean @ self.weight(layer)

    def value_add(self, inj: Injection, layer: int, probs: torch.Tensor) -> torch.Tensor | None:
        """Contextual mode, Eq. 12: sigma(F_t2i)(x W_V + E_ace) adds sum_m a_nm E_ace(x_m, y_n); (B, H, N, D/H)."""
        if self.mode != "contextual" or "value" not in self.apply_to:
            return None
        mixed = torch.einsum("bhnm,bnmg->bhng", probs, inj.pairs)
        w = self.weight(layer).reshape(self.groups, self.heads, -1)  # each head's slice of E_ace
        return torch.einsum("bhng,ghc->bhnc", mixed, w)


class ModalityPosition(nn.Module):
    """APE, RPE or APE+RPE of Sec. 4.3, for each modality apart, added to the fusion encoder's inputs.

    APE: learned absolute embeddings of the token index and of the patch index ([CLS] included).
    RPE: learned embeddings of the relative offset (token offset; 2-D patch offset), averaged over the
    other tokens (patches) of the same modality, the pooled form Eq. 10 uses for ACE-RPE.
    """

    def __init__(self, hidden: int, max_tokens: int, grid: int, absolute: bool, relative: bool) -> None:
        super().__init__()
        self.grid, self.absolute, self.relative = grid, absolute, relative
        if absolute:
            self.text_absolute = nn.Embedding(max_tokens, hidden)
            self.image_absolute = nn.Embedding(grid * grid + 1, hidden)
        if relative:
            self.text_relative = nn.Embedding(2 * max_tokens - 1, hidden)
            self.image_relative = nn.Embedding((2 * grid - 1) ** 2, hidden)
        self.max_tokens = max_tokens
        for module in self.children():
            nn.init.normal_(module.weight, std=0.02)

    def _image_offsets(self, device) -> torch.Tensor:
        """(M, (2g-1)^2): the share of patches at each 2-D offset from patch m (all patches are real)."""
        g = self.grid
        ys, xs = torch.meshgrid(torch.arange(g, device=device), torch.arange(g, device=device), indexing="ij")
        ys, xs = ys.reshape(-1), xs.reshape(-1)
        index = (ys[None, :] - ys[:, None] + g - 1) * (2 * g - 1) + (xs[None, :] - xs[:, None] + g - 1)
        share = torch.zeros(g * g, (2 * g - 1) ** 2, device=device)
        share.scatter_add_(1, index, torch.full_like(index, 1.0 / (g * g), dtype=torch.float))
        return share

    def forward(self, text: torch.Tensor, text_mask: torch.Tensor, image: torch.Tensor) -> Injection:
        b, n, d = text.shape
        device = text.device
        text_add = text.new_zeros(b, n, d)
        image_add = image.new_zeros(1, image.shape[1], d)
        if self.absolute:
            text_add = text_add + self.text_absolute(torch.arange(n, device=device))[None]
            image_add = image_add + self.image_absolute(torch.arange(image.shape[1], device=device))[None]
        if self.relative:
            offsets = torch.arange(n, device=device)
            table = self.text_relative(offsets[None, :] - offsets[:, None] + self.max_tokens - 1)  # (N, N, D)
            w = text_mask.to(text.dtype)
            text_add = text_add + torch.einsum("nkd,bk->bnd", table, w) / w.sum(1).clamp(min=1)[:, None, None]
            patches = self._image_offsets(device) @ self.image_relative.weight  # (M, D)
            image_add = image_add + F.pad(patches, (0, 0, 1, 0))[None]  # [CLS]: no relative position
        return Injection(text_add=text_add, image_add=image_add.expand(b, -1, -1), text_mask=text_mask)

    def logit_bias(self, inj: Injection, layer: int):
        return None

    def query_add(self, inj: Injection, layer: int):
        return None

    def key_add(self, inj: Injection, layer: int):
        return None

    def value_add(self, inj: Injection, layer: int, probs: torch.Tensor):
        return None


def build_position(config, hidden: int, heads: int, layers: int, max_tokens: int, grid: int) -> nn.Module | None:
    """The position embedding a typed config names (None for `none`)."""
    pe = config.position_embedding
    if pe == "none":
        return None
    if pe in ("ape", "rpe", "ape+rpe"):
        return ModalityPosition(hidden, max_tokens, grid, absolute="ape" in pe, relative="rpe" in pe)
    return ACERPE(
        hidden,
        heads,
        layers,
        groups=config.groups,
        mode=config.mode,
        shared=config.shared,
        apply_to=config.apply_to,
        anchored=pe == "ace-rpe",
        delta=config.delta,
        tau=config.tau,
        bt=config.bt,
        bp=config.bp,
    )
