"""What every recipe model shares: no unknown key, no infinite number, and the type of an
environment a recipe may set (tuning variables only, kit.recipe.env)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from kit.recipe.env import check_env

TuningEnv = Annotated[dict[str, str], AfterValidator(check_env)]
"""A variant's or the nodes' environment: tuning variables only (kit.recipe.env)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # 1e400 is no expectation
