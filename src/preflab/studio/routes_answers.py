"""Answers: judgements (idempotent by client key, undo until the trainer collected them) and
real-time rating batches."""

from __future__ import annotations

import hashlib
import math
import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from preflab.errors import ConflictError, DataError, QuotaReachedError
from preflab.kinds import kind_of
from preflab.records import Annotator, Judgement, Rating
from preflab.records import Query as QueryRecord
from preflab.store.answers import Quota
from preflab.studio.auth import current_annotator
from preflab.studio.schemas import (
    JudgementBody,
    JudgementSaved,
    MyJudgement,
    MyJudgements,
    RatingsBody,
    RatingsSaved,
    Undone,
    errors,
)
from preflab.studio.study_assign import QUOTA_REACHED, gate, refuse_participant

router = APIRouter(prefix="/api")
Me = Annotated[Annotator, Depends(current_annotator)]


def judgement_id(annotator_id: str, client_key: str) -> str:
    """Deterministic id of a studio judgement: a repeated submission maps to the same row."""
    return "j-" + hashlib.sha256(f"{annotator_id}\x00{client_key}".encode()).hexdigest()[:32]


ANSWER_FIELDS = frozenset({"p", "ranks"})
"""The body fields an answer may come in (each kind names its own: ``answer_field``)."""


def _missing_query(query_id: str) -> HTTPException:
    return HTTPException(
        404,
        f"no query {query_id!r} in this run (unknown, or withdrawn by the trainer); "
        "ask for the next one with GET /api/queries/next",
    )


@router.post("/judgements", status_code=201, responses=errors(401, 403, 404, 409, 413, 422))
def post_judgement(request: Request, me: Me, body: JudgementBody) -> JudgementSaved:
    """Store your answer to a query: a pair or group query with ``p`` = P(a ≻ b) (1, 0, 0.5 or
    null = can't tell), a ranking query with ``ranks`` (one per clip in the query's order,
    0 = best, ties share a rank; null = can't tell)."""
    store = request.app.state.store
    q = store.queries.get(body.query_id)
    if q is None:
        raise _missing_query(body.query_id)
    p, answer = _answer_of(q, body)
    quota = None
    if me.meta.get("study") and store.answers.get(judgement_id(me.id, body.client_key)) is None:
        study = gate(request, me)  # a study participant past their quota, or before consent
        if study is not None and study[1].quota_answers > 0:  # checked again as it is stored
            quota = Quota(me.id, study[1].quota_answers)
    _check_watched(request, me.id, q, judgement_id(me.id, body.client_key))
    j = Judgement(
        id=judgement_id(me.id, body.client_key),
        query_id=q.id,
        annotator_id=me.id,
        source="human",
        p=p,
        response_time_s=body.response_time_s,
        # the trainer's reader holds the answer back this long, so its author can undo it
        meta={
            **answer,
            "client_key": body.client_key,
            "ui": "studio",
            "undo_s": float(request.app.state.config.undo_grace_s),
        },
    )
    try:
        n = store.answers.add([j], if_absent=True, quota=quota)
    except QuotaReachedError as exc:  # another answer of theirs (another tab) took the last one
        raise HTTPException(403, QUOTA_REACHED) from exc
    except ConflictError as exc:
        raise HTTPException(409, str(exc)) from exc
    except DataError as exc:
        if store.queries.get(q.id) is None:  # the query vanished between the check and the write
            raise _missing_query(body.query_id) from exc
        raise HTTPException(422, f"answer refused: {exc}") from exc
    return JudgementSaved(judgement_id=j.id, saved=True, duplicate=n == 0)


def _answer_of(q: QueryRecord, body: JudgementBody) -> tuple[float | None, dict[str, object]]:
    """``(p, meta)`` of the answer ``body`` gives to ``q``: ``p`` for a pair or group query,
    ``ranks`` (checked, turned into p and meta by the kind) for a ranking; 422 saying what was
    expected otherwise."""
    kind = kind_of(q)
    if kind.streams:
        raise HTTPException(
            422, f"query {q.id} is a rating stream; send its ratings to POST /api/ratings"
        )
    field = kind.answer_field
    if field not in body.model_fields_set:
        what = f"a {kind.title} of {len(q.a)} clips" if field == "ranks" else f"a {kind.title}"
        others = sorted(body.model_fields_set & ANSWER_FIELDS - {field})
        not_with = f", not with {' or '.join(others)}" if others else ""
        raise HTTPException(
            422, f"query {q.id} is {what}: answer it with {kind.answer_help(q)}{not_with}"
        )
    try:
        return kind.answer_from(q, getattr(body, field))
    except DataError as exc:
        raise HTTPException(422, f"{field} of {kind.title} query {q.id}: {exc}") from exc


