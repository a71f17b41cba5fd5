"""Clips for the browser: segment ids → media keys, render status and URLs (never true rewards).

The media service (``preflab.media.MediaService``, Contract B) is optional: without it every
clip is 'unavailable' and the studio still works for judging from other cues.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

from preflab.records import Query
from preflab.store import FeedbackStore

log = logging.getLogger(__name__)
KEY_RE = re.compile(r"^[0-9a-f]{32}$")


class MediaLike(Protocol):
    """What the studio uses of :class:`preflab.media.MediaService`."""

    def key_for(self, segment_ids: Sequence[str]) -> str: ...
    def request(self, segment_ids: Sequence[str], priority: int) -> str: ...
    def status(self, key: str) -> str: ...
    def path(self, key: str) -> Any: ...


def media_url(key: str) -> str:
    return f"/media/{key}.mp4"


def fps_of(media: MediaLike | None, default: int) -> int:
    cfg = getattr(media, "config", None)
    fps = getattr(cfg, "fps", None)
    return int(fps) if isinstance(fps, int | float) and fps > 0 else default


def request_clip(media: MediaLike | None, segment_ids: Sequence[str], priority: int) -> dict:
    """Schedule rendering and return {media_key, media_url, status}."""
    if media is None:
        return {"media_key": None, "media_url": None, "status": "unavailable"}
    try:
        key = media.request(list(segment_ids), priority)
        status = media.status(key)
    except Exception:  # a broken renderer must not break judging
        log.exception("media request failed for %s", list(segment_ids))
        return {"media_key": None, "media_url": None, "status": "failed"}
    return {"media_key": key, "media_url": media_url(key), "status": status}


def media_status(media: MediaLike | None, key: str) -> str:
    if media is None:
        return "unavailable"
    try:
        return str(media.status(key))
    except Exception:
        log.exception("media status failed for %s", key)
        return "failed"


def query_view(
    store: FeedbackStore, media: MediaLike | None, q: Query, *, priority: int, fps: int
) -> dict[str, Any]:
    """{id, kind, round, a: [Clip], b: [Clip]} with one clip per segment."""
    info = store.segment_info([*q.a, *q.b])

    def clip(sid: str) -> dict[str, Any]:
        return {
            "segment_id": sid,
            **request_clip(media, [sid], priority),
            "length": info.get(sid, {}).get("length"),
            "fps": fps,
        }

    return {
        "id": q.id,
        "kind": q.kind,
        "round": q.round,
        "a": [clip(s) for s in q.a],
        "b": [clip(s) for s in q.b],
    }


def prefetch(media: MediaLike | None, queries: Sequence[Query]) -> None:
    """Render the clips of the queries likely to come next (priority 1)."""
    if media is None:
        return
    for q in queries:
        if q.kind == "rating":
            request_clip(media, q.a, 1)
        else:
            for sid in (*q.a, *q.b):
                request_clip(media, [sid], 1)


def stream_view(
    store: FeedbackStore, media: MediaLike | None, q: Query, *, fps: int
) -> dict[str, Any]:
    """{query_id, media_key, media_url, status, n_steps, fps}: one clip of all of ``q.a``."""
    info = store.segment_info(q.a)
    n_steps = sum(info.get(s, {}).get("length", 0) for s in q.a)
    return {"query_id": q.id, **request_clip(media, q.a, 0), "n_steps": n_steps, "fps": fps}
