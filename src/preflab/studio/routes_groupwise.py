"""Groupwise exploration and comparison (paper 000, issue #10): the round's behaviour tree,
suggestions, your own history, clips for previews, group spreads, and group answers.

A group answer stores two rows: a Query of kind 'group' created by the studio (``meta``
records the groups as edited, who composed them and which suggestion they started from),
then the Judgement. Both ids derive from (annotator, client_key), so a resent answer is stored
once; two annotators answering the same suggestion get a query and a judgement each.
Nothing sent from here contains a true reward or a predicted return.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import BaseModel, Field, field_validator

from preflab.errors import ConflictError, DataError
from preflab.kinds import GROUP, kind_of
from preflab.records import STUDIO_CREATED, Annotator, Judgement
from preflab.records import Query as QueryRecord
from preflab.studio.auth import current_annotator
from preflab.studio.clips import clip_timing, request_clip
from preflab.studio.routes_answers import judgement_id
from preflab.studio.schemas import (
    _STRICT,
    ID_PATTERN,
    MAX_INT,
    Clips,
    GroupJudgementSaved,
    RoundResponse,
    Spreads,
    answer_p,
    errors,
)
from preflab.studio.study_assign import refuse_participant

if TYPE_CHECKING:  # the cache's numerics import torch; the app builds it (create_app)
    from preflab.studio.groupwise_cache import GroupwiseCache, RoundView

router = APIRouter(prefix="/api/groupwise")
HISTORY_LIMIT = 2000
"""How many of your latest answers the exploration view looks at (history edges, answered
suggestions)."""
Me = Annotated[Annotator, Depends(current_annotator)]
SegId = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
SEGMENT_ID = re.compile(ID_PATTERN)


class GroupsBody(BaseModel):
    """Two groups of behaviours of one round."""

    model_config = _STRICT
    round: int = Field(ge=0, le=MAX_INT)
    a: list[SegId] = Field(max_length=64)
    b: list[SegId] = Field(max_length=64)


class GroupAnswerBody(GroupsBody):
    """POST /api/groupwise/judgements: your answer to two groups you composed."""

    p: float | None = Field(
        description="1 = group a (left) preferred, 0 = b (right), 0.5 = equal, null = can't tell"
    )
    response_time_s: float | None = Field(default=None, ge=0, le=86_400)
    client_key: str = Field(min_length=8, max_length=128, pattern=ID_PATTERN)
    suggestion_rank: int | None = Field(
        default=None,
        ge=0,
        le=MAX_INT,
        description="rank of the suggestion the groups started from",
    )

    @field_validator("p")
    @classmethod
    def _p_allowed(cls, p: float | None) -> float | None:
        return answer_p(p, left="the left group", right="the right group")


def _cache(request: Request) -> GroupwiseCache:
    return request.app.state.groupwise


def _view(request: Request, round: int | None) -> RoundView | None:
    """The cache's view of ``round``; 503 with the reason when it could not be built."""
    from preflab.studio.groupwise_cache import RoundBuildError

    try:
        return _cache(request).view(round)
    except RoundBuildError as exc:
        raise HTTPException(503, str(exc)) from exc


def _round_view(request: Request, round: int | None) -> RoundView:
    v = _view(request, round)
    if v is None:
        what = "no round has been published" if round is None else f"round {round} has no pool"
        raise HTTPException(
            404,
            f"{what} for the groupwise view yet; the trainer publishes each round's behaviours "
            "when it runs with the studio (preflab train --studio)",
        )
    return v


