"""The toy family's typed config: a linear classifier over a generated point, with or without its position."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ToyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    arch: Literal["toy"]
    hidden: int = Field(16, ge=1, description="hidden units")
    use_position: bool = Field(True, description="whether the model sees the point's position")


CONFIGS = (ToyConfig,)
