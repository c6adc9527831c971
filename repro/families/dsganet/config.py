"""Typed model config of the dsganet family: DSGANet (Liu et al.), DAA + SGA on MCAN for VQA v2 and GQA.

Defaults are the paper's full object model DSGANet-O (Table IV; Table VIII row 4): object features,
BERT question encoder, DAA with bbox and depth relations, SGA. The paper's sizes are L = 6, d_h = 768,
d_s = 160 and 16-bin depth histograms (Sec. V-B); the rest are MCAN's, the base model, as no code of
DSGANet is public (its README lists the ambiguities).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Relation = Literal["bbox", "depth"]

# Fields that choose data or evaluation, not the network: none. `features` picks the input features but
# also the form of DSGA (Eq. 15 for objects, Eq. 19 for grids), so it counts as a model switch.
DATA_EVAL_FIELDS: frozenset[str] = frozenset()


class DSGANetConfig(BaseModel):
    """DSGANet: depth-aware attention (DAA) and semantic guided attention (SGA) in MCAN's image encoder; Sec. IV."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arch: Literal["dsganet"]
    features: Literal["objects", "grids"] = Field(
        "objects",
        description="Visual features: 100 bottom-up object regions (DSGANet-O, DSGA of Eq. 15) or "
        "X-152 C5 grid cells (DSGANet-G, DSGA of Eq. 19); Table VII 'V-features'.",
    )
    question_encoder: Literal["bert", "gru"] = Field(
        "bert",
        description="Question word embeddings and vector q: bert-base-uncased, or a GRU where Tables "
        "VII-VIII leave 'Bert' unmarked (Sec. IV-B).",
    )
    daa: tuple[Relation, ...] = Field(
        ("bbox", "depth"),
        description="Relations of depth-aware attention DAA (Eq. 16): bbox r^bbox (Eq. 3), "
        "depth r^depth (Eq. 4), both concatenated into R^spatial (Eq. 5-6), or () "
        "for no DAA (Table VI). With grids: DAA^bbox (Eq. 20-21) and DAA^depth "
        "(Eq. 22-24).",
    )
    sga: bool = Field(
        True,
        description="Semantic guided attention SGA (Eq. 17-18), defined on the object graph only; a row "
        "with grid features that does not say gets false.",
    )
    grid_alpha: float = Field(
        1 / 3,
        gt=0.0,
        description="alpha of Eq. 19, the weight of the DAA terms with grid "
        "features (1/3 in the paper); only with features grids.",
    )

    # --- sizes (Sec. V-B; MCAN where the paper is silent) ---
    layers: int = Field(
        6, ge=1, description="L, stacked layers of the question encoder and of the image encoder (Sec. IV-D, V-B)."
    )
    hidden_size: int = Field(768, ge=1, description="d_h, hidden size (Sec. V-B).")
    spatial_dim: int = Field(
        160,
        ge=1,
        description="d_s, size of the spatial relation R^spatial and of the "
        "DAA/SGA queries and keys (Eq. 6; Sec. V-B).",
    )
    heads: int = Field(
        12, ge=1, description="Attention heads of SA/GA/DSGA; not given by the paper (64-d heads as in MCAN)."
    )
    ff_size: int = Field(3072, ge=1, description="FFN inner size; not given by the paper (4 d_h as in MCAN).")
    dropout: float = Field(0.1, ge=0.0, lt=1.0, description="Dropout; not given by the paper (MCAN's 0.1).")
    depth_bins: int = Field(
        16, ge=1, description="k, bins of the depth histogram dep^hist over gray values 0-255 (Sec. IV-A)."
    )
    depth_value: Literal["peak-bin-mean", "peak-bin-centre", "mode"] = Field(
        "peak-bin-mean",
        description="How the scalar depth dep_i of a region is read from its depth map: the mean "
        "gray value inside the most frequent histogram bin (default), that bin's "
        "centre, or the most frequent gray value (Sec. IV-A is ambiguous).",
    )
    log_eps: float = Field(
        1e-3,
        gt=0.0,
        description="Floor inside the logarithms of Eq. 3-4 (|dx|/w, dep_j/dep_i), "
        "which the paper leaves unguarded; 1e-3 as in ReGAT / "
        "Relation Networks.",
    )
    max_objects: int = Field(100, ge=1, description="Object regions per image, zero-padded (Sec. IV-A).")
    max_grids: int = Field(
        608,
        ge=1,
        description="Grid cells per image after flattening H x W, zero-padded "
        "(19 x 32 at most for 600 x 1000 inputs; grid-feats-vqa).",
    )

    @field_validator("daa")
    @classmethod
    def _daa_set(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"daa lists a relation twice: {list(value)}")
        return tuple(sorted(value))

    @model_validator(mode="before")
    @classmethod
    def _sga_default_follows_features(cls, data):
        # sga defaults to the full object model's true; a grid row need not also say false.
        if isinstance(data, dict) and data.get("features") == "grids" and "sga" not in data:
            data = {**data, "sga": False}
        return data

    @model_validator(mode="after")
    def _settings_agree(self):
        if self.features == "grids" and self.sga:
            raise ValueError(
                "sga is true with grid features: SGA is defined on the object graph only (Eq. 15 vs "
                "Eq. 19); set sga: false"
            )
        if self.features == "objects" and "grid_alpha" in self.model_fields_set:
            raise ValueError(
                "grid_alpha is set with object features: alpha weights DAA only in the grid variant (Eq. 19)"
            )
        if self.hidden_size % self.heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by heads {self.heads}")
        return self


CONFIGS = (DSGANetConfig,)
