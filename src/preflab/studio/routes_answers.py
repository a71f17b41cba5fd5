"""Answers: judgements (idempotent by client key, undo until the trainer collected them) and
real-time rating batches."""

from __future__ import annotations

import hashlib
import math
import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request

from preflab.errors import ConflictError, DataError, QuotaReachedError
from preflab.kinds import kind_of
from preflab.records import Annotator, Judgement, Rating
from preflab.records import Query as QueryRecord
from preflab.studio import study as S
from preflab.studio.auth import current_annotator
from preflab.studio.schemas import (
    ID_PATTERN,
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
JudgementId = Annotated[str, Path(min_length=1, max_length=64, pattern=ID_PATTERN)]
"""A judgement id in a path: checked before the store sees it (a NUL byte is a 422, not a 500)."""

UNDONE_RESENT = (
    "this answer was undone, so it is not saved again by sending it once more; to give it "
    "again, answer the pair anew (a new answer, with a new client_key)"
)
"""Why a resend of an undone answer (its client_key again) is refused (409)."""
ANSWERED = "you already answered this pair; undo it first to change your answer"
"""Why a second answer of one person to one query is refused (409)."""


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
    jid = judgement_id(me.id, body.client_key)
    quota, once, participant = None, False, False
    if store.answers.get(jid) is not None:  # a resend: stored once, unless it was undone since
        if store.answers.undone(jid):
            raise HTTPException(409, UNDONE_RESENT)
    else:
        study = gate(request, me) if me.meta.get("study") else None  # past quota, no consent
        participant = study is not None
        if study is not None:
            _check_assigned(request, me, q)
            quota = S.quota(*study)  # answers and minutes: checked again as it is stored
        once = _check_once(request, me, q, jid, study=participant)
    _check_watched(request, me.id, q, jid)
    j = Judgement(
        id=jid,
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
        # a participant answers each pair once (across query ids: the trainer may ask a pair
        # again under a new id), and not a pair the trainer took back (withdrew)
        n = store.answers.add(
            [j],
            if_absent=True,
            quota=quota,
            once=once,
            by_pair=participant,
            refuse_undone=True,
            refuse_withdrawn=participant,
        )
    except QuotaReachedError as exc:  # another tab took the last answer, or the time is up
        raise HTTPException(403, QUOTA_REACHED) from exc
    except ConflictError as exc:
        raise HTTPException(409, str(exc)) from exc
    except DataError as exc:
        if store.queries.get(q.id) is None:  # the query vanished between the check and the write
            raise _missing_query(body.query_id) from exc
        raise HTTPException(422, f"answer refused: {exc}") from exc
    return JudgementSaved(judgement_id=j.id, saved=True, duplicate=n == 0)


def _check_assigned(request: Request, me: Annotator, q: QueryRecord) -> None:
    """403 when a study participant answers a query the study did not put on their screen (not
    theirs: unserved, or assigned to other people); 409 when their hold on the pair lapsed and
    other people fill its overlap meanwhile (checked, and their hold renewed, in one store
    transaction under the study's lock: the answer stored next takes the place it holds)."""
    st = request.app.state
    if not st.store.people.served(me.id, q.id):
        raise HTTPException(
            403,
            f"query {q.id} was not given to you: a study asks you only the pairs it shows you; "
            "ask for your next one with GET /api/queries/next",
        )
    st.assigner.check_hold(st.store, me, q)


def _check_once(request: Request, me: Annotator, q: QueryRecord, jid: str, *, study: bool) -> bool:
    """409 when ``me`` already has an answer that counts on ``q`` and may not answer it again;
    returns whether the store must still check it as it stores the answer (one answer per
    person and query). A study takes one answer per pair, across query ids (the trainer may ask
    a pair again under a new id). Anyone else may answer again only a
    consistency check the queue asks again (``repeat_share``) or when every earlier answer was
    collected by the trainer and so can no longer be undone (both answers are then kept).
    ``jid``: this answer's id (the same answer sent again is no second answer)."""
    st = request.app.state
    # ``jid`` itself stored: this answer sent again (a retry, another tab), not a second one
    given = st.store.answers.on_pair(me.id, q) if study else st.store.answers.on_query(me.id, q.id)
    mine = [(i, u) for i, u in given if i != jid]
    if not mine:
        return True
    undoable = any(u for _jid, u in mine)
    if study:
        raise HTTPException(
            409,
            ANSWERED
            if undoable
            else "you already answered this pair, and the trainer has collected that answer: "
            "a study takes one answer per pair, so it stands",
        )
    if undoable and not st.store.people.reasked(me.id, q, st.config.repeat_share):
        raise HTTPException(409, ANSWERED)
    return False


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


@router.delete("/judgements/{jid}", responses=errors(401, 403, 404, 409, 422))
def undo_judgement(request: Request, me: Me, jid: JudgementId) -> Undone:
    """Undo one of your judgements; 409 once the trainer has collected it."""
    store = request.app.state.store
    found = store.answers.get(jid)
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
    if _code_shown(request, me):  # a study's completed participant: their answers stand
        answers = [(j, False) for j, _undoable in answers]
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


def _code_shown(request: Request, me: Annotator) -> bool:
    """Whether ``me`` is a study participant who was shown the completion code (no undo)."""
    if not me.meta.get("study"):
        return False
    p = request.app.state.store.studies.participant(me.id)
    return p is not None and p.completed_at is not None


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
