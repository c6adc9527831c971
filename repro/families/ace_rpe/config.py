"""Typed model config of the ace-rpe family: cross-modal position embeddings (ACE-RPE) on an ALBEF backbone.

Defaults are the paper's full model, ACE-RPE + L_ace pre-trained on 4M images, with the defaults of
Sec. 4.1 and A.2-A.4: Bt = 5, Bp = 9, lambda = 2, delta = 0.05, G = 8, contextual mode, unshared,
applied to query, key and value. Backbone sizes are ALBEF's (salesforce/ALBEF).
The spec key `lambda` is a Python keyword, so the field is `lambda_` with alias `lambda`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PositionEmbedding = Literal["none", "ape", "rpe", "ape+rpe", "uniform", "ace-rpe"]
Projection = Literal["query", "key", "value"]
Task = Literal["pretrain", "retrieval", "vqa", "snli-ve", "nlvr2", "grounding"]

# Fields that choose data or the starting point, not the network: the pre-training corpus, the initial weights.
DATA_EVAL_FIELDS = frozenset({"pretrain", "init"})

# Settings of the cross-modal embedding itself (ACE-RPE or its anchor-free Uniform variant).
EMBEDDING_FIELDS = frozenset({"mode", "shared", "apply_to", "groups"})
# Settings of anchor locating, which only ACE-RPE has (Eq. 3-7).
ANCHOR_FIELDS = frozenset({"delta", "tau", "bt", "bp"})
# Settings of the anchor loss L_ace (Eq. 1-2).
LOSS_FIELDS = frozenset({"lambda_", "margin"})

_QKV_ORDER = {"query": 0, "key": 1, "value": 2}


class ALBEFConfig(BaseModel):
    """ALBEF with a cross-modal position embedding (None/APE/RPE/APE+RPE/Uniform/ACE-RPE) and anchor loss; Sec. 3."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    arch: Literal["albef"]
    task: Task | None = Field(
        None,
        description="Downstream task, which fixes the head (Sec. 4.2): retrieval (ITM re-ranking), vqa "
        "(6-layer answer decoder), snli-ve (3-way MLP on [CLS]), nlvr2, grounding (Grad-CAM), "
        "or pretrain. None in a spec row: the runner picks it from the column's dataset.",
    )
    pretrain: Literal["4m", "14m"] = Field(
        "4m",
        description="Data setting: pre-training images, 4m = CC3M + SBU + COCO + VG (Sec. 4.1), 14m adds "
        "CC12M (Table 1 'Pre-trained Images', the * rows).",
    )
    init: Literal["pretrain", "albef"] = Field(
        "pretrain",
        exclude_if=lambda value: value == "pretrain",  # records from before this field keep their config hash
        description="Where the row starts: pretrain, our pre-training on the row's corpus (at paper scale from "
        "DeiT-B/16 and bert-base-uncased, as ALBEF; from random weights at the generated scales); albef, ALBEF's "
        "released pre-training checkpoint of that corpus (ALBEF_4M.pth for 4m, ALBEF.pth for 14m; `repro "
        "download albef-checkpoints`) in place of pre-training, by the key map of keymap.py. ALBEF has no "
        "position embedding: a row's own (and L_ace, which acts in pre-training only) start untrained.",
    )

    # --- cross-modal position embedding (Sec. 3.2, 4.3) ---
    position_embedding: PositionEmbedding = Field(
        "ace-rpe",
        description="Cross-modal position embedding (Tables 1-2): none; ape / rpe / ape+rpe, the "
        "per-modality absolute, relative or combined embeddings of Sec. 4.3; uniform, one "
        "word-patch distance without anchors (the † row); ace-rpe, Eq. 3-8.",
    )
    mode: Literal["bias", "contextual"] = Field(
        "contextual",
        description="How E_ace enters cross-attention (Sec. A.3, Table 8): bias, E_ace W_E added to "
        "the attention logits (Eq. 9); contextual, E_ace averaged over the other modality "
        "and added to the embeddings and values (Eq. 10-12).",
    )
    shared: bool = Field(
        False,
        description="One projection W of Eq. 8 shared by all cross-modal layers instead "
        "of one per layer (Sec. A.1, Table 6).",
    )
    apply_to: tuple[Projection, ...] = Field(
        ("query", "key", "value"),
        description="Contextual mode: where E_ace is added, query and key through Eq. "
        "10-11, value through Eq. 12 (Sec. A.4, Table 9).",
    )
    groups: int = Field(
        8, ge=1, description="G, groups of the multi-group similarity and length of P_ace (Eq. 3, 7, 8; Table 7)."
    )
    delta: float = Field(
        0.05,
        gt=0.0,
        lt=1.0,
        description="delta, anchor threshold of the soft shrinking and the anchor set (Eq. 4-5; Table 7).",
    )
    tau: float = Field(1e4, gt=0.0, description="tau, slope of the soft shrinking below delta (Eq. 4).")
    bt: int = Field(
        5, ge=1, description="Bt, side of the square neighbourhood of image patches in D_p2p (Sec. 3.2.2, Eq. 7)."
    )
    bp: int = Field(9, ge=1, description="Bp, neighbourhood of text tokens in D_t2t (Sec. 3.2.2, Eq. 7).")

    # --- anchor loss L_ace (Sec. 3.1) ---
    anchor_loss: bool = Field(True, description="Pre-train with the anchor loss L_ace (Eq. 1-2), the '+Lace' rows.")
    lambda_: float = Field(
        2.0, gt=0.0, alias="lambda", description="lambda, log-sum-exp scale of L_ace (Eq. 1-2; Table 7)."
    )
    margin: float = Field(
        0.05, ge=0.0, description="Contrastive margin of Eq. 2 (also written delta in the paper; 0.05)."
    )
    queue_size: int = Field(
        65536, ge=1, description="K, size of the dynamic dictionaries O_x, O_y (Eq. 1; ALBEF's queue)."
    )
    mim_loss: bool = Field(True, description="Masked image modelling objective of pre-training (Sec. 3.3).")

    # --- ALBEF backbone ---
    text_layers: int = Field(6, ge=1, description="Text encoder: the first BERT-base layers (Sec. 4.1).")
    fusion_layers: int = Field(6, ge=1, description="Cross-modal encoder layers (Sec. 3).")
    image_layers: int = Field(
        12, ge=1, description="ViT-B/16 image encoder blocks (ALBEF; the paper also says '6-layer', see README)."
    )
    hidden_size: int = Field(768, ge=1, description="Hidden size D of every encoder.")
    heads: int = Field(12, ge=1, description="Attention heads of every encoder.")
    patch_size: int = Field(16, ge=1, description="ViT patch size.")

    @field_validator("apply_to")
    @classmethod
    def _apply_to_set(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"apply_to lists a projection twice: {list(value)}")
        return tuple(sorted(value, key=_QKV_ORDER.__getitem__))

    @model_validator(mode="before")
    @classmethod
    def _no_anchor_loss_without_anchors(cls, data):
        # anchor_loss defaults to the full model's true; a row without ACE-RPE need not also say false.
        if (
            isinstance(data, dict)
            and data.get("position_embedding", "ace-rpe") != "ace-rpe"
            and "anchor_loss" not in data
        ):
            data = {**data, "anchor_loss": False}
        return data

    @model_validator(mode="after")
    def _settings_agree(self):
        given = self.model_fields_set
        pe = self.position_embedding
        if pe not in ("ace-rpe", "uniform") and EMBEDDING_FIELDS & given:
            raise ValueError(
                f"{', '.join(sorted(EMBEDDING_FIELDS & given))} configure ACE-RPE, but "
                f"position_embedding is {pe}; they need ace-rpe or uniform"
            )
        if pe != "ace-rpe" and ANCHOR_FIELDS & given:
            raise ValueError(
                f"{', '.join(sorted(ANCHOR_FIELDS & given))} configure anchor locating (Eq. 3-7), "
                f"which only position_embedding ace-rpe has, not {pe}"
            )
        if self.anchor_loss and pe != "ace-rpe":
            raise ValueError(
                f"anchor_loss trains the anchor locating of ACE-RPE; with position_embedding {pe} "
                f"set anchor_loss: false"
            )
        if not self.anchor_loss and LOSS_FIELDS & given:
            names = sorted("lambda" if f == "lambda_" else f for f in LOSS_FIELDS & given)
            raise ValueError(f"{', '.join(names)} configure the anchor loss, but anchor_loss is false")
        if self.mode == "bias" and "apply_to" in given:
            raise ValueError(
                "apply_to is set but mode is bias: the bias mode (Eq. 9) does not touch the query, "
                "key or value; apply_to belongs to the contextual mode (Eq. 10-12)"
            )
        if not self.apply_to:
            raise ValueError("apply_to is empty: for no ACE-RPE at all say position_embedding: none")
        if self.hidden_size % self.groups:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by groups {self.groups} (Eq. 3 "
                f"splits each embedding into G groups)"
            )
        if self.hidden_size % self.heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by heads {self.heads}")
        return self


CONFIGS = (ALBEFConfig,)
