"""Typed model config of the psac family: PSAC (Li et al., AAAI 2019) on the four TGIF-QA tasks.

Defaults are the paper's full model, PSAC(R) of Table 2 (one VPSA block, character embedding, full
video-question co-attention), with sizes from Sec. 4.3 and, where the paper gives none, from the
official code lixiangpengcs/PSAC (lixiangpengcs/PSAC).

`network` picks between the two networks the paper's numbers could mean: `official`, the released code's
(the network that produced them), or `paper`, the network as Sec. 3 writes it. Left unset it follows the
scale (`for_scale`): official at paper scale, paper at the generated scales, whose committed numbers were
trained with it; unset, it stays out of the config hash, so those records keep their hashes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Task = Literal["action", "transition", "frameqa", "count"]
CoAttention = Literal["q2v", "v2q"]
Network = Literal["official", "paper"]

# Fields that choose data, not the network: the frame features fed to the model.
DATA_EVAL_FIELDS = frozenset({"video_features", "num_frames"})


class PSACConfig(BaseModel):
    """PSAC: VPSA video encoder, QPSA question encoder, video-question co-attention; Sec. 3, Tables 2-6."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arch: Literal["psac"]
    task: Task | None = Field(
        None,
        description="TGIF-QA task, which fixes the answer head and loss: action / transition (5-way multiple "
        "choice, Eq. 15), frameqa (open-ended classification, Eq. 16), count (regression, MSE, "
        "Eq. 17). None in a spec row: the runner builds one model per task column.",
    )

    network: Network | None = Field(
        None,
        exclude_if=lambda value: value is None,
        description="official: the released code's network (position added before attention, the code's QANet "
        "question block, weight-normed projection and classifier, B = S_q S_v^T V_o, 36 frames, dropout 0.1); "
        "paper: the network as Sec. 3 writes it (Eq. 2-14, 35 frames). Unset: official at paper scale, paper at "
        "the generated scales (`for_scale`).",
    )

    # --- video side (Sec. 3.2) ---
    video_features: Literal["resnet", "c3d"] = Field(
        "resnet",
        description="Data setting: per-frame CNN features, ResNet-152 pool5 (2048-d, 'R' in Table 2) or "
        "C3D (4096-d, an option of the official code).",
    )
    num_frames: int = Field(
        35,
        ge=1,
        description="Data setting: N equally spaced frames per clip (Sec. 4.3: 35); with network official the "
        "code's 36 unless set.",
    )
    video_encoder: Literal["vpsa", "bilstm", "none"] = Field(
        "vpsa",
        description="Video encoder: stacked VPSA blocks (Sec. 3.2, Eq. 2-8), a Bi-LSTM in their place "
        "(Table 4), or none, the raw frame features going to the co-attention (Table 3 'w/o "
        "VPSA').",
    )
    vpsa_layers: int = Field(
        1,
        ge=0,
        description="L, number of stacked VPSA blocks (Table 3; 1 in the full model). "
        "0 exactly when video_encoder is not vpsa.",
    )
    bilstm_hidden: int = Field(
        1024,
        ge=1,
        description="Bi-LSTM hidden size per direction (Table 4, 'the dimension "
        "of all hidden states are 1024'); only with video_encoder "
        "bilstm.",
    )
    heads: int = Field(8, ge=1, description="l, parallel scaled dot-product attentions in VPSA and QPSA (Sec. 4.3).")

    # --- question side (Sec. 3.3) ---
    word_dim: int = Field(300, ge=1, description="d_w, GloVe word embedding size (Sec. 4.3).")
    char_embedding: bool = Field(
        True,
        description="Character branch of Eq. 10, Q_e = Concat(W, Conv2D(C)); false = W alone (Table 5 'w/o Char.').",
    )
    char_dim: int = Field(64, ge=1, description="d_c, character embedding size (Sec. 4.3).")
    max_word_chars: int = Field(15, ge=1, description="r, characters kept per word (official code).")
    max_question_words: int = Field(20, ge=1, description="M, question length in words (official code).")
    conv_kernel: int = Field(
        7, ge=1, description="Kernel of the depthwise separable convolutions of Eq. 11 (official code)."
    )

    # --- fusion and answer (Sec. 3.4-3.5) ---
    hidden_size: int = Field(512, ge=1, description="rho, the common space V_o and Q_o are projected to (Sec. 3.4).")
    co_attention: tuple[CoAttention, ...] = Field(
        ("q2v", "v2q"),
        description="Directions of the video-question co-attention (Sec. 3.4, Eq. 13-14): v2q gives "
        "A = S_q Q_o, q2v gives B; both = full VQ-Co, () = none (Table 6).",
    )
    dropout: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="Dropout of the CNN layers (Sec. 4.3: 0.2); with network official the code's 0.1 unless set.",
    )

    @field_validator("co_attention")
    @classmethod
    def _co_attention_set(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"co_attention lists a direction twice: {list(value)}")
        return tuple(sorted(value))

    @model_validator(mode="before")
    @classmethod
    def _no_vpsa_layers_without_vpsa(cls, data):
        # vpsa_layers defaults to the full model's 1; a row that swaps VPSA out need not also say 0.
        if isinstance(data, dict) and data.get("video_encoder", "vpsa") != "vpsa" and "vpsa_layers" not in data:
            data = {**data, "vpsa_layers": 0}
        return data

    @model_validator(mode="before")
    @classmethod
    def _official_defaults(cls, data):
        # The official network's data and dropout defaults are its code's: 36 frames (main*.py num_frame), dropout
        # 0.1 (models/model_utils.py); a value the row sets is kept.
        if isinstance(data, dict) and data.get("network") == "official":
            data = {**OFFICIAL_DEFAULTS, **data}
        return data

    @model_validator(mode="after")
    def _encoder_settings_agree(self):
        if self.video_encoder == "vpsa" and self.vpsa_layers < 1:
            raise ValueError("video_encoder vpsa needs vpsa_layers >= 1; for no video encoder say video_encoder: none")
        if self.video_encoder != "vpsa" and self.vpsa_layers:
            raise ValueError(
                f"vpsa_layers is {self.vpsa_layers} but video_encoder is {self.video_encoder}: "
                f"VPSA blocks exist only with video_encoder vpsa"
            )
        if self.video_encoder != "bilstm" and "bilstm_hidden" in self.model_fields_set:
            raise ValueError(
                f"bilstm_hidden is set but video_encoder is {self.video_encoder}: it only sizes the Bi-LSTM of Table 4"
            )
        if not self.char_embedding and {"char_dim", "max_word_chars"} & self.model_fields_set:
            raise ValueError("char_dim / max_word_chars are set but char_embedding is false")
        return self


OFFICIAL_DEFAULTS = {"num_frames": 36, "dropout": 0.1}  # lixiangpengcs/PSAC: main*.py num_frame, model_utils dropout


def for_scale(config: PSACConfig, scale: str) -> PSACConfig:
    """The config with its network decided: an unset `network` is the official one at paper scale (the network
    that produced the paper's numbers) and the paper-as-written one at the generated scales (the network their
    committed numbers were trained with); a set one is kept."""
    if config.network is not None:
        return config
    network = "official" if scale == "paper" else "paper"
    return PSACConfig.model_validate({**config.model_dump(exclude_unset=True), "network": network})


CONFIGS = (PSACConfig,)
