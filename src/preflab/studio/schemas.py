"""Request bodies of the studio API (validated strictly: bad input is a 422 with a message)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
ID_PATTERN = r"^[A-Za-z0-9._:-]+$"


class LoginBody(BaseModel):
    """POST /api/login."""

    model_config = _STRICT
    token: str = Field(min_length=1, max_length=256)


class JudgementBody(BaseModel):
    """POST /api/judgements: the answer to one pair or group query."""

    model_config = _STRICT
    query_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)
    p: float | None = Field(
        description="1 = a (left) preferred, 0 = b (right), 0.5 = equally good, null = can't tell"
    )
    response_time_s: float | None = Field(default=None, ge=0, le=86_400)
    client_key: str = Field(
        min_length=8,
        max_length=128,
        pattern=ID_PATTERN,
        description="browser-made uuid; a repeated submission with the same key is stored once",
    )

    @field_validator("p")
    @classmethod
    def _p_allowed(cls, p: float | None) -> float | None:
        if p is not None and p not in (0.0, 0.5, 1.0):
            raise ValueError(
                f"p must be 1 (a/left preferred), 0 (b/right preferred), 0.5 (equal) or null "
                f"(can't tell), got {p}"
            )
        return p


class RatingItem(BaseModel):
    """One rating of a stream: the step on screen, the time and the value."""

    model_config = _STRICT
    step: int = Field(ge=0, le=10_000_000)
    t: float = Field(ge=-1e12, le=1e12)
    value: float = Field(ge=-1.0, le=1.0)


class RatingsBody(BaseModel):
    """POST /api/ratings: a batch of ratings of one rating query (stream)."""

    model_config = _STRICT
    query_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)
    ratings: list[RatingItem] = Field(min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _ordered(self) -> RatingsBody:
        r = self.ratings
        for k in range(1, len(r)):
            if r[k].step < r[k - 1].step:
                raise ValueError(
                    f"ratings[{k}].step = {r[k].step} comes after step {r[k - 1].step}; steps "
                    "must be non-decreasing within a batch (send them in the order shown)"
                )
            if not r[k].t > r[k - 1].t:
                raise ValueError(
                    f"ratings[{k}].t = {r[k].t} is not after {r[k - 1].t}; times must be "
                    "strictly increasing within a batch"
                )
        return self


class NewAnnotatorBody(BaseModel):
    """POST /api/owner/annotators."""

    model_config = _STRICT
    name: str = Field(min_length=1, max_length=256)
    role: Literal["owner", "annotator"] = "annotator"