def _check_groups(request: Request, body: GroupsBody) -> tuple[RoundView, list[int], list[int]]:
    """Validate two groups against the round's pool (422/404 with a message). A round the
    trainer has moved on from still takes answers: a person who composed and watched two groups
    while the next round was published does not lose that answer (as a pair answered while its
    round was withdrawn still counts); the trainer collects it in its next round."""
    v = _round_view(request, body.round)
    limit = _cache(request).config.max_group
    for side, g in (("a", body.a), ("b", body.b)):
        if not g:
            raise HTTPException(422, f"group {side} is empty; add at least one behaviour to it")
        if len(set(g)) != len(g):
            raise HTTPException(422, f"group {side} lists a behaviour twice; remove the duplicate")
        if len(g) > limit:
            raise HTTPException(
                422,
                f"group {side} has {len(g)} behaviours; at most {limit} per side can be "
                "compared at once: remove some",
            )
    both = sorted(set(body.a) & set(body.b))
    if both:
        raise HTTPException(
            422, f"behaviour(s) {both[:3]} are in both groups; a behaviour belongs to one side"
        )
    try:
        ra = _cache(request).check_members(v, list(body.a), "a")
        rb = _cache(request).check_members(v, list(body.b), "b")
    except DataError as exc:
        raise HTTPException(422, str(exc)) from exc
    return v, ra, rb


def _history(
    v: RoundView, answers: list[Judgement], queries: dict[str, QueryRecord]
) -> list[dict[str, Any]]:
    """Your own past comparisons as edges preferred → unpreferred (pairs of this pool only):
    ``answers`` are your latest answers that count (newest first), ``queries`` their queries."""
    mine = [j for j in answers if j.p is not None]
    out: list[dict[str, Any]] = []
    for j in reversed(mine):  # oldest first
        q = queries.get(j.query_id)
        if q is None or kind_of(q).streams:
            continue
        for lab in kind_of(q).labels(q, j):
            if lab.a not in v.index or lab.b not in v.index:
                continue
            if lab.p == 0.5:
                src, dst, equal = lab.a, lab.b, True
            else:
                src, dst = (lab.a, lab.b) if lab.p > 0.5 else (lab.b, lab.a)
                equal = False
            out.append(
                {"from": src, "to": dst, "equal": equal, "round": q.round, "judgement_id": j.id}
            )
    return out


@router.get("/round", responses=errors(401, 404, 422, 503), response_model_exclude_unset=True)
def get_round(
    request: Request, me: Me, round: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None
) -> RoundResponse:
    """The exploration view of a round (the latest by default): tree, suggestion edges, ranked
    group suggestions and your history edges. ``{"view": null}`` before any round."""
    v = _view(request, round)
    if v is None:
        if round is not None:
            _round_view(request, round)
        return RoundResponse(view=None)
    store = request.app.state.store
    answers = [j for _seq, j in store.answers.by_annotator(me.id, limit=HISTORY_LIMIT)]
    # only the queries of your answers (at most HISTORY_LIMIT), not the run's
    queries = {q.id: q for q in store.queries.get_many([j.query_id for j in answers])}
    hist = _history(v, answers, queries)
    # answered: your composed query has an answer that counts (an undone one does not)
    done = {
        (frozenset(q.a), frozenset(q.b))
        for q in queries.values()
        if q.round == v.round and q.meta.get("created_by") == STUDIO_CREATED
    }
    sugg = [
        {**g, "answered": (frozenset(g["a"]), frozenset(g["b"])) in done}
        for g in v.public["group_suggestions"]
    ]
    return RoundResponse.model_validate(
        {"view": {**v.public, "group_suggestions": sugg, "history": hist}}
    )


@router.get("/clips", responses=errors(401, 404, 422))
def get_clips(
    request: Request,
    me: Me,
    ids: Annotated[str, Query(min_length=1, max_length=64 * 17)],
    priority: Annotated[int, Query(ge=0, le=2)] = 1,
) -> Clips:
    """Clips (render status, URL) of up to 16 behaviours: comma-separated segment ids."""
    st = request.app.state
    wanted = [s for s in ids.split(",") if s]
    if len(wanted) > 16:
        raise HTTPException(422, f"at most 16 clips per request, got {len(wanted)}")
    bad = [s for s in wanted if len(s) > 64 or SEGMENT_ID.fullmatch(s) is None]
    if bad:
        raise HTTPException(
            422,
            f"ids must be comma-separated segment ids (1 to 64 letters, digits or . _ : -), got "
            f"{bad[0][:64]!r}",
        )
    info = st.store.segments.info(wanted)
    unknown = [s for s in wanted if s not in info]
    if unknown:
        raise HTTPException(404, f"no behaviour(s) {unknown[:3]} in this run")
    timing = {  # real time per env (the same clips the groupwise cache prefetches: no stills)
        e: clip_timing(st.media, e, still=False) for e in {info[s]["env_id"] for s in wanted}
    }
    return Clips.model_validate(
        {
            "clips": [
                {
                    "segment_id": s,
                    **request_clip(st.media, [s], priority),
                    "length": info[s]["length"],
                    "fps": round(timing[info[s]["env_id"]]["fps"]),
                    "timing": timing[info[s]["env_id"]],
                }
                for s in wanted
            ]
        }
    )


