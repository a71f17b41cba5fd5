"""Request and response bodies of the studio API (Contract C).

Requests are validated strictly (bad input is a 422 with a message); responses are declared
here so that ``/openapi.json`` describes every body the studio sends, and the front end's
TypeScript types are generated from it (``python -m preflab.studio.openapi``, then
``npm run gen:api`` in studio/web). Response models forbid unknown keys: a route that starts
sending a new key fails its tests until the key is declared here."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from preflab.media.timing import TimingSource

_STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
ID_PATTERN = r"^[A-Za-z0-9._:-]+$"
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""The control characters (Unicode category Cc) free text may not hold: all but tab and line
breaks."""


def plain_text(value: str) -> str:
    """``value`` when it holds no control character other than tab and line breaks (NUL, escape,
    DEL, C1 controls and the like: no page shows them and PostgreSQL cannot store NUL);
    ValueError naming the first one otherwise."""
    bad = CONTROL.search(value)
    if bad is not None:
        raise ValueError(
            f"must be plain text: it holds the control character U+{ord(bad.group()):04X} at "
            f"position {bad.start()}; remove it (only tab and line breaks are allowed)"
        )
    return value


FreeText = Annotated[str, AfterValidator(plain_text)]
"""A free-text field of a request body (names, instructions, reasons): plain text only."""


def answer_p(p: float | None, *, left: str, right: str) -> float | None:
    """``p`` of a person's answer, checked: 1 (``left`` preferred), 0 (``right`` preferred),
    0.5 (equal) or None (can't tell); anything else raises ValueError (a 422 for the page)."""
    if p is not None and p not in (0.0, 0.5, 1.0):
        raise ValueError(
            f"p must be 1 ({left} preferred), 0 ({right} preferred), 0.5 (equal) or null "
            f"(can't tell), got {p}"
        )
    return p


class LoginBody(BaseModel):
    """POST /api/login."""

    model_config = _STRICT
    token: str = Field(min_length=1, max_length=256)


RANK_LIMIT = 8
"""Most clips a ranking query holds (:data:`preflab.kinds.ranking.RANK_SIZES`)."""


