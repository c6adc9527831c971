"""Typed model configs of mcan-pa: MCAN with PWA/POA/PMA (Tables I-VI) and VL-BERT+PA (Table IV).

Spec rows name them in their `model:` mapping:
  {arch: mcan}                                   MCAN
  {arch: mcan, position_embedding: bert}         MCAN+PE
  {arch: mcan, positional: [pwa, poa]}           any subset of PWA, POA, PMA (fusion Eq. 8)
  {arch: mcan, positional: [pwa, poa, pma], fusion: relation-network}   MCAN+PA*
  {arch: mcan, positional: [pwa, poa, pma], fusion: eq8}                MCAN+PA
  {arch: vl-bert}                                VL-BERT_BASE without pre-training (Table IV's †)
  {arch: vl-bert, positional: [pwa, poa, pma], fusion: eq8}             VL-BERT_BASE+PA†
  {arch: vl-bert, init: vl-bert-base}            VL-BERT_BASE fine-tuned from its released pre-training
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Positional = Literal["pwa", "poa", "pma"]
POSITIONAL: tuple[str, ...] = ("pwa", "poa", "pma")


def _positional_in_order(value: Any) -> Any:
    """A single name is a one-item list; the modules are kept in the paper's order (PWA, POA, PMA)."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        if len(set(value)) != len(value):
            raise ValueError(f"names a module twice: {list(value)}")
        return tuple(p for p in POSITIONAL if p in value) + tuple(p for p in value if p not in POSITIONAL)
    return value


class McanConfig(BaseModel):
    """MCAN (encoder-decoder, 6 layers) and its positional variants (mcan-pa §III)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arch: Literal["mcan"]
    positional: tuple[Positional, ...] = Field(
        (), description="PWA (Eq. 11, encoder), POA (Eq. 12, decoder self-attention), PMA (Eq. 13, guided)"
    )
    fusion: Literal["eq8", "relation-network"] | None = Field(
        None, description="how content and positional scores combine: Eq. 8, or the relation-network form (PA*)"
    )
    position_embedding: Literal["none", "bert"] = Field("none", description="MCAN+PE: added embeddings (Eq. 15)")

    _order = field_validator("positional", mode="before")(_positional_in_order)

    @model_validator(mode="after")
    def _fusion_needs_positional(self) -> McanConfig:
        if self.fusion is not None and not self.positional:
            raise ValueError(f"fusion {self.fusion!r} needs positional modules (pwa, poa, pma)")
        return self


class VlBertConfig(BaseModel):
    """VL-BERT (its code's network, `vlbert.py`) fine-tuned for VQA, with PA in its attention (mcan-pa Table IV)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arch: Literal["vl-bert"]
    size: Literal["base", "large"] = Field("base", description="VL-BERT_BASE (BERT-base) or VL-BERT_LARGE")
    init: Literal["bert", "vl-bert-base", "vl-bert-large"] = Field(
        "bert",
        description="Where the row starts: bert, BERT's weights in the text stack and random visual parts (VL-BERT "
        "without visual-linguistic pre-training, the paper's † rows; bert-base-uncased, at VL-BERT_BASE's sizes); "
        "vl-bert-base / vl-bert-large, VL-BERT's released pre-training of that size (`repro weights download "
        "vl-bert-base-prec.model`), as VL-BERT's VQA fine-tuning starts (paper scale only).",
    )
    classifier: Literal["mlm", "2fc"] = Field(
        "mlm", description="the answer classifier at [MASK]: mlm (the released VQA configs) or 2fc (the code's default)"
    )
    positional: tuple[Positional, ...] = Field((), description="PWA word-word, POA region-region, PMA word-region")
    fusion: Literal["eq8", "relation-network"] | None = None

    _order = field_validator("positional", mode="before")(_positional_in_order)

    @model_validator(mode="after")
    def _init_of_its_size(self) -> VlBertConfig:
        if self.init.startswith("vl-bert-") and self.init != f"vl-bert-{self.size}":
            raise ValueError(
                f"init {self.init!r} is VL-BERT's {self.init[8:]} pre-training; the row is size {self.size}"
            )
        if self.size == "large" and self.init == "bert":
            raise ValueError("size large starts from VL-BERT's large pre-training (init: vl-bert-large)")
        return self


CONFIGS = (McanConfig, VlBertConfig)


def not_at_scale(config: McanConfig | VlBertConfig, scale: str) -> str | None:
    """Why a row does not run at a generated scale: one that starts from VL-BERT's released pre-training (its
    sizes are VL-BERT's, the generated scales' are not); None for every other row. Here, with the configs, so a
    table asks it without loading the model code (`repro.families.not_at_scale`)."""
    if scale != "paper" and isinstance(config, VlBertConfig) and config.init != "bert":
        return f"init {config.init} starts from VL-BERT's released pre-training, at its sizes: paper scale only"
    return None