@router.post("/spread", responses=errors(401, 403, 404, 413, 422))
def post_spread(request: Request, me: Me, body: GroupsBody) -> Spreads:
    """How alike the members of each group are: mean DTW distance (relative to a random pair
    of the pool) and the member farthest from the others. Groups may be empty here."""
    v = _round_view(request, body.round)
    out: dict[str, Any] = {}
    for side, g in (("a", body.a), ("b", body.b)):
        try:
            rows = _cache(request).check_members(v, list(dict.fromkeys(g)), side)
        except DataError as exc:
            raise HTTPException(422, str(exc)) from exc
        out[side] = v.spread(rows)
    return Spreads.model_validate(out)


def group_query_id(annotator_id: str, client_key: str) -> str:
    """Deterministic id of a studio-composed group query (one per answer)."""
    return "q-g" + hashlib.sha256(f"{annotator_id}\x00{client_key}".encode()).hexdigest()[:30]


@router.post("/judgements", status_code=201, responses=errors(401, 403, 404, 409, 413, 422))
def post_group_judgement(request: Request, me: Me, body: GroupAnswerBody) -> GroupJudgementSaved:
    """Store your answer to two groups: a studio-created group query and its judgement.
    One answer becomes max(m, n) labels (every member of both groups in at least one pair)."""
    refuse_participant(request, me, "group comparisons")
    v, _ra, _rb = _check_groups(request, body)
    store = request.app.state.store
    sugg = None
    if body.suggestion_rank is not None and body.suggestion_rank < len(
        v.public["group_suggestions"]
    ):
        g = v.public["group_suggestions"][body.suggestion_rank]
        sugg = {"rank": body.suggestion_rank, "a": g["a"], "b": g["b"]}
    qid = group_query_id(me.id, body.client_key)
    q = QueryRecord(
        id=qid,
        kind=GROUP.name,
        a=tuple(body.a),
        b=tuple(body.b),
        round=v.round,
        meta={
            "created_by": STUDIO_CREATED,
            "annotator_id": me.id,
            "groups": {"a": list(body.a), "b": list(body.b)},
            "suggestion": sugg,
            "edited": sugg is not None
            and (set(sugg["a"]) != set(body.a) or set(sugg["b"]) != set(body.b)),
        },
    )
    old = store.queries.get(qid)
    if old is not None and (old.a != q.a or old.b != q.b):
        raise HTTPException(
            409, "this client_key was already used for other groups; send a new client_key"
        )
    j = Judgement(
        id=judgement_id(me.id, body.client_key),
        query_id=qid,
        annotator_id=me.id,
        source="human",
        p=body.p,
        response_time_s=body.response_time_s,
        meta={"client_key": body.client_key, "ui": "studio-groupwise"},
    )
    try:  # the query and its answer in one transaction: none is ever stored without the other
        n = store.answers.add([j], if_absent=True, with_queries=[q], refuse_undone=True)
    except ConflictError as exc:
        raise HTTPException(409, str(exc)) from exc
    return GroupJudgementSaved(
        query_id=qid,
        judgement_id=j.id,
        saved=True,
        duplicate=n == 0,
        n_labels=max(len(body.a), len(body.b)) if body.p is not None else 0,
    )