class JudgementBody(BaseModel):
    """POST /api/judgements: the answer to one query. A pair or group query is answered with
    ``p``; a ranking query with ``ranks`` (one rank per clip, in the query's order), never both."""

    model_config = _STRICT
    query_id: str = Field(min_length=1, max_length=64, pattern=ID_PATTERN)
    p: float | None = Field(
        default=None,
        description="pair and group queries (required for them): 1 = a (left) preferred, "
        "0 = b (right), 0.5 = equally good, null = can't tell",
    )
    ranks: list[Annotated[int, Field(ge=0, lt=RANK_LIMIT)]] | None = Field(
        default=None,
        max_length=RANK_LIMIT,
        description="ranking queries (required for them): the rank of each clip in the query's "
        "order, 0 = best, equal ranks for ties, dense (0, 1, … without gaps); null = can't tell",
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
        return answer_p(p, left="a/left", right="b/right")

    @model_validator(mode="after")
    def _p_or_ranks(self) -> JudgementBody:
        given = self.model_fields_set
        if "p" in given and "ranks" in given:
            raise ValueError(
                "give p (for a pair or group query) or ranks (for a ranking query), not both"
            )
        if "p" not in given and "ranks" not in given:
            raise ValueError(
                "the answer is missing: give p (1, 0, 0.5 or null) for a pair or group query, "
                "or ranks (one rank per clip, 0 = best; null = can't tell) for a ranking query"
            )
        return self


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
    name: FreeText = Field(min_length=1, max_length=256)
    role: Literal["owner", "annotator"] = "annotator"


# ----- responses ------------------------------------------------------------------------------
_OUT = ConfigDict(extra="forbid")
MediaState = Literal["ready", "pending", "failed", "unavailable"]
"""Render status of a clip (poll while 'pending'; 'unavailable' = no media service)."""
Role = Literal["owner", "annotator"]


class ErrorBody(BaseModel):
    """Every error the studio sends (4xx and 5xx): one message saying what went wrong and what
    to do about it."""

    model_config = _OUT
    detail: str


class FieldError(BaseModel):
    """One invalid part of a request."""

    model_config = _OUT
    field: str = Field(description="dotted path of the invalid part, e.g. 'ratings.0.value'")
    message: str


class ValidationErrorBody(BaseModel):
    """422: the request was well-formed HTTP but its content is not acceptable. Bodies that fail
    the schema list every invalid part in ``errors``; checks against the run (e.g. a rating
    past the end of its stream) send ``detail`` only."""

    model_config = _OUT
    detail: str
    errors: list[FieldError] = Field(default_factory=list)


_ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    401: (ErrorBody, "Not signed in, or the token is not valid for this studio."),
    403: (ErrorBody, "Signed in, but not allowed (owner-only, or a cross-site request)."),
    404: (ErrorBody, "No such query, judgement, round, behaviour or clip in this run."),
    409: (ErrorBody, "Conflicts with what is stored (e.g. already collected by the trainer)."),
    413: (ErrorBody, "Request body larger than the studio's limit."),
    422: (ValidationErrorBody, "Invalid request content."),
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: the error statuses it really returns, with their models."""
    if 401 in codes and 429 not in codes:  # whoever signs in may be throttled (issue #25)
        codes = (*codes, 429)
    return {c: {"model": _ERRORS[c][0], "description": _ERRORS[c][1]} for c in codes}


class Health(BaseModel):
    """GET /api/health."""

    model_config = _OUT
    ok: bool
    app: str


class PublicAnnotator(BaseModel):
    """What the browser may know about an annotator (POST /api/login, GET /api/me)."""

    model_config = _OUT
    id: str
    name: str
    role: Role


class LoggedOut(BaseModel):
    """POST /api/logout."""

    model_config = _OUT
    ok: bool


class Status(BaseModel):
    """GET /api/status: the trainer's latest round and your progress in it."""

    model_config = _OUT
    round: int | None
    status: str | None = Field(description="the round's status as the trainer published it")
    env_id: str | None
    env_steps: int
    total_steps: int
    n_labels: int | None
    answered_round: int
    answered_total: int
    waiting: int = Field(description="open queries waiting for you")
    trainer_updated_at: float | None = Field(description="unix time of the trainer's last sign")
    round_answered: int | None = Field(
        default=None, description="while the trainer waits for people: answers to its round"
    )
    round_asked: int | None = Field(
        default=None, description="while the trainer waits for people: queries of its round"
    )
    to_rate: int = Field(
        default=0, description="episodes waiting for you in the Rate view (at most 10 counted)"
    )
    views: dict[str, int] = Field(
        default_factory=dict,
        description="open queries waiting for you per studio view that shows them ('compare', "
        "'groups', 'rank', 'rate'); views with none are left out",
    )


# ----- clip timing (issue #25: clips that tell the truth) --------------------------------------
class ClipTiming(BaseModel):
    """How a clip plays at the env's real time (preflab.media.timing.ClipTiming)."""

    model_config = _OUT
    step_seconds: float = Field(description="seconds of real time one env step lasts")
    steps_per_s: float = Field(description="env steps per second of real time")
    fps: float = Field(description="frames per second the clip is encoded at (a frame per step)")
    playback_rate: float = Field(description="the player's base playbackRate for real time")
    still_frames: int = Field(description="frames holding the first/last step at each end")
    source: TimingSource = Field(description="where the step length came from")


class Clip(BaseModel):
    """One behaviour's clip: render status and URL."""

    model_config = _OUT
    segment_id: str
    media_key: str | None
    media_url: str | None
    status: MediaState
    length: int | None = Field(description="steps in the behaviour")
    fps: int
    timing: ClipTiming | None = None


class QueryView(BaseModel):
    """A query as the page shows it: one clip per behaviour of each side (a ranking query has
    all its clips in ``a`` and none in ``b``)."""

    model_config = _OUT
    id: str
    kind: Literal["pair", "group", "rating", "ranking"]
    round: int
    a: list[Clip]
    b: list[Clip]


class NextQuery(BaseModel):
    """GET /api/queries/next and /api/queries/{id} (null: nothing open for you)."""

    model_config = _OUT
    query: QueryView | None


class MediaInfo(BaseModel):
    """GET /api/media/{key}."""

    model_config = _OUT
    key: str
    status: MediaState
    url: str | None = Field(description="set once the status is 'ready'")


class StreamView(BaseModel):
    """A rating stream: one clip of the stream's behaviours."""

    model_config = _OUT
    query_id: str
    media_key: str | None
    media_url: str | None
    status: MediaState
    n_steps: int
    fps: int
    timing: ClipTiming | None = None


class NextStream(BaseModel):
    """GET /api/streams/next (null: no stream left for you)."""

    model_config = _OUT
    stream: StreamView | None


class JudgementSaved(BaseModel):
    """POST /api/judgements."""

    model_config = _OUT
    judgement_id: str
    saved: bool
    duplicate: bool = Field(description="true when this client_key was stored before")


class Undone(BaseModel):
    """DELETE /api/judgements/{id}."""

    model_config = _OUT
    undone: bool


class MyJudgement(BaseModel):
    """One of your judgements."""

    model_config = _OUT
    id: str
    query_id: str
    kind: str = Field(description="the query's kind: 'pair', 'group', 'ranking', …")
    p: float | None
    ranks: list[int] | None = Field(
        default=None, description="a ranking's ranks, in the query's order (0 = best)"
    )
    created_at: float
    undoable: bool = Field(description="false once the trainer has collected it")


class MyJudgements(BaseModel):
    """GET /api/judgements/mine: newest first, undone ones left out."""

    model_config = _OUT
    judgements: list[MyJudgement]


class RatingsSaved(BaseModel):
    """POST /api/ratings."""

    model_config = _OUT
    stored: int
    duplicate: bool = Field(description="true when this exact batch was stored before")


class TreeNode(BaseModel):
    """A node of the round's behaviour tree (leaves have ``segment``; parents ``children``,
    their representative members ``reps`` and relative ``spread``)."""

    model_config = _OUT
    id: str
    depth: int
    size: int
    segments: list[str]
    segment: str | None = None
    reps: list[str] | None = None
    spread: float | None = None
    children: list[TreeNode] | None = None


class SuggestionEdge(BaseModel):
    """A grey suggestion edge: two behaviours the reward ensemble disagrees on."""

    model_config = _OUT
    a: str
    b: str
    weight: float


class GroupSuggestion(BaseModel):
    """A ranked suggestion of two groups to compare."""

    model_config = _OUT
    rank: int
    a: list[str]
    b: list[str]
    answered: bool = Field(description="you already answered these groups")


class HistoryEdge(BaseModel):
    """One of your past comparisons: preferred → unpreferred (or equal)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    equal: bool
    round: int
    judgement_id: str


class ExplorationRound(BaseModel):
    """The exploration view of one round (ids, tree, edges and ranks; never a reward)."""

    model_config = _OUT
    round: int
    published_at: float
    n_behaviours: int
    levels: int
    max_group: int
    leaf_order: list[str]
    root: TreeNode | None
    lengths: dict[str, int | None]
    suggestions: list[SuggestionEdge]
    group_suggestions: list[GroupSuggestion]
    has_ensemble: bool
    pool_mean_dtw: float
    first_previews: list[str]
    history: list[HistoryEdge]


class RoundResponse(BaseModel):
    """GET /api/groupwise/round (null before any round)."""

    model_config = _OUT
    view: ExplorationRound | None


class Clips(BaseModel):
    """GET /api/groupwise/clips."""

    model_config = _OUT
    clips: list[Clip]


class Spread(BaseModel):
    """How alike a group's members are."""

    model_config = _OUT
    n: int
    mean_dtw: float | None
    relative: float | None = Field(description="mean DTW relative to the pool's mean pair")
    outlier: str | None = Field(description="the member farthest from the others, if any")


class Spreads(BaseModel):
    """POST /api/groupwise/spread."""

    model_config = _OUT
    a: Spread
    b: Spread


class GroupJudgementSaved(BaseModel):
    """POST /api/groupwise/judgements."""

    model_config = _OUT
    query_id: str
    judgement_id: str
    saved: bool
    duplicate: bool
    n_labels: int = Field(description="labels this answer becomes (0 for can't tell)")


class AnnotatorRow(BaseModel):
    """An annotator in the owner's overview."""

    model_config = _OUT
    id: str
    name: str
    role: Role
    source: str
    n_judgements: int
    n_ratings: int
    agreement: float | None
    sml_weight: float | None


class AgreementPair(BaseModel):
    """Two annotators' votes on the queries both answered."""

    model_config = _OUT
    a: str
    b: str
    shared: int
    agreed: int


class RoundRow(BaseModel):
    """A published round: these keys plus the trainer's metrics of the round."""

    model_config = ConfigDict(extra="allow")
    round: int
    status: str
    env_id: str
    env_steps: int
    total_steps: int
    published_at: float


class Overview(BaseModel):
    """GET /api/owner/overview."""

    model_config = _OUT
    annotators: list[AnnotatorRow]
    agreement_pairs: list[AgreementPair]
    rounds: list[RoundRow]


class Invite(BaseModel):
    """POST /api/owner/annotators: the new annotator and their personal link (shown once)."""

    model_config = _OUT
    id: str
    name: str
    role: Role
    token: str
    link: str


# ----- task instructions and the owner's activity panel (issue #25) ---------------------------
_ERRORS[503] = (ErrorBody, "The round's exploration view could not be built (see the studio log).")
TASK_MAX_CHARS = 500
"""Longest task instruction the owner may set (longer ones get 422)."""


class TaskBody(BaseModel):
    """PUT /api/owner/task: what the agent should do, as every annotator will read it."""

    model_config = _STRICT
    text: FreeText = Field(
        max_length=TASK_MAX_CHARS,
        description=f"plain text, at most {TASK_MAX_CHARS} characters; empty clears it",
    )


class Task(BaseModel):
    """GET /api/task: the owner's instructions (empty text when none were given)."""

    model_config = _OUT
    text: str
    updated_at: float | None


class AnnotatorActivity(BaseModel):
    """How an annotator is doing right now (owner only)."""

    model_config = _OUT
    id: str
    name: str
    role: Role
    n_answers: int = Field(description="answers that count (undone ones left out)")
    answers_per_min: float | None = Field(
        description="answers per minute over the last 10 minutes of the session (or since the "
        "first answer when shorter)"
    )
    median_response_s: float | None = Field(description="median seconds from clip to answer")
    last_active: float | None = Field(description="unix time of the latest answer or rating")
    revoked: bool = Field(description="the annotator's link no longer works")


class FinishState(BaseModel):
    """The owner's 'Finish now' (the trainer ends the run when it sees it)."""

    model_config = _OUT
    by: str
    at: float


class OwnerActivity(BaseModel):
    """GET /api/owner/activity."""

    model_config = _OUT
    annotators: list[AnnotatorActivity]
    reward_accuracy: float | None = Field(
        description="the latest round's reward accuracy (only when the env has a true reward)"
    )
    reward_accuracy_round: int | None
    task: Task
    finish: FinishState | None


class Revoked(BaseModel):
    """POST /api/owner/annotators/{id}/revoke."""

    model_config = _OUT
    id: str
    revoked_at: float


_FASTAPI_422 = ("#/components/schemas/HTTPValidationError",)


# ----- the question queue (issue #25): prefetch, skip, the page's rules, consistency --------
class QueueRules(BaseModel):
    """What the page enforces before it sends an answer, and how long Undo is offered."""

    model_config = _OUT
    min_plays: int = Field(description="plays of both clips before an answer is taken")
    min_answer_s: float = Field(
        description="seconds after a pair was served before the server accepts its answer"
    )
    undo_grace_s: float = Field(description="seconds an answer stays undoable")


class QueriesAhead(BaseModel):
    """GET /api/queries/ahead: the next queries of your queue after the one on screen (their
    clips are being rendered now), and the page's rules."""

    model_config = _OUT
    queries: list[QueryView]
    rules: QueueRules


class Skipped(BaseModel):
    """POST /api/queries/{id}/skip."""

    model_config = _OUT
    skipped: bool


class ConsistencyRow(BaseModel):
    """One annotator's consistency checks: pairs they answered twice with a preference."""

    model_config = _OUT
    id: str
    name: str
    repeats: int
    agreed: int
    agreement: float | None


class Consistency(BaseModel):
    """GET /api/owner/consistency."""

    model_config = _OUT
    repeat_share: float
    annotators: list[ConsistencyRow]


def tidy(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the 422 responses FastAPI adds on its own (they declare its default body, which the
    studio never sends: routes declare their real 422 with ``schemas.ValidationErrorBody``)."""
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            r = op.get("responses", {}).get("422")
            if r is not None and any(ref in json.dumps(r) for ref in _FASTAPI_422):
                del op["responses"]["422"]
    defs = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        defs.pop(name, None)
    return schema


# ----- process lifecycle and abuse limits (issue #25) -----------------------------------------
MAX_INT = 2**31 - 1
"""Largest round, step, rank or limit a request may name (bigger ones get 422, not a 500)."""

_ERRORS[400] = (
    ErrorBody,
    "A malformed request header, e.g. a Range header that is not bytes=FIRST-LAST.",
)
_ERRORS[416] = (
    ErrorBody,
    "The Range header asks only for bytes past the end of the file; the Content-Range header "
    "(bytes */SIZE) gives its size.",
)
_ERRORS[429] = (
    ErrorBody,
    "Too many requests with this token, or too many wrong tokens from this address; wait the "
    "seconds the Retry-After header says.",
)


class Instance(BaseModel):
    """GET /api/instance: which studio process answers (public; a random id, nothing else)."""

    model_config = _OUT
    instance: str = Field(description="random id of this studio process, set when it starts")


class Liveness(BaseModel):
    """GET /api/liveness: whether the trainer is alive, as the studio sees it."""

    model_config = _OUT
    trainer: Literal["running", "stopped", "unknown"] = Field(
        description="'stopped' when its heartbeat is stale or it said so; 'unknown' when the "
        "trainer does not report a heartbeat"
    )
    heartbeat_at: float | None = Field(description="unix time of the trainer's last heartbeat")
    age_s: float | None = Field(description="seconds since that heartbeat")
    finished: bool = Field(description="the trainer's latest round says the run finished")