@router.delete("/judgements/{jid}", responses=errors(401, 403, 404, 409))
def undo_judgement(request: Request, me: Me, jid: str) -> Undone:
    """Undo one of your judgements; 409 once the trainer has collected it."""
    store = request.app.state.store
    found = store.answers.get(jid) if len(jid) <= 64 else None
    if found is None or found[1].annotator_id != me.id:
        raise HTTPException(
            404, f"no judgement {jid!r} among yours; list them with GET /api/judgements/mine"
        )
    try:
        store.answers.retract(jid, me.id)
    except ConflictError as exc:
        raise HTTPException(409, str(exc)) from exc
    return Undone(undone=True)


@router.get("/judgements/mine", responses=errors(401, 422))
def my_judgements(
    request: Request, me: Me, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> MyJudgements:
    """Your latest judgements (undone ones left out), newest first."""
    store = request.app.state.store
    answers = store.answers.recent(me.id, limit=limit)
    queries = {q.id: q for q in store.queries.get_many([j.query_id for j, _ in answers])}
    kinds = {qid: q.kind for qid, q in queries.items()}
    return MyJudgements(
        judgements=[
            MyJudgement(
                id=j.id,
                query_id=j.query_id,
                kind=kinds.get(j.query_id, ""),
                p=j.p,
                ranks=_ranks_of(queries.get(j.query_id), j),
                created_at=j.created_at,
                undoable=undoable,
            )
            for j, undoable in answers
        ]
    )


def _ranks_of(q: QueryRecord | None, j: Judgement) -> list[int] | None:
    """A stored answer's ranks, when its kind is answered with ranks (None for a skip)."""
    if q is None or kind_of(q).answer_field != "ranks":
        return None
    ranks = kind_of(q).answer_value(q, j)
    return None if ranks is None else [int(r) for r in ranks]


@router.post("/ratings", status_code=201, responses=errors(401, 403, 404, 409, 413, 422))
def post_ratings(request: Request, me: Me, body: RatingsBody) -> RatingsSaved:
    """Store a batch of real-time ratings of a rating stream."""
    refuse_participant(request, me, "ratings")
    st = request.app.state
    if len(body.ratings) > st.config.max_ratings_per_batch:
        raise HTTPException(
            422,
            f"at most {st.config.max_ratings_per_batch} ratings per batch, got {len(body.ratings)}",
        )
    q = st.store.queries.get(body.query_id)
    if q is None:
        raise _missing_query(body.query_id)
    if not kind_of(q).streams:
        raise HTTPException(
            422,
            f"query {q.id} is a {kind_of(q).title}; ratings go to rating queries "
            "(GET /api/streams/next), answers to POST /api/judgements",
        )
    info = st.store.segments.info(q.a)
    n_steps = sum(info.get(s, {}).get("length", 0) for s in q.a)
    last = body.ratings[-1].step
    if last >= n_steps:
        raise HTTPException(
            422, f"rating step {last} is past the end of the stream (steps 0..{n_steps - 1})"
        )
    rows = [
        Rating(annotator_id=me.id, stream_id=q.id, step=r.step, t=r.t, value=r.value)
        for r in body.ratings
    ]
    try:
        st.store.ratings.add(rows)
    except DataError as exc:
        stored = st.store.ratings.at(me.id, q.id, [r.t for r in rows])
        if {(r.t, r.step, r.value) for r in stored} == {(r.t, r.step, r.value) for r in rows}:
            return RatingsSaved(stored=0, duplicate=True)
        raise HTTPException(
            409,
            "some ratings of this batch repeat the time of ratings already stored for this "
            "stream with other values; nothing was written. Each rating needs its own time",
        ) from exc
    return RatingsSaved(stored=len(rows), duplicate=False)


# ----- the question queue (issue #25): no answer sooner than the minimum after serving -------
def _check_watched(request: Request, annotator_id: str, q: QueryRecord, jid: str) -> None:
    """409 when the query was served to this annotator less than the studio's ``min_answer_s``
    ago (a double key press, or a script answering unseen). A repeated submission of an answer
    already stored passes (the outbox resends with the same key)."""
    st = request.app.state
    need = float(st.config.min_answer_s)
    if need <= 0:
        return
    state = st.store.people.state(annotator_id, q.id)
    served = state and state.get("served_at")
    if not served:
        return
    waited = time.time() - float(served)
    if waited >= need or st.store.answers.get(jid) is not None:
        return
    # The page resends after Retry-After: the server stamps 'shown' when it handles the page's
    # look-up, which a busy server can do just before the answer that was given seconds later.
    n = len(kind_of(q).clip_sides(q))
    shown, clips = ("pair", "both clips") if n == 2 else ("query", f"all {n} clips")
    raise HTTPException(
        409,
        f"answer refused: it came {max(waited, 0.0):.2f} s after the {shown} was shown, sooner "
        f"than the {need:g} s this studio requires; watch {clips} first, then answer again",
        headers={"Retry-After": str(max(1, math.ceil(need - waited)))},
    )
