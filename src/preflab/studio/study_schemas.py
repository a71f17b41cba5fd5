"""Request and response bodies of the study's JSON API (issue #61)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from preflab.studio.schemas import FreeText

_STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
_OUT = ConfigDict(extra="forbid")


class StudyMe(BaseModel):
    """GET /api/study/me: the signed-in person's standing in the run's study."""

    model_config = _OUT
    participant: bool
    """Whether they joined by the study link (False: nothing else applies)."""
    answers: int = 0
    quota_answers: int = 0
    minutes: float = 0.0
    quota_minutes: float = 0.0
    done: bool = False
    """They reached the quota: the completion page (``done_url``) has their code."""
    done_url: str = "study/done"
    """The completion page, relative to the studio's root."""
    step: str = ""
    """Where they stand: 'instructions' (practice not finished: the page sends them to
    study/practice), 'studio' or 'done'."""


class StudyPerson(BaseModel):
    """One participant on the Owner page."""

    model_config = _OUT
    id: str
    platform: dict[str, str]
    step: str
    answers: int
    gold_answered: int
    gold_accuracy: float | None
    agreement: float | None
    sml_weight: float | None
    sml_accuracy: float | None
    median_response_s: float | None
    left_share: float | None
    minutes: float
    flags: list[str]
    excluded: bool
    excluded_reason: str | None
    completed: bool


class OwnerStudy(BaseModel):
    """GET /api/owner/study: the study, its participants and how far to trust them."""

    model_config = _OUT
    exists: bool
    title: str = ""
    closed: bool = False
    cap: int = 0
    overlap: int = 0
    gold_rate: float = 0.0
    gold_pairs: int = 0
    quota_answers: int = 0
    clip_s: float = 0.0
    joined: int = 0
    consented: int = 0
    completed: int = 0
    aggregator: str = "majority"
    alpha: float | None = None
    alpha_low: float | None = None
    alpha_high: float | None = None
    alpha_units: int = 0
    crowd_accuracy: float | None = None
    labels_per_hour: float | None = None
    people: list[StudyPerson] = Field(default_factory=list)


class EnrolmentBody(BaseModel):
    """POST /api/owner/study/enrolment."""

    model_config = _STRICT
    open: bool


class Enrolment(BaseModel):
    model_config = _OUT
    closed: bool


class ExclusionBody(BaseModel):
    """POST /api/owner/study/people/{id}/exclusion."""

    model_config = _STRICT
    excluded: bool
    reason: FreeText = Field(default="", max_length=500)


class Exclusion(BaseModel):
    model_config = _OUT
    id: str
    excluded: bool


class PaymentRow(BaseModel):
    model_config = _OUT
    annotator_id: str
    PROLIFIC_PID: str
    STUDY_ID: str
    SESSION_ID: str
    pid: str
    enrolled_at: float
    consent_at: float
    minutes_on_task: float
    answers_counted: int
    completed: bool
    completion_code_shown: str
    excluded: bool
    flags: str


class Payments(BaseModel):
    """GET /api/owner/study/payments: one row per participant who consented."""

    model_config = _OUT
    rows: list[PaymentRow]
