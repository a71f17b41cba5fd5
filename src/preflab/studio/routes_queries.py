"""Queries, streams and media status for the signed-in annotator."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request

from preflab.kinds import RATING
from preflab.records import Annotator
from preflab.studio.auth import current_annotator, owner
from preflab.studio.clips import (
    KEY_RE,
    fps_of,
    media_status,
    media_url,
    prefetch,
    query_view,
    ready_first,
    stream_view,
)
from preflab.studio.config import StudioConfig
from preflab.studio.schemas import (
    ID_PATTERN,
    Consistency,
    ConsistencyRow,
    MediaInfo,
    NextQuery,
    NextStream,
    QueriesAhead,
    QueueRules,
    Skipped,
    errors,
)
from preflab.studio.study_assign import gate, is_participant, turn

router = APIRouter(prefix="/api")
Me = Annotated[Annotator, Depends(current_annotator)]
QueryId = Annotated[str, Path(min_length=1, max_length=64, pattern=ID_PATTERN)]
"""A query id in a path: checked before the store sees it (a NUL byte is a 422, not a 500)."""

# ----- the question queue (issue #25): prefetch, skip, consistency checks --------------------
Owner = Annotated[Annotator, Depends(owner)]


def queue_rules(config: StudioConfig) -> QueueRules:
    """The page's rules from the studio's config."""
    return QueueRules(
        min_plays=config.min_plays,
        min_answer_s=config.min_answer_s,
        undo_grace_s=config.undo_grace_s,
    )


@router.get("/queries/next", responses=errors(401, 403, 422))
def next_query(
    request: Request,
    me: Me,
    kind: Literal["pair", "group", "rating", "ranking"] | None = None,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> NextQuery:
    """The next query of your queue (newest round first, skipped ones last in their round; a
    pair you answered is never asked again; among the next few, pairs whose clips are rendered
    come first), or null. It counts as shown to you from now."""
    st = request.app.state
    window = st.config.open_query_window if after is not None else st.config.ready_window
    study = gate(request, me)  # a study participant: their study's assignment (issue #61)
    if study is not None:  # its order is its assignment: rendered clips do not go first
        # turned by ``after`` first, then the first with a place free held for them, in one step
        open_qs = st.assigner.queue(
            st.store, me, study[1], kind=kind, serve=True, after=after, window=window
        )
    else:
        open_qs = turn(
            st.store.people.queue(
                me.id, kind=kind, limit=window, repeat_share=st.config.repeat_share
            ),
            after,
        )
        open_qs = ready_first(st.media, open_qs, st.config.ready_window)
    if not open_qs:
        return NextQuery(query=None)
    fps = fps_of(st.media, st.config.default_fps)
    view = query_view(st.store, st.media, open_qs[0], priority=0, fps=fps)
    prefetch(st.media, open_qs[1 : 1 + st.config.prefetch])
    if study is None:  # a participant's was marked as it was held
        st.store.people.mark_served(me.id, open_qs[0].id)
    return NextQuery.model_validate({"query": view})


# declared before /queries/{query_id}, which would take "ahead" for an id
@router.get("/queries/ahead", responses=errors(401, 403, 422))
def queries_ahead(
    request: Request,
    me: Me,
    kind: Literal["pair", "group", "ranking"] = "pair",
    k: Annotated[int, Query(ge=1, le=10)] = 3,
    exclude: Annotated[list[str] | None, Query(max_length=20)] = None,
) -> QueriesAhead:
    """The next ``k`` queries of your queue, leaving out ``exclude`` (the one on screen and
    answers still on their way). Their clips are rendered now (the first at the priority of the
    one on screen) so that the page can load them before it shows them. Not marked as served:
    GET /api/queries/next serves each when its turn comes."""
    st = request.app.state
    gone = [x for x in (exclude or []) if len(x) <= 64]
    study = gate(request, me)
    if study is not None:  # none listed, their clips rendered all the same: a study shows a
        # pair only once it holds one of its places for them, which GET /api/queries/next does
        prefetch(
            st.media, st.assigner.queue(st.store, me, study[1], kind=kind, exclude=gone, limit=k)
        )
        return QueriesAhead.model_validate(
            {"queries": [], "rules": queue_rules(st.config).model_dump()}
        )
    else:
        qs = st.store.people.queue(
            me.id,
            kind=kind,
            limit=max(k, st.config.ready_window),
            repeat_share=st.config.repeat_share,
            exclude=gone,
        )
        qs = ready_first(st.media, qs, st.config.ready_window)[:k]
    fps = fps_of(st.media, st.config.default_fps)
    views = [
        query_view(st.store, st.media, q, priority=0 if i == 0 else 1, fps=fps)
        for i, q in enumerate(qs)
    ]
    return QueriesAhead.model_validate(
        {"queries": views, "rules": queue_rules(st.config).model_dump()}
    )


@router.get("/queries/{query_id}", responses=errors(401, 404, 422))
def get_query(request: Request, me: Me, query_id: QueryId) -> NextQuery:
    """One query by id (404 when it is not in this run)."""
    st = request.app.state  # a study participant: only the queries the study showed them
    q = st.store.queries.get(query_id)
    if q is None:
        raise HTTPException(
            404, f"no query {query_id!r} in this run; ask for one with GET /api/queries/next"
        )
    if is_participant(request, me):
        if not st.store.people.served(me.id, q.id):
            raise HTTPException(
                404,
                f"no query {query_id!r} among the pairs this study showed you; ask for your "
                "next one with GET /api/queries/next",
            )
        # on their screen again: their hold on its place starts again, when it is still theirs
        # or a place is free (else their answer is refused, saying why)
        st.assigner.hold(st.store, me, q)
    fps = fps_of(st.media, st.config.default_fps)
    view = query_view(st.store, st.media, q, priority=0, fps=fps)
    st.store.people.mark_served(me.id, q.id)
    return NextQuery.model_validate({"query": view})


@router.get("/media/{key}", responses=errors(401, 404))
def get_media_status(request: Request, me: Me, key: str) -> MediaInfo:
    """Render status of a clip: poll while 'pending'."""
    if not KEY_RE.match(key):
        raise HTTPException(404, "media keys are 32 lowercase hex characters; got another string")
    status = media_status(request.app.state.media, key)
    return MediaInfo.model_validate(
        {"key": key, "status": status, "url": media_url(key) if status == "ready" else None}
    )


@router.get("/streams/next", responses=errors(401))
def next_stream(request: Request, me: Me) -> NextStream:
    """The next rating stream (a query of kind 'rating') you have not rated, or null (always
    for a study participant: a study asks only its pairs)."""
    st = request.app.state
    if is_participant(request, me):  # a study asks only its pairs
        return NextStream(stream=None)
    qs = st.store.queries.open_for(me.id, kind=RATING.name, limit=1 + st.config.prefetch)
    if not qs:
        return NextStream(stream=None)
    fps = fps_of(st.media, st.config.default_fps)
    view = stream_view(st.store, st.media, qs[0], fps=fps)
    prefetch(st.media, qs[1:])
    return NextStream.model_validate({"stream": view})


@router.post("/queries/{query_id}/skip", responses=errors(401, 404, 422))
def skip_query(request: Request, me: Me, query_id: QueryId) -> Skipped:
    """Skip a query for now: it moves to the end of its round in your queue."""
    st = request.app.state
    if st.store.queries.get(query_id) is None:
        raise HTTPException(
            404, f"no query {query_id!r} in this run; ask for one with GET /api/queries/next"
        )
    st.store.people.skip(me.id, query_id)
    return Skipped(skipped=True)


@router.get("/owner/consistency", responses=errors(401, 403))
def consistency(request: Request, me: Owner) -> Consistency:
    """Consistency checks per annotator: pairs they answered twice with a preference (asked
    again by ``repeat_share``) and how many of those agreed."""
    st = request.app.state
    counts = st.store.people.consistency()
    rows = []
    for a in st.store.annotators.all():
        n, agreed = counts.get(a.id, (0, 0))
        rows.append(
            ConsistencyRow(
                id=a.id, name=a.name, repeats=n, agreed=agreed, agreement=agreed / n if n else None
            )
        )
    return Consistency(repeat_share=st.config.repeat_share, annotators=rows)
