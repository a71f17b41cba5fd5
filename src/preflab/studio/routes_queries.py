"""Queries, streams and media status for the signed-in annotator."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from preflab.records import Annotator
from preflab.studio.auth import current_annotator
from preflab.studio.clips import (
    KEY_RE,
    fps_of,
    media_status,
    media_url,
    prefetch,
    query_view,
    stream_view,
)
from preflab.studio.schemas import MediaInfo, NextQuery, NextStream, errors

router = APIRouter(prefix="/api")
Me = Annotated[Annotator, Depends(current_annotator)]


@router.get("/queries/next", responses=errors(401, 422))
def next_query(
    request: Request,
    me: Me,
    kind: Literal["pair", "group", "rating"] | None = None,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> NextQuery:
    """The next open query for you in the selector's order (newest round first), or null."""
    st = request.app.state
    window = st.config.open_query_window if after is not None else 1 + st.config.prefetch
    open_qs = st.store.open_queries_for(me.id, kind=kind, limit=window)
    if after is not None:
        ids = [q.id for q in open_qs]
        if after in ids:
            k = ids.index(after)
            rest = open_qs[k + 1 :] + open_qs[:k]
            open_qs = rest or open_qs
    if not open_qs:
        return NextQuery(query=None)
    fps = fps_of(st.media, st.config.default_fps)
    view = query_view(st.store, st.media, open_qs[0], priority=0, fps=fps)
    prefetch(st.media, open_qs[1 : 1 + st.config.prefetch])
    return NextQuery.model_validate({"query": view})


@router.get("/queries/{query_id}", responses=errors(401, 404))
def get_query(request: Request, me: Me, query_id: str) -> NextQuery:
    """One query by id (404 when it is not in this run)."""
    st = request.app.state
    q = st.store.query(query_id) if len(query_id) <= 64 else None
    if q is None:
        raise HTTPException(
            404, f"no query {query_id!r} in this run; ask for one with GET /api/queries/next"
        )
    fps = fps_of(st.media, st.config.default_fps)
    return NextQuery.model_validate(
        {"query": query_view(st.store, st.media, q, priority=0, fps=fps)}
    )


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
    """The next rating stream (a query of kind 'rating') you have not rated, or null."""
    st = request.app.state
    qs = st.store.open_queries_for(me.id, kind="rating", limit=1 + st.config.prefetch)
    if not qs:
        return NextStream(stream=None)
    fps = fps_of(st.media, st.config.default_fps)
    view = stream_view(st.store, st.media, qs[0], fps=fps)
    prefetch(st.media, qs[1:])
    return NextStream.model_validate({"stream": view})
